"""What `pip install` builds from pyproject.toml and setup.py: metadata with no
deprecation warnings, a wheel with the compiled message catalogues, the vendored
plotly.js and CJK font, and no font package among the dependencies."""

from __future__ import annotations

import email
import gettext
import io
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def metadata(tmp_path_factory: pytest.TempPathFactory) -> tuple[email.message.Message, str]:
    """The wheel's METADATA as setuptools (the build backend pip runs) writes it, and
    what the build printed, with every warning turned into an error."""
    tree = tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    out = tree / "out"
    out.mkdir()
    code = (
        "import sys; from setuptools import build_meta; "
        "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code, str(out)],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    info = done.stdout.strip().splitlines()[-1]
    text = (out / info / "METADATA").read_text(encoding="utf-8")
    return email.message_from_string(text), done.stdout + done.stderr


def test_the_build_gives_no_deprecation_warning(
    metadata: tuple[email.message.Message, str],
) -> None:
    _, output = metadata
    assert "Warning" not in output


def test_the_licence_is_an_spdx_expression_with_its_file(
    metadata: tuple[email.message.Message, str],
) -> None:
    meta, _ = metadata
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert not [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]


def test_the_report_needs_no_plotly_package(
    metadata: tuple[email.message.Message, str],
) -> None:
    """plotly.js is vendored: the Python package is for the tests only (dev extra)."""
    meta, _ = metadata
    needs = [r for r in meta.get_all("Requires-Dist") or [] if r.startswith("plotly")]
    assert needs  # in the dev and bench extras
    assert all("extra ==" in r for r in needs), needs


def test_the_cjk_font_is_vendored_not_a_dependency(
    metadata: tuple[email.message.Message, str],
) -> None:
    """The report's CJK font is the vendored Noto Sans CJK SC subset (vendor/README.md):
    no font package is installed with mindwatch."""
    meta, _ = metadata
    requires = meta.get_all("Requires-Dist") or []
    assert not [r for r in requires if "font" in r.lower()], requires


def test_the_mindspore_extra_brings_numpy_1(
    metadata: tuple[email.message.Message, str],
) -> None:
    """MindSpore's CPU wheels are built against NumPy 1 (2.10 does not say so)."""
    meta, _ = metadata
    extra = [r for r in meta.get_all("Requires-Dist") or [] if 'extra == "mindspore"' in r]
    assert any(r.startswith("mindspore") and ">=2.7.2" in r and "<2.11" in r for r in extra)
    assert any(r.startswith("numpy") and "<2" in r for r in extra), extra


def test_the_wheel_carries_the_compiled_chinese_catalogue(tmp_path: Path) -> None:
    """setup.py compiles each .po into the wheel: an installed mindwatch needs no Babel."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.mo")
    )
    out = tree / "out"
    out.mkdir()
    code = (
        "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = out / done.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "mindwatch/locale/zh/LC_MESSAGES/mindwatch.po" in names
        mo = archive.read("mindwatch/locale/zh/LC_MESSAGES/mindwatch.mo")
        # the HTML report's plotly.js and the PDF's CJK font, with their licences and
        # the note of their versions: a report written by an installed mindwatch fetches
        # nothing, and the OFL's condition (the licence travels with the font) holds
        vendor = ROOT / "src/mindwatch/tools/report/vendor"
        for name in (
            "plotly-cartesian.min.js",
            "LICENSE-plotly.js.txt",
            "NotoSansCJKsc-Subset.ttf",
            "LICENSE-NotoSansCJK.txt",
            "README.md",
        ):
            carried = archive.read(f"mindwatch/tools/report/vendor/{name}")
            assert carried == (vendor / name).read_bytes(), name
    assert gettext.GNUTranslations(io.BytesIO(mo)).gettext("critical") == "严重"
