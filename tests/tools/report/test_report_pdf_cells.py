"""The PDF's tables keep their text inside their cells: six runs with long names in a
long folder, long hyperparameter values, in English and in Chinese, read back with
pdfplumber (:mod:`tests.tools.report.pdf_cells`). The demo's own report is checked the
same way in tests/mindspore/test_report_pdf.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main
from tests.tools.report.pdf_cells import problems

pytest.importorskip("pdfplumber")

NAMES = [
    "lr-sweep/baseline_adamw_lr3e-4_warmup2000_cosine_bs256_seed0",
    "lr-sweep/candidate_adamw_lr6e-4_warmup2000_cosine_bs256_seed0",
    "lr-sweep/candidate_adamw_lr1e-3_warmup500_linear_bs512_seed1_with_a_longer_tail",
    "ablation/no-grad-clip",
    "ablation/grad_clip_0.5_and_label_smoothing_0.1_and_dropout_0.2_everywhere_x",
    "大模型预训练_学习率搜索_第三组_批大小二百五十六",
]


def six_runs(root: Path) -> Path:
    """Six runs below a deep folder: long names, one without a single space or dash to
    break at, long hyperparameter values (a path, a list of layers)."""
    for seed, name in enumerate(NAMES):
        rng = np.random.default_rng(seed)
        hparams = {
            "lr": 3e-4 * (seed + 1),
            "seed": seed,
            "data_path": "/mnt/shared/datasets/pretraining/zh-en-mixture-v3/shards/"
            f"train-{seed:05d}-of-00064.mindrecord",
            "layers_frozen": ",".join(f"encoder.layer.{i}.attention.self.query" for i in range(4)),
        }
        with mindwatch.Monitor(root / name, {"print_every": 0, "hparams": hparams}) as mon:
            for step in range(1, 121):
                mon.log_scalars(
                    step,
                    {
                        "train/loss": 2.0 / (1 + step / 30) + 0.05 * rng.random(),
                        "train/lr": 0.1,
                        "train/grad_norm": 1.0 + rng.random(),
                        "perf/samples_per_s": 1000 + 50 * rng.random(),
                        "perf/step_time_ms": 30 + rng.random(),
                    },
                )
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    deep = tmp_path_factory.mktemp("cells") / "experiments" / "2026-q4" / "pretraining-7b"
    return six_runs(deep / "a_folder_name_that_alone_is_longer_than_the_label_column_of_a_table")


def pdf_of(logdir: Path, out: Path, lang: str) -> Path:
    result = CliRunner().invoke(
        main, ["report", str(logdir), "--out", str(out), "--format", "pdf", "--lang", lang]
    )
    assert result.exit_code == 0, result.output
    return out / "report.pdf"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_six_runs_with_long_names_stay_in_their_cells(
    runs: Path, tmp_path: Path, lang: str
) -> None:
    cells, found = problems(pdf_of(runs, tmp_path / "out", lang))
    # the comparison (7 rows x 5), the shared hyperparameters, 6 summaries and their
    # hyperparameters: hundreds of cells, so the check looked at tables
    assert cells > 150
    assert found == [], "\n".join(found[:20])


def test_the_long_names_are_all_there(runs: Path, tmp_path: Path) -> None:
    """Wrapped, not cut: every run name and the hyperparameter path read back whole
    once the lines of a cell are joined."""
    import pdfplumber

    with pdfplumber.open(pdf_of(runs, tmp_path / "out", "en")) as document:
        text = "".join(
            (page.extract_text() or "").replace("\n", "") for page in document.pages
        ).replace(" ", "")
    for name in NAMES:
        assert name.replace(" ", "") in text, name
    assert "train-00005-of-00064.mindrecord" in text


def test_a_table_longer_than_a_page_goes_on_with_its_rows_whole(tmp_path: Path) -> None:
    """150 hyperparameters: their table spans pages, every row on one page, every
    cell's text inside it, none left out."""
    import pdfplumber

    hparams = {f"layer_{i:03d}_dropout": 0.1 for i in range(150)}
    with mindwatch.Monitor(tmp_path / "run", {"print_every": 0, "hparams": hparams}) as mon:
        for step in range(1, 31):
            mon.log_scalars(step, {"train/loss": 1.0 / step, "perf/step_time_ms": 30.0})
    pdf = pdf_of(tmp_path / "run", tmp_path / "out", "en")
    cells, found = problems(pdf)
    assert cells >= 2 * 150
    assert found == [], "\n".join(found[:20])
    with pdfplumber.open(pdf) as document:
        pages = [page.extract_text() or "" for page in document.pages]
    holding = [i for i, text in enumerate(pages) if "layer_" in text]
    assert len(holding) >= 2  # the table went on on the next page
    text = "\n".join(pages)
    for key in hparams:
        assert text.count(key) == 1, key


@pytest.mark.parametrize(
    "text",
    [
        "mean 13,400 samples/s, median 12,100 samples/s, p95 27,100 samples/s, min 92.1",
        "lr-sweep/candidate_adamw_lr1e-3_warmup500_linear_bs512_seed1_with_a_longer_tail",
        "/mnt/shared/datasets/pretraining/zh-en-mixture-v3/shards/train-00004.mindrecord",
        "均值 1,030 样本/秒，中位数 1,030 样本/秒，95 分位 1,050 样本/秒（第 117 步）",
        "WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW",
    ],
)
@pytest.mark.parametrize("width", [40.0, 90.0, 170.0])
def test_lines_fit_their_width_and_lose_nothing(text: str, width: float) -> None:
    from mindwatch.tools.report.charts import style
    from mindwatch.tools.report.fit import fit_lines, text_width

    with style():
        lines = fit_lines(text, width, 8.0)
        assert all(text_width(line, 8.0) <= width for line in lines), lines
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        assert not any(line.startswith(("，", "）", ",")) for line in lines), lines
        if text_width(text, 8.0) > width:
            assert len(lines) > 1
