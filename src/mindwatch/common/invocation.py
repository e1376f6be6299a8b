"""How the user runs this mindwatch, so that a follow-up command mindwatch prints
(``mindwatch tensorboard <dir>``, ``mindwatch doctor <run>``) works as printed.

A venv that is not activated has no ``mindwatch`` on PATH: a user who typed
``.venv/bin/mindwatch demo`` must be told ``.venv/bin/mindwatch tensorboard ...``, and one
who typed ``python -m mindwatch`` (or ``.venv/bin/python -m mindwatch``) that form. The
command is read from how this process was started:

* the ``mindwatch`` script (``sys.argv[0]``): ``mindwatch`` when that name on PATH is this
  very script, else the path as it was typed (relative to the shell's folder, as typed);
* ``python -m mindwatch``: the interpreter as it was typed (``sys.orig_argv``) with
  ``-m mindwatch``; ``python`` on PATH counts only when it is this interpreter's own path
  (a venv's ``python`` is a link to the system's, but only its own path is the venv);
* anything else (a training script, a test): the ``mindwatch`` script installed next to
  this interpreter, named as above, or ``<python> -m mindwatch``.

A process mindwatch starts for the user (the ranks of ``mindwatch demo --workers 2``,
which ``msrun`` starts as ``python <script>`` with a PATH of its own) is given the
parent's answer in :data:`ENVIRONMENT` and prints exactly that.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Callable, Optional, Union

__all__ = ["ENVIRONMENT", "command_line", "mindwatch_command", "python_command"]

#: Set by mindwatch for the processes it starts: the command, shell-quoted, to print.
ENVIRONMENT = "MINDWATCH_COMMAND"
_NAME = "mindwatch"


def command_line(*args: Union[str, os.PathLike[str]]) -> str:
    """``<mindwatch> ARGS...``, each argument quoted for a POSIX shell:
    ``command_line("tensorboard", run)`` -> ``.venv/bin/mindwatch tensorboard /runs/a``."""
    return " ".join([mindwatch_command(), *(shlex.quote(os.fspath(a)) for a in args)])


def mindwatch_command() -> str:
    """The words that run this mindwatch from the user's shell, quoted (see the module)."""
    given = os.environ.get(ENVIRONMENT, "").strip()
    if given:
        return given
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name in (_NAME, f"{_NAME}.exe"):  # the console script, as typed
        return _shown(argv0, _same_file)
    if _is_our_main(argv0):  # python -m mindwatch
        return f"{_typed_python()} -m {_NAME}"
    script = Path(sys.executable).with_name(_NAME)
    if script.is_file():
        return _shown(_below_here(str(script)), _same_file)
    return f"{python_command()} -m {_NAME}"


def python_command() -> str:
    """The words that run this Python interpreter from the user's shell, quoted."""
    return _shown(_below_here(sys.executable), _same_path)


def _is_our_main(argv0: str) -> bool:
    path = Path(argv0)
    return path.name == "__main__.py" and path.parent.name == _NAME


def _typed_python() -> str:
    """The interpreter as the user typed it (``python``, ``.venv/bin/python``)."""
    typed = getattr(sys, "orig_argv", [""])[0]
    if typed and _same_path(shutil.which(typed), sys.executable):
        return shlex.quote(typed)
    return python_command()


def _shown(path: str, same: Callable[[Optional[str], str], bool]) -> str:
    """``path``'s bare name when PATH finds this very file under it, else ``path`` (one
    in the current folder as ``./name``: a bare name would be looked up on PATH)."""
    name = os.path.basename(path)
    if same(shutil.which(name), path):
        return shlex.quote(name)
    return shlex.quote(path if os.sep in path else os.path.join(".", path))


def _below_here(path: str) -> str:
    """An absolute ``path`` relative to the current folder when it is below it (what a
    user types: ``.venv/bin/mindwatch``), else as it is."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative


def _same_file(one: Optional[str], other: str) -> bool:
    """The same program (links followed: a link in ~/bin to a venv's script is it)."""
    try:
        return one is not None and os.path.samefile(one, other)
    except OSError:
        return False


def _same_path(one: Optional[str], other: str) -> bool:
    """The same interpreter path (links *not* followed: a venv's ``python`` links to the
    system's, whose own path runs without the venv)."""
    return one is not None and os.path.abspath(one) == os.path.abspath(other)
