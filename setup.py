"""The build step pyproject.toml cannot say: compile the message catalogues.

``src/mindwatch/locale/<lang>/LC_MESSAGES/mindwatch.po`` (edited by translators, in git)
becomes ``mindwatch.mo`` (what :mod:`gettext` reads, not in git) whenever setuptools
builds the package: into the wheel for ``pip install .`` and ``python -m build``, next to
the ``.po`` for ``pip install -e .``. Babel is a build requirement (pyproject.toml).
Everything else about the package is in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


def compile_catalogues(source: Path, target: Path) -> list[Path]:
    """Compile every ``<lang>/LC_MESSAGES/*.po`` below ``source`` to the same path below
    ``target``; fuzzy (unchecked) translations are left out, as gettext tools do."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    written = []
    for po in sorted(source.glob("*/LC_MESSAGES/*.po")):
        mo = target / po.relative_to(source).with_suffix(".mo")
        mo.parent.mkdir(parents=True, exist_ok=True)
        with open(po, "rb") as handle:
            catalog = read_po(handle, locale=po.parts[-3], domain=po.stem)
        with open(mo, "wb") as handle:
            write_mo(handle, catalog)
        written.append(mo)
    return written


class BuildWithCatalogues(build_py):
    """``build_py`` that also writes the compiled catalogues."""

    def run(self) -> None:
        super().run()
        source = Path(self.get_package_dir("mindwatch")) / "locale"
        # An editable install imports from the source tree: the .mo goes there.
        target = source if self.editable_mode else Path(self.build_lib) / "mindwatch" / "locale"
        compile_catalogues(source, target)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        if not self.editable_mode:
            source = Path(self.get_package_dir("mindwatch")) / "locale"
            target = Path(self.build_lib) / "mindwatch" / "locale"
            outputs += [
                str(target / po.relative_to(source).with_suffix(".mo"))
                for po in sorted(source.glob("*/LC_MESSAGES/*.po"))
            ]
        return outputs


if __name__ == "__main__":  # as setuptools runs it (tests import compile_catalogues)
    setup(cmdclass={"build_py": BuildWithCatalogues})
