"""An alert names where its rank runs: node and device, from the map the ranks agreed."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindwatch.alerts import Alert, AlertLog
from mindwatch.alerts.engine import RuleEngine
from mindwatch.alerts.notify import _text
from mindwatch.alerts.reading import read_alerts
from mindwatch.common.i18n import set_language
from mindwatch.config import AlertSettings
from mindwatch.run.ranks import RankPlace

PLACES = [
    RankPlace(0, "node-0", "Ascend", 0),
    RankPlace(13, "node-2", "Ascend", 5),
    RankPlace(1, "host-a", "CPU", 1),
    RankPlace(2, "host-b", None, None),
    RankPlace(3, "host-c", None, 3),
    RankPlace(4, "gpu-1", "GPU", 0),
]


@pytest.fixture(autouse=True)
def english() -> Iterator[None]:
    set_language("en")
    yield
    set_language("en")


def nan_alert(rank: int, places: list[RankPlace], batch: int = 7) -> Alert:
    """A NaN loss at step 40 whose outlier rank (the argmax of the reduced loss) is ``rank``."""
    engine = RuleEngine(AlertSettings(), run="exp", rank=0, places=places)
    (alert,) = engine.observe(40, {"train/loss": math.nan, "ranks/loss_argmax": rank}, batch=batch)
    return alert


@pytest.mark.parametrize(
    ("rank", "where"),
    [
        (13, "step 40, rank 13 (node-2, NPU 5), batch 7"),
        (1, "step 40, rank 1 (host-a, CPU), batch 7"),  # a CPU rank's DEVICE_ID names nothing
        (2, "step 40, rank 2 (host-b), batch 7"),  # no device known: the node alone
        (3, "step 40, rank 3 (host-c, device 3), batch 7"),  # an id, but no kind (custom loop)
        (4, "step 40, rank 4 (gpu-1, GPU 0), batch 7"),
        (9, "step 40, rank 9, batch 7"),  # not in the map (it could not be agreed)
    ],
)
def test_the_engine_fills_the_place_of_the_alerts_rank(rank: int, where: str) -> None:
    alert = nan_alert(rank, PLACES)
    assert alert.rank == rank
    assert alert.where() == where


def test_the_place_is_in_the_json_line_and_read_back(tmp_path: Path) -> None:
    alert = nan_alert(13, PLACES)
    data = json.loads(alert.to_json())
    assert (data["rank"], data["node"], data["device"], data["device_id"]) == (
        13,
        "node-2",
        "Ascend",
        5,
    )
    unknown = json.loads(nan_alert(2, PLACES).to_json())
    assert unknown["node"] == "host-b"
    assert "device" not in unknown  # no null: an unknown field is left out
    assert "device_id" not in unknown
    assert "node" not in json.loads(nan_alert(9, PLACES).to_json())
    AlertLog(tmp_path / "alerts.jsonl", echo=False).write(alert)
    (line,) = read_alerts(tmp_path / "alerts.jsonl")
    assert (line["node"], line["device"], line["device_id"]) == ("node-2", "Ascend", 5)


def test_chinese_lines_and_notifier_text_name_the_place() -> None:
    set_language("zh")
    alert = nan_alert(13, PLACES, batch=2)
    assert alert.where() == "第 40 步，rank 13（node-2，NPU 5），批次 2"
    assert (
        alert.line()
        == "[严重] nonfinite（第 40 步，rank 13（node-2，NPU 5），批次 2）：train/loss 为 NaN"
    )
    assert nan_alert(3, PLACES).where() == "第 40 步，rank 3（host-c，设备 3），批次 7"
    assert _text(alert).split("\n")[1] == "运行 exp，第 40 步，rank 13（node-2，NPU 5），批次 2"


def test_notifiers_use_the_same_where() -> None:
    alert = nan_alert(13, PLACES)
    assert _text(alert).split("\n")[1] == "run exp, step 40, rank 13 (node-2, NPU 5), batch 7"


def test_an_engine_without_places_names_the_rank_alone() -> None:
    alert = nan_alert(13, [])
    assert (alert.node, alert.device, alert.device_id) == (None, None, None)
    assert alert.where() == "step 40, rank 13, batch 7"
