"""``mindwatch report``: every format, escaping, and the HTML in a real headless Chromium."""

from __future__ import annotations

import http.server
import json
import math
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main

EVIL = "<script>alert(1)</script>"


def make_runs(root: Path) -> Path:
    """Two runs with everything a report shows, one of them with a hostile tag name."""
    for seed, name in enumerate(("baseline", "candidate")):
        rng = np.random.default_rng(seed)
        with mindwatch.Monitor(
            root / name, {"print_every": 0, "hparams": {"lr": 0.1 + seed}}
        ) as mon:
            for step in range(1, 401):
                loss = 2.0 / (1 + step / 30) + 0.05 * rng.random()
                if seed == 1 and step == 250:
                    loss = 40.0  # a spike the drawing must keep
                mon.log_scalars(
                    step,
                    {
                        "train/loss": loss,
                        "train/lr": 0.1,
                        "train/grad_norm": 1.0 + rng.random(),
                        "perf/samples_per_s": 1000 + 50 * rng.random(),
                        "perf/step_time_ms": 30 + rng.random(),
                        "ranks/samples_per_s_min": 900.0,
                        "ranks/samples_per_s_max": 1100.0,
                        "ranks/loss_argmax": float(step % 2),
                        "ranks/loss_max": loss + 0.1,
                        "ranks/loss_min": loss - 0.1,
                        f"custom/{EVIL}": 1.0,
                    },
                )
                if step % 100 == 0:
                    mon.log_eval(step, loss=loss * 1.1, acc=0.5 + step / 1000)
                    mon.log_scalars(
                        step,
                        {
                            "layers/param_norm/fc.weight": 1 + step / 400,
                            "layers/param_norm/fc.bias": 0.5,
                        },
                    )
        alert = {
            "rule": "spike",
            "severity": "warning",
            "metric": "train/loss",
            "value": 40.0,
            "step": 250,
            "rank": 1,
            "message": f"loss jumped {EVIL}",
        }
        if seed == 1:
            (root / name / "alerts.jsonl").write_text(json.dumps(alert) + "\n{broken line\n")
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_runs(tmp_path_factory.mktemp("report") / "runs")
    out = root.parent / "out"
    # --static: the script-free HTML these tests check; test_report_html.py checks the
    # interactive one
    result = CliRunner().invoke(main, ["report", str(root), "--out", str(out), "--static"])
    assert result.exit_code == 0, result.output
    for fmt in ("html", "pdf", "json", "md"):
        assert f"{fmt:>4}: {out / f'report.{fmt}'}" in result.output
    return out


def test_json_summary(report: Path) -> None:
    data = json.loads((report / "report.json").read_text())
    runs = {r["name"]: r for r in data["runs"]}
    assert set(runs) == {"baseline", "candidate"}
    cand = runs["candidate"]
    assert cand["steps"] == 400
    assert cand["hparams"] == {"lr": 1.1}
    assert cand["loss"]["nonfinite"] == 0
    assert cand["eval"]["eval/acc"] == {"last": pytest.approx(0.9), "last_step": 400}
    metrics = {k for k, v in cand["throughput"].items() if isinstance(v, dict)}
    assert metrics == {"samples_per_s", "step_time_ms"}
    assert cand["throughput"]["excluded_steps"] == 1  # the first step: no warm-up here
    stats = cand["throughput"]["samples_per_s"]
    assert stats["min"] <= stats["p50"] <= stats["p95"] <= stats["max"]
    assert cand["param_norms"]["fc.weight"] == {"start": 1.25, "end": 2.0}
    assert cand["rank_spread"]["loss"]["max_gap"] == pytest.approx(0.2)
    assert [a["step"] for a in cand["alerts"]] == [250]  # the broken line is skipped
    assert runs["baseline"]["alerts"] == []


def test_markdown_for_a_ci_comment(report: Path) -> None:
    text = (report / "report.md").read_text()
    header = "| run | status | steps | final loss (smoothed) | best loss (smoothed) |"
    assert header + " samples/s (median) | duration | alerts |" in text
    assert "| candidate | finished | 400 |" in text
    assert text.count("\n| ") == 3


def test_html_is_self_contained_and_escapes_names(report: Path) -> None:
    html = (report / "report.html").read_text()
    assert "<script" not in html.lower()  # tag names are SVG paths, messages escaped
    assert "loss jumped &lt;script&gt;alert(1)&lt;/script&gt;" in html
    # Namespaces are names, not fetched; url(#id) points inside the document.
    body = re.sub(r'xmlns(:\w+)?="[^"]*"', "", html)
    body = body.replace('<link rel="icon" href="data:,">', "")  # an inline empty icon
    for external in ("http://", "https://", "src=", "@import", "<link", "<img"):
        assert external not in body, external
    assert re.findall(r"url\((?!#)", body) == []
    assert html.count("<svg") >= 6  # loss, lr, grad norm, throughput, step time, layers x2


def test_a_spike_survives_downsampling() -> None:
    from mindwatch.tools.report.summary import downsample

    steps = np.arange(1_000_000)
    values = np.ones(1_000_000)
    values[654_321] = 50.0
    values[10] = math.nan
    drawn_steps, drawn = downsample(steps, values, max_points=2000)
    assert len(drawn) <= 2000
    assert 654_321 in drawn_steps.tolist()
    assert drawn.max() == 50.0


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Serves the report and records every request, also those sent to it as a proxy."""

    page = b""
    requests: ClassVar[list[tuple[str, str]]] = []  # (what was asked, its Referer)

    def do_GET(self) -> None:
        type(self).requests.append((self.path, self.headers.get("Referer", "")))
        if self.path.endswith("/report.html"):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(type(self).page)
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(report: Path) -> Iterator[int]:
    _Recorder.page = (report / "report.html").read_bytes()
    _Recorder.requests = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()


def _nonblank(png: Path) -> float:
    from matplotlib.image import imread

    pixels = imread(str(png))[..., :3]
    return float((pixels.mean(axis=2) < 0.95).mean())  # share of pixels that are not white


@pytest.mark.slow
def test_chromium_renders_it_with_no_console_errors_and_no_requests(
    chromium: str, report: Path, server: int, tmp_path: Path
) -> None:
    shot = tmp_path / "shot.png"
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        # Every request the page makes, to any host, goes through the recording server.
        f"--proxy-server=http://127.0.0.1:{server}",
        "--proxy-bypass-list=<-loopback>",
        "--hide-scrollbars",
        "--window-size=1100,2400",
        f"--screenshot={shot}",
        f"http://127.0.0.1:{server}/report.html",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert shot.exists(), done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    origin = f"http://127.0.0.1:{server}"
    pages = [path for path, _ in _Recorder.requests if path.endswith("/report.html")]
    assert len(pages) == 1
    # Anything the page itself asked for carries it as Referer (Chromium's own background
    # requests, e.g. its clock check, do not, and are not the page's).
    from_page = [path for path, referer in _Recorder.requests if referer.startswith(origin)]
    assert from_page == []
    assert _nonblank(shot) > 0.03


@pytest.mark.slow
def test_pdftoppm_renders_every_pdf_page(pdftoppm: str, report: Path, tmp_path: Path) -> None:
    info = subprocess.run(
        ["pdfinfo", str(report / "report.pdf")], capture_output=True, text=True, check=True
    ).stdout
    pages = int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))
    assert pages >= 3  # a cover, then the charts three to a page
    assert "A4" in info
    subprocess.run(
        [pdftoppm, "-r", "30", "-png", str(report / "report.pdf"), str(tmp_path / "page")],
        check=True,
        timeout=120,
    )
    images = sorted(tmp_path.glob("page-*.png"))
    assert len(images) == pages
    assert all(_nonblank(image) > 0.005 for image in images)


def test_bad_input_exits_2(tmp_path: Path) -> None:
    missing = CliRunner().invoke(main, ["report", str(tmp_path / "nope")])
    assert missing.exit_code == 2
    (tmp_path / "empty").mkdir()
    empty = CliRunner().invoke(main, ["report", str(tmp_path / "empty")])
    assert empty.exit_code == 2
    assert "no scalars found" in empty.output
    fmt = CliRunner().invoke(main, ["report", str(tmp_path), "--format", "html,docx"])
    assert fmt.exit_code == 2
    assert "docx is not a report format" in fmt.output


def test_dollar_signs_in_names_do_not_break_the_pdf(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "x$^$y"
    with mindwatch.Monitor(run, {"print_every": 0, "hparams": {"path": "/data/$RUN/$DATE"}}) as mon:
        for step in range(1, 20):
            mon.log_scalars(step, {"train/loss": 1.0 / step, "layers/param_norm/w$1$": 1.0})
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["report", str(tmp_path / "runs"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "report.pdf").stat().st_size > 1000


def test_tokens_count_the_steps_between_logged_points(tmp_path: Path) -> None:
    from mindwatch.tools.report import summarize

    with mindwatch.Monitor(tmp_path / "r", {"print_every": 0}) as mon:
        for step in range(10, 1001, 10):  # every 10th step logged (sink mode)
            mon.log_scalars(step, {"perf/tokens_per_s": 1000.0, "perf/step_time_ms": 100.0})
    (run,) = summarize(mindwatch.read_scalars(tmp_path), tmp_path)
    assert run.facts["tokens"] == pytest.approx(100.0 * 1000)  # 100 tokens/step x 1000 steps
