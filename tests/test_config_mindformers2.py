"""MindFormers 2.x YAMLs: the ``monitor:`` section of the PyNative trainer (2.1.0's keys)
as mindwatch settings; every key without a counterpart named in the one warning, every
bad value a ConfigError naming the key."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from mindwatch.config import ConfigError, MonitorConfig
from mindwatch.config.mindformers import is_mindformers_yaml, mindformers_notes

FIXTURES = Path(__file__).parent / "fixtures"


def _config(tmp_path: Path, data: dict[str, Any]) -> MonitorConfig:
    path = tmp_path / "mf2.yaml"
    path.write_text(yaml.safe_dump(data))
    return MonitorConfig.from_yaml(path)


def _monitor(**sections: dict[str, Any]) -> dict[str, Any]:
    return {"monitor": sections}


def test_the_2x_example_maps_each_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        config = MonitorConfig.from_yaml(FIXTURES / "mindformers_2x_monitor_example.yaml")
    assert config.logdir == "output/tensorboard"
    assert config.collect_freq == 5
    assert config.layer_norms_every == 1  # 2.x logs local norms every step
    assert config.layer_norms_of == ["gradients"]
    assert config.target == [r"attention\.wq", r"feed_forward\.w1"]
    assert config.per_rank  # local_loss: each rank's own loss
    assert config.flush_secs == 1  # the MindWatchMonitor callback's own key
    assert config.hparams == {"batch_size": 8}
    (warning,) = [r.getMessage() for r in caplog.records if "not used" in r.getMessage()]
    named = re.findall(r"^  (monitor\.[\w.]+):", warning, flags=re.M)
    assert named == [
        "monitor.tensorboard.queue_size",
        "monitor.train_state.device_loss",
        "monitor.moe_monitor.save_tokens_per_expert_interval",
        "monitor.moe_monitor.target_layers",
        "monitor.health_checkpoint.embedding_local_norm_threshold",
        "monitor.health_checkpoint.global_norm_skip_threshold",
        "monitor.health_checkpoint.global_norm_skip_time",
    ]  # device_norm: False asks for nothing; the mapped keys are not there
    assert "read by no code of MindFormers 2.1.0" in warning


def test_a_yaml_with_only_a_monitor_section_is_a_mindformers_yaml() -> None:
    assert is_mindformers_yaml({"monitor": {}})
    assert not is_mindformers_yaml({"logdir": "runs"})


@pytest.mark.parametrize(
    ("value", "target"),
    [
        (True, [".*"]),
        ("true", [".*"]),
        ("layers.0", [r"layers\.0"]),
        (["wq", "", "w1"], ["wq", "w1"]),
        (("a+b",), [r"a\+b"]),
    ],
)
def test_local_norm_on_records_gradient_norms_of_the_named_parameters(
    tmp_path: Path, value: Any, target: list[str]
) -> None:
    config = _config(tmp_path, _monitor(train_state={"local_norm": value}))
    assert (config.layer_norms_every, config.layer_norms_of) == (1, ["gradients"])
    assert config.target == target


def test_a_name_matches_as_a_substring_as_in_2x(tmp_path: Path) -> None:
    config = _config(tmp_path, _monitor(train_state={"local_norm": "layers.0."}))
    (pattern,) = config.target
    assert re.search(pattern, "model.layers.0.attention.wq.weight")
    assert not re.search(pattern, "model.layers10.attention.wq.weight")  # '.' is literal


@pytest.mark.parametrize("value", [False, None, "", "false", "off", [], [""]])
def test_local_norm_off_asks_for_nothing(tmp_path: Path, value: Any) -> None:
    config = _config(tmp_path, _monitor(train_state={"local_norm": value}))
    assert config.layer_norms_every is None
    assert config.target == [".*"]


@pytest.mark.parametrize("value", [False, "no", None])
def test_local_loss_off_keeps_one_folder(tmp_path: Path, value: Any) -> None:
    assert not _config(tmp_path, _monitor(train_state={"local_loss": value})).per_rank


def test_an_empty_output_dir_is_2xs_off_not_a_folder(tmp_path: Path) -> None:
    config = _config(tmp_path, _monitor(tensorboard={"output_dir": ""}))
    assert config.logdir is None


def test_unknown_keys_are_named_in_the_warning() -> None:
    data = _monitor(tensorboard={"log_dir": "x"}, train_state={"local_norm": True}, foo={})
    notes = mindformers_notes(data)
    assert [n.split(":")[0] for n in notes] == ["monitor.tensorboard.log_dir", "monitor.foo"]
    assert all("unknown MindFormers 2.x key" in n for n in notes)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"monitor": ["tensorboard"]}, r"- monitor: must be a mapping"),
        (_monitor(train_state=[1]), r"- monitor\.train_state: must be a mapping"),
        (
            _monitor(train_state={"local_norm": 3}),
            r"monitor\.train_state\.local_norm = 3: must be true or false, a parameter name",
        ),
        (_monitor(train_state={"local_loss": "maybe"}), r"monitor\.train_state\.local_loss"),
        (_monitor(tensorboard={"log_interval": 0}), r"monitor\.tensorboard\.log_interval = 0"),
    ],
)
def test_bad_values_name_their_key(tmp_path: Path, data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, data)
