"""`mindwatch demo` end to end: the command's output, then a live TensorBoard server."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tbserver import get, live_tensorboard, wait_for_tags

pytestmark = pytest.mark.slow

MINDWATCH = str(Path(sys.executable).with_name("mindwatch"))


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    result = subprocess.run(
        [MINDWATCH, "demo", "--logdir", str(root), "--steps", "120", "--seed", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GLOG_v": "3"},
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "[mindwatch] step 25/120 | loss" in out
    assert "eval at step 100" in out
    assert f"mindwatch tensorboard {root}" in out
    # The closing hint runs as printed, from where the demo was started, venv or not.
    hint = out.rstrip().splitlines()[-1]
    command = shlex.split(hint)
    assert command[1:] == ["tensorboard", str(root)]
    helped = subprocess.run([*command[:2], "--help"], capture_output=True, text=True)
    assert helped.returncode == 0, helped.stderr
    (run,) = root.iterdir()
    assert run.name.endswith("_demo")
    assert f"Run folder: {run}" in out
    return root


def test_demo_writes_a_named_run_folder_with_run_json(demo_root: Path) -> None:
    (run,) = demo_root.iterdir()
    stamp = run.name.split("_")[0]
    assert len(stamp) == 15
    assert stamp[8] == "-"
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "finished"
    assert info["last_step"] == 120
    assert "mindspore" in info["versions"]


@pytest.fixture
def tensorboard_url(demo_root: Path) -> Iterator[str]:
    with live_tensorboard(demo_root) as url:
        yield url


def test_live_tensorboard_serves_the_demo_curves(tensorboard_url: str, demo_root: Path) -> None:
    want = {"train/loss", "train/lr", "train/grad_norm", "perf/step_time_ms"}
    tags = wait_for_tags(tensorboard_url, want)
    (run_name,) = tags
    assert run_name == next(demo_root.iterdir()).name
    for tag in sorted(want):
        query = urllib.parse.urlencode({"run": run_name, "tag": tag})
        points = get(f"{tensorboard_url}/data/plugin/scalars/scalars?{query}")
        # Each point is [wall_time, step, value].
        assert [p[1] for p in points] == list(range(1, 121)), tag
        assert all(isinstance(p[2], float) for p in points)
    query = urllib.parse.urlencode({"run": run_name, "tag": "train/lr"})
    lrs = [p[2] for p in get(f"{tensorboard_url}/data/plugin/scalars/scalars?{query}")]
    assert lrs[0] < lrs[11]  # warmup
    assert lrs[-1] < lrs[20]  # cosine decay


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-XSRF-Protected": "1"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_live_tensorboard_shows_hparams_session_and_config_text(
    tensorboard_url: str, demo_root: Path
) -> None:
    wait_for_tags(tensorboard_url, {"train/loss"})
    run_name = next(demo_root.iterdir()).name
    groups = _post(
        f"{tensorboard_url}/data/plugin/hparams/session_groups",
        {
            "experimentName": "",
            "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE"],
            "colParams": [],
            "startIndex": 0,
            "sliceSize": 100,
        },
    )["sessionGroups"]
    (group,) = groups  # one session: the run itself, not an extra sub-run
    (session,) = group["sessions"]
    assert session["name"] == run_name
    assert session["status"] == "STATUS_SUCCESS"
    hparams = group["hparams"]
    assert hparams["seed"] == 3
    assert hparams["optimizer"] == "Momentum"
    assert hparams["batch_size"] == 32
    assert hparams["lr_schedule"] == "WarmupCosine"
    final = {m["name"]["tag"]: m for m in group["metricValues"]}
    assert final["train/loss"]["trainingStep"] == 120

    query = urllib.parse.urlencode({"run": run_name, "tag": "mindwatch/config"})
    (text,) = get(f"{tensorboard_url}/data/plugin/text/text?{query}")
    assert "Effective mindwatch configuration" in text["text"]
    assert "flush_secs" in text["text"]


def test_live_tensorboard_shows_targeted_layer_norms_and_histograms(
    tensorboard_url: str, demo_root: Path
) -> None:
    tags = wait_for_tags(tensorboard_url, {"layers/grad_norm/0.weight"})
    run_name = next(demo_root.iterdir()).name
    layers = sorted(t for t in tags[run_name] if t.startswith("layers/grad_norm/"))
    # The demo targets the first and the last layer only.
    assert layers == [f"layers/grad_norm/{p}" for p in ("0.bias", "0.weight", "4.bias", "4.weight")]
    query = urllib.parse.urlencode({"run": run_name, "tag": "layers/grad_norm/0.weight"})
    points = get(f"{tensorboard_url}/data/plugin/scalars/scalars?{query}")
    assert [p[1] for p in points] == list(range(10, 121, 10))

    for plugin in ("histograms", "distributions"):
        listed = get(f"{tensorboard_url}/data/plugin/{plugin}/tags")[run_name]
        assert sorted(listed) == sorted(
            f"{kind}/{p}"
            for kind in ("gradients", "parameters")
            for p in ("0.bias", "0.weight", "4.bias", "4.weight")
        )
    query = urllib.parse.urlencode({"run": run_name, "tag": "gradients/4.weight"})
    histograms = get(f"{tensorboard_url}/data/plugin/histograms/histograms?{query}")
    assert [h[1] for h in histograms] == [50, 100]  # every 50 steps, as configured
    assert all(len(h[2]) > 0 for h in histograms)  # buckets: [left, right, count]
