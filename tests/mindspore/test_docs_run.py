"""The README and the pages moved out of it run as they are shown.

Each page is parsed with Sybil and run top to bottom in a sandbox folder that stands for
a checkout of this repository (``examples/`` and ``benchmarks/`` link to the real ones),
with this venv's ``mindwatch`` and ``python`` first on PATH and an English locale:

* ```` ```console ```` blocks: each ``$ command`` runs in bash, and what it prints
  (stdout and stderr, in order) must be the lines shown under it. Numbers, the
  folders of a path and Markdown bold may differ (times, sizes, temporary folders,
  the fastest run are a machine's); line breaks may too (wrapping follows a number's
  width); a line
  ``...`` stands for any lines, ``...`` inside a line for any text. A ``^C`` in the
  shown output is where a server (``mindwatch tensorboard``) gets Ctrl-C, once what it
  printed before matches. This machine's host name reads as ``vm``, the docs' machine.
  A warning of a rule that judges wall-clock time (``throughput_drop``, ``straggler``,
  ``stall``) printed while the command trained is left out when the block shows none:
  this suite's other workers slow a run for seconds (seen: an example's samples/s 57 %
  below its own baseline for 53 steps), which the rule rightly says, and a page cannot
  promise a machine's speed. That a clean run raises no such alert is judged where the
  run has the machine to itself (test_demo_is_quiet.py, the alert scorecard).
* ```` ```bash ```` blocks: each command runs and must exit 0; ``make`` targets run as
  ``make -n`` in the checkout (``make test`` is this suite; ``make demo``'s recipe is
  ``mindwatch demo``, which the console blocks run).
* ```` ```python ```` blocks run in one namespace per page, ``>>>`` blocks as doctests
  whose output is compared as console output is. A block titled with a file
  (```` ```python title="examples/custom_loop.py" ````) is an excerpt: its lines must be
  that file's lines, in order; the file's own command runs on the page or in its test.
* ```` ```yaml ```` blocks whose first line is ``# NAME.yaml`` are written to that file
  for the blocks after them (the other YAML blocks are validated by tests/test_docs.py).
* ```` ```text ```` blocks are output without a command: checked when a hidden block
  before them set ``docs.expect``, prose otherwise.

A page's hidden setup is Sybil's ``<!-- invisible-code-block: python ... -->``, calling
the :class:`Docs` helpers below: a page shows what a user types, and its hidden lines
make the folder that user would have (a few demo runs, a legacy folder). ``<!-- skip:
next "reason" -->`` skips one block; its reason must name where that block runs instead.
Every fenced block of a page must be one of the above, so none goes unrun unnoticed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Optional
from unittest import SkipTest

import pytest
from sybil import Document, Example, Region, Sybil
from sybil.evaluators.doctest import DocTestEvaluator
from sybil.parsers.abstract.doctest import DocTestStringParser
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

from tests.test_docs import fenced
from tests.test_runs_never_mix import tensorboardx_run

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [
    ROOT / "README.md",
    DOCS / "quickstart.md",
    DOCS / "install.md",
    DOCS / "usage.md",
    DOCS / "tensorboard.md",
    DOCS / "reading.md",
    DOCS / "report.md",
]
COMMAND_TIMEOUT = 600.0
HOST = socket.gethostname()  # reads as "vm" in what commands print: the docs' machine

# -- comparing shown output with real output -------------------------------------------

_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*(?:[eE][+-]?\d+)?")
_FOLDERS = re.compile(r"(?:[\w.~+-]*/)+(?=[\w.~-])")  # runs/exp/, /tmp/x/, .venv/bin/


def _tokens(lines: Sequence[str]) -> list[str]:
    """Output as compared: words, with the folders of paths dropped, each number 0 and
    no Markdown bold (which of two runs was faster is the machine's). Words, not lines:
    a summary wrapped at 80 columns wraps elsewhere when a number is one digit longer."""
    text = "\n".join(lines).replace("**", "")
    return _NUMBER.sub("0", _FOLDERS.sub("", text)).split()


def _trimmed(lines: Sequence[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def matches(shown: Sequence[str], real: Sequence[str]) -> bool:
    """Whether the real output is the shown one (see the module's docs): word by word,
    where a shown ``...`` is any words and a word with ``...`` in it any word like it."""
    want, got = _tokens(shown), _tokens(real)
    tests: list[Any] = []
    for word in want:
        if word == "...":
            tests.append(None)
        elif "..." in word:
            parts = word.split("...")
            tests.append(re.compile(".*".join(map(re.escape, parts)) + r"\Z").match)
        else:
            tests.append(word.__eq__)
    # below[j]: want[i + 1:] matches got[j:]; row[j]: want[i:] matches got[j:]
    below = [False] * len(got) + [True]
    for test in reversed(tests):
        row = [False] * (len(got) + 1)
        for j in range(len(got), -1, -1):
            if test is None:
                row[j] = below[j] or (j < len(got) and row[j + 1])
            else:
                row[j] = j < len(got) and below[j + 1] and bool(test(got[j]))
        below = row
    return below[0]


_TIMING_WARNING = re.compile(r"mindwatch: \[warning\] (?:throughput_drop|straggler|stall) at step ")


def without_timing_warnings(shown: Sequence[str], real: Sequence[str]) -> list[str]:
    """``real`` without the warnings of wall-clock rules, unless ``shown`` has one."""
    if any(_TIMING_WARNING.match(line) for line in shown):
        return list(real)
    return [line for line in real if not _TIMING_WARNING.match(line)]


def difference(shown: Sequence[str], real: Sequence[str]) -> str:
    return (
        "shown:\n  "
        + "\n  ".join(_trimmed(shown))
        + "\nbut it printed:\n  "
        + "\n  ".join(_trimmed(real)[-60:])
    )


# -- running commands ------------------------------------------------------------------


class Shell:
    """Runs a page's commands in its sandbox, as a user in a checkout would."""

    def __init__(self, sandbox: Path) -> None:
        self.sandbox = sandbox
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANGUAGE"))}
        bin_dir = str(Path(sys.executable).parent)
        env.update(
            PATH=bin_dir + os.pathsep + env.get("PATH", ""),
            LANG="C.UTF-8",
            GLOG_v="3",
            PYTHONUNBUFFERED="1",
            COLUMNS="80",
            XDG_STATE_HOME=str(sandbox / ".state"),
        )
        self.env = env

    def run(self, command: str, shown: Sequence[str] = ()) -> tuple[list[str], int]:
        """Run ``command``; with a ``^C`` in ``shown``, interrupt it once the lines shown
        before it were printed. Returns what it printed, and its exit status."""
        before: Optional[list[str]] = None
        for i, line in enumerate(shown):
            if line.startswith("^C"):
                before = list(shown[:i])
        process = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.sandbox,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert process.stdout is not None
        lines: list[str] = []
        reader = threading.Thread(
            target=lambda: lines.extend(line.rstrip("\n") for line in process.stdout or ()),
            daemon=True,
        )
        reader.start()
        deadline = time.monotonic() + COMMAND_TIMEOUT
        interrupted = False
        try:
            while process.poll() is None:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{command!r} still running after {COMMAND_TIMEOUT} s")
                if before is not None and not interrupted and matches(before, list(lines)):
                    os.killpg(process.pid, signal.SIGINT)
                    interrupted = True
                    deadline = time.monotonic() + 60
                time.sleep(0.1)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            reader.join(timeout=10)
        if before is not None and not interrupted:
            raise AssertionError(
                f"{command!r} ended before it printed:\n{difference(before, lines)}"
            )
        if len(HOST) > 1:
            lines = [line.replace(HOST, "vm") for line in lines]
        return lines, process.returncode


def _commands(text: str, prompt: str = "") -> Iterator[tuple[str, list[str]]]:
    """``(command, lines shown after it)`` for each command of a block; with a prompt,
    only the lines starting with it are commands. A trailing backslash continues one."""
    command: Optional[str] = None
    shown: list[str] = []
    pending = ""
    for line in text.split("\n"):
        if pending:
            pending += "\n" + line
            if not line.endswith("\\"):
                command, pending = pending, ""
            continue
        if prompt and not line.startswith(prompt):
            if command is not None:
                shown.append(line)
            continue
        if not prompt and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if command is not None:
            yield command, shown
        shown = []
        command = None
        if line.endswith("\\"):
            pending = line[len(prompt) :]
        else:
            command = line[len(prompt) :]
    if command is not None:
        yield command, shown


def evaluate_console(example: Example) -> None:
    docs: Docs = example.namespace["docs"]
    for command, lines in _commands(str(example.parsed), prompt="$ "):
        real, _ = docs.shell.run(docs.command(command), lines)
        shown = [line[2:] if line.startswith("^C") else line for line in lines]
        real = without_timing_warnings(shown, real)
        if not matches(shown, real):
            raise AssertionError(f"$ {command}\n{difference(shown, real)}")


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    """``make ARGS`` in the checkout, as from a shell (not as a sub-make of ``make test``,
    which would print the folders it enters and pass on its flags)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return subprocess.run(["make", *args], cwd=ROOT, env=env, capture_output=True, text=True)


def evaluate_bash(example: Example) -> None:
    docs: Docs = example.namespace["docs"]
    for command, _ in _commands(str(example.parsed)):
        make = re.fullmatch(r"make\s+([\w-]+)\s*(#.*)?", command)
        if make:
            done = _make("-n", make.group(1))
            assert done.returncode == 0, f"make -n {make.group(1)}: {done.stderr}"
            continue
        real, status = docs.shell.run(command)
        assert status == 0, f"{command}: exit status {status}:\n" + "\n".join(real[-40:])


def evaluate_yaml(example: Example) -> None:
    text = str(example.parsed)
    name = re.match(r"#\s*([\w./-]+\.ya?ml)\s*$", text.split("\n", 1)[0])
    if name:
        example.namespace["docs"].write(name.group(1), text)


def evaluate_text(example: Example) -> None:
    docs: Docs = example.namespace["docs"]
    if docs.expect is None:
        return
    shown, real = str(example.parsed).split("\n"), docs.expect.split("\n")
    docs.expect = None
    if not matches(shown, real):
        raise AssertionError(difference(shown, real))


def excerpts(document: Document) -> Iterator[Region]:
    """```` ```python title="FILE" ```` blocks: their lines must be lines of FILE, in order."""
    for match in re.finditer(r'^```python title="([^"]+)"\n(.*?)^```$', document.text, re.M | re.S):
        yield Region(match.start(), match.end(), (match.group(1), match.group(2)), check_excerpt)


def check_excerpt(example: Example) -> None:
    name, code = example.parsed
    source = [line.strip() for line in (ROOT / name).read_text(encoding="utf-8").split("\n")]
    at = 0
    for line in (line.strip() for line in code.split("\n")):
        if line:
            try:
                at = source.index(line, at) + 1
            except ValueError:
                raise AssertionError(f"not a line of {name} after line {at}: {line}") from None


class MaskedDocTestEvaluator(DocTestEvaluator):
    """Sybil's doctest evaluator, comparing output as the console blocks are."""

    def __init__(self) -> None:
        super().__init__()
        self.runner._checker = _MaskedChecker()  # doctest takes a checker only in __init__


class _MaskedChecker:
    def check_output(self, want: str, got: str, optionflags: int) -> bool:
        return matches(want.split("\n"), got.split("\n"))

    def output_difference(self, example: Any, got: str, optionflags: int) -> str:
        return difference(example.want.split("\n"), got.split("\n"))


class PythonBlocks(PythonCodeBlockParser):
    def __init__(self) -> None:
        super().__init__()
        self.doctest_parser = DocTestStringParser(MaskedDocTestEvaluator())


# -- what hidden setup blocks call -----------------------------------------------------


class Docs:
    """The ``docs`` name of a page's namespace: its sandbox and setup helpers."""

    def __init__(self, sandbox: Path) -> None:
        self.sandbox = sandbox
        self.shell = Shell(sandbox)
        self.expect: Optional[str] = None
        self.jobs: list[subprocess.Popen[bytes]] = []
        for name in ("examples", "benchmarks"):
            (sandbox / name).symlink_to(ROOT / name, target_is_directory=True)

    def command(self, command: str) -> str:
        """What runs for a shown command: ``make demo`` is its recipe, ``mindwatch
        demo`` (checked against the Makefile with ``make -n``)."""
        if command.split("#", maxsplit=1)[0].strip() == "make demo":
            done = _make("-n", "demo")
            recipe = done.stdout.strip().split("\n")[-1]  # after any install steps
            assert done.returncode == 0, done
            assert recipe.endswith("/mindwatch demo"), done
            return "mindwatch demo"
        return command

    def write(self, name: str, text: str) -> Path:
        path = self.sandbox / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def model_inputs(self, steps: int = 40) -> tuple[Any, Any, Any, Any, int]:
        """``net, loss_fn, optimizer, dataset, epochs`` of a small real training job: the
        demo's data and MLP, its parameters named as a model's (``layers.0.weight``,
        ``head.bias``), one epoch of ``steps`` steps."""
        from mindspore import nn

        from mindwatch.mindspore.demo import CLASSES, FEATURES, HIDDEN, make_dataset

        class Net(nn.Cell):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.layers = nn.SequentialCell(
                    nn.Dense(FEATURES, HIDDEN), nn.ReLU(), nn.Dense(HIDDEN, HIDDEN), nn.ReLU()
                )
                self.head = nn.Dense(HIDDEN, CLASSES)

            def construct(self, x: Any) -> Any:
                return self.head(self.layers(x))

        net = Net()
        loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        optimizer = nn.Adam(net.trainable_params(), learning_rate=1e-3)
        return net, loss_fn, optimizer, make_dataset(steps * 32, 32, seed=0), 1

    def demo(
        self,
        logdir: str = "runs",
        *,
        name: str = "",
        steps: int = 60,
        seed: int = 0,
        workers: int = 1,
    ) -> Path:
        """A finished ``mindwatch demo`` run below ``logdir`` (renamed ``name``); with
        ``workers``, data-parallel under msrun."""
        before = set((self.sandbox / logdir).glob("*"))
        done = subprocess.run(
            [
                *("mindwatch", "demo", "--logdir", logdir, "--steps", str(steps)),
                *("--seed", str(seed), "--workers", str(workers)),
            ],
            cwd=self.sandbox,
            env=self.shell.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        (run,) = set((self.sandbox / logdir).glob("*")) - before
        if name:
            run = run.rename(run.with_name(name))
        return run

    def tensorboardx_run(self, folder: str, steps: int) -> None:
        """A run of ``steps`` losses written into ``folder`` by tensorboardX (another tool:
        run again, it adds its files to the same folder)."""
        tensorboardx_run(self.sandbox / folder, 1, steps)

    def age(self, folder: str, seconds: float) -> None:
        """Make every file of ``folder`` last changed ``seconds`` ago."""
        when = time.time() - seconds
        for path in [self.sandbox / folder, *(self.sandbox / folder).rglob("*")]:
            os.utime(path, (when, when))

    def training(self, logdir: str) -> None:
        """A job still training into ``logdir`` while the rest of the page runs (the
        custom-loop example, stopped when the page ends)."""
        command = [sys.executable, "examples/custom_loop.py", "--logdir", logdir]
        job = subprocess.Popen(
            [*command, "--steps", "20000"],
            cwd=self.sandbox,
            env=self.shell.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.jobs.append(job)
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while not list((self.sandbox / logdir).glob("events.out.tfevents.*")):
            assert job.poll() is None, f"{command} exited with {job.returncode}"
            assert time.monotonic() < deadline, f"{command} wrote nothing"
            time.sleep(0.2)

    def close(self) -> None:
        for job in self.jobs:
            job.kill()
            job.wait()

    def has_curves(self, folder: str, *tags: str) -> None:
        """The run folder (a glob matching one) holds these tags, read by TensorBoard's
        own reader."""
        from tests.tbread import scalars

        (run,) = self.sandbox.glob(folder)
        read = scalars(run)
        missing = [tag for tag in tags if not read.get(tag)]
        assert not missing, f"{folder}: no {missing} (it has {sorted(read)})"

    @contextlib.contextmanager
    def logged(self) -> Iterator[list[str]]:
        """The warnings mindwatch logs inside the block (each starts ``mindwatch:``)."""
        lines: list[str] = []

        class Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                lines.append(record.getMessage())

        handler = Keep(logging.WARNING)
        logger = logging.getLogger("mindwatch")
        logger.addHandler(handler)
        try:
            yield lines
        finally:
            logger.removeHandler(handler)


# -- the test --------------------------------------------------------------------------

SYBIL = Sybil(
    parsers=[
        SkipParser(),
        PythonBlocks(),
        excerpts,
        CodeBlockParser("console", evaluate_console),
        CodeBlockParser("bash", evaluate_bash),
        CodeBlockParser("yaml", evaluate_yaml),
        CodeBlockParser("text", evaluate_text),
    ]
)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_block_of_the_page_runs_as_shown(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = SYBIL.parse(page)
    examples = list(document)
    unrun = [
        f"line {block.first}: ```{block.lang}"
        for block in fenced(page)
        if not any(block.first <= example.line <= block.last for example in examples)
    ]
    assert not unrun, f"{page.name}: blocks neither run nor checked (tag them): {unrun}"
    reasons = re.findall(r"<!-- skip: next(.*?)-->", document.text)
    assert all(reason.strip() for reason in reasons), f"{page.name}: a skip needs a reason"

    sandbox = tmp_path / "checkout"
    sandbox.mkdir()
    monkeypatch.chdir(sandbox)
    document.namespace["docs"] = docs = Docs(sandbox)
    try:
        for example in examples:
            try:
                example.evaluate()
            except SkipTest:
                continue
            except Exception as error:
                where = f"{page.relative_to(ROOT)} line {example.line}"
                raise AssertionError(f"{where}: {error}") from error
    finally:
        docs.close()


@pytest.mark.parametrize(
    ("shown", "real", "same"),
    [
        ("loss 2.3302 -> 0.1515 in 1.8 s", "loss 2.1 -> 0.09 in 12.5 s", True),
        ("Run folder: /tmp/a/runs/x_demo", "Run folder: /home/u/runs/x_demo", True),
        ("Run folder: /tmp/a/runs/x_demo", "Run folder: /tmp/a/runs/y_demo", False),
        ("alerts: none", "alerts: 1 spike", False),
        (
            "step 1 compiled for 8.4 ms (left out)",
            "step 1 compiled for 18.4 ms (left\n  out)",
            True,
        ),
        ("| **0.15** | 2.0 s |", "| 0.15 | **2.1 s** |", True),
        (
            "...\n[PROBLEM] run .: mixed\n1 problem found",
            "[ ok] a\n[ ok] b\n[PROBLEM] run .: mixed\n1 problem found",
            True,
        ),
        ("[PROBLEM] run .: mixed", "[PROBLEM] run .: mixed\n1 problem found", False),
        ("a local file system (...)", "a local file system (overlay)", True),
        ("...+NotoSansCJKscSubset-Regular CID", "GICETM+NotoSansCJKscSubset-Regular CID", True),
        ("first\n...\nlast", "first\nlast", True),
        ("first\n...\nlast", "first\nmiddle\nlast\nmore", False),
    ],
)
def test_shown_output_is_compared_as_the_docs_say(shown: str, real: str, same: bool) -> None:
    assert matches(shown.split("\n"), real.split("\n")) is same


SLOWED = (
    "mindwatch: [warning] throughput_drop at step 173, rank 0 (vm): perf/samples_per_s fell "
    "to 688 (median of the last 53), 57% below its baseline 1612"
)


@pytest.mark.parametrize(
    ("shown", "real", "kept"),
    [
        (["step 150", "step 200"], ["step 150", SLOWED, "step 200"], ["step 150", "step 200"]),
        (["step 150", "..."], [SLOWED.replace("throughput_drop", "stall")], []),
        (["a"], ["a", SLOWED.replace("throughput_drop", "spike")], None),  # not a timing rule
        (["a", SLOWED], ["a", SLOWED], None),  # the page shows one: it must be there
        (["a"], ["a", "  " + SLOWED], None),  # a line that quotes one is output
    ],
)
def test_a_warning_of_a_wall_clock_rule_is_left_out_unless_shown(
    shown: list[str], real: list[str], kept: Optional[list[str]]
) -> None:
    assert without_timing_warnings(shown, real) == (real if kept is None else kept)
