"""One run per folder with real MindSpore: the custom-loop example and ``Model.train``
run again into the same folder make new runs next to it; a resume from a checkpoint
(``initial_epoch``) continues the run; under ``msrun`` every rank follows rank 0."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mindwatch.events.mixing import mixed_runs
from tests.mindspore.test_multicard import msrun
from tests.tbread import scalars

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TRAIN = textwrap.dedent(
    """
    import sys
    import mindspore as ms
    import numpy as np
    from mindspore import nn
    from mindspore.dataset import GeneratorDataset
    from mindspore.train import Model
    from mindwatch.mindspore import TrainingMonitor

    ms.set_device("CPU")
    ms.set_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(80, 4)).astype(np.float32)
    y = (x @ np.ones((4, 1), np.float32)).astype(np.float32)
    data = GeneratorDataset([(a, b) for a, b in zip(x, y)], ["x", "y"], shuffle=False).batch(8)
    net = nn.Dense(4, 1)
    model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.01))
    monitor = TrainingMonitor({"print_every": 0}, logdir=sys.argv[1])
    model.train(int(sys.argv[2]), data, callbacks=[monitor], initial_epoch=int(sys.argv[3]))
    print(monitor.logdir)
    """
)


def _train(folder: Path, epochs: int, initial_epoch: int = 0) -> tuple[Path, str]:
    done = subprocess.run(
        [sys.executable, "-c", TRAIN, str(folder), str(epochs), str(initial_epoch)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip().splitlines()[-1]), done.stderr


def _info(folder: Path) -> dict[str, object]:
    return json.loads((folder / "run.json").read_text())  # type: ignore[no-any-return]


def test_custom_loop_example_run_twice_gives_two_clean_runs(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "custom"
    outputs = []
    for _ in range(2):
        done = subprocess.run(
            [
                sys.executable,
                str(EXAMPLES / "custom_loop.py"),
                "--logdir",
                str(folder),
                "--steps",
                "20",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
    second = folder.with_name("custom-2")
    assert f"this run writes to {second}" in outputs[1]
    for run in (folder, second):
        assert [s for s, _ in scalars(run)["train/loss"]] == list(range(1, 21))
        assert _info(run)["status"] == "finished"
    assert _info(second)["previous_run"] == str(folder)


def test_model_train_again_is_a_new_run_and_a_resume_continues(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    first, said = _train(folder, 2)  # 20 steps
    assert first == folder
    assert "holds" not in said
    again, said = _train(folder, 1)  # the same script again: a new run
    assert again == tmp_path / "run-2"
    assert f"{folder} holds a finished run (last step 20)" in said
    # Resumed from the epoch-1 checkpoint in a new process: the same run, continued.
    resumed, said = _train(folder, 3, initial_epoch=1)
    assert resumed == folder
    assert "holds" not in said
    assert [s for s, _ in scalars(folder)["train/loss"]] == list(range(1, 31))
    assert [s for s, _ in scalars(again)["train/loss"]] == list(range(1, 11))
    attempts = _info(folder)["attempts"]
    assert [a["resumed_at"] for a in attempts] == [None, 11]  # type: ignore[union-attr,index]
    assert _info(folder)["next_runs"] == [str(again)]
    assert mixed_runs(folder) is None


@pytest.mark.distributed
def test_msrun_again_into_the_same_folder_every_rank_follows_rank_0(tmp_path: Path) -> None:
    config = json.dumps({"per_rank": True, "flush_secs": 0.2})
    for _ in range(2):
        done = msrun(tmp_path, "model", "--steps=12", f"--config={config}")
        assert done.returncode == 0, done.stderr[-2000:]
    first, second = tmp_path / "run", tmp_path / "run-2"
    for run in (first, second):
        for folder in (run, run / "rank_0", run / "rank_1"):
            assert [s for s, _ in scalars(folder)["train/loss"]] == list(range(1, 13)), folder
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("run")) == [
        "run",
        "run-2",
    ]  # no rank made a folder of its own
    assert _info(second)["previous_run"] == str(first)
