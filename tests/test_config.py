"""MonitorConfig: aliases, YAML, MindFormers YAMLs, precise errors, and what each option does."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

import mindwatch
from mindwatch.config import ConfigError, MonitorConfig, mindformers_notes
from tests.tbread import scalars

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).with_name("fixtures")
sys.path.insert(0, str(ROOT / "docs"))
from gen_config_reference import BAD_INPUTS  # noqa: E402


def test_seed_keys_are_understood() -> None:
    config = MonitorConfig.from_dict(
        {"summary_dir": "runs/a", "collect_freq": 20, "update_time": 5}
    )
    assert (config.logdir, config.collect_freq, config.flush_secs) == ("runs/a", 20, 5.0)
    assert MonitorConfig.from_dict({"log_dir": "x", "step_interval": 3}).collect_freq == 3


def test_config_is_frozen() -> None:
    config = MonitorConfig()
    with pytest.raises(ValueError, match="frozen"):
        config.flush_secs = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(("data", "why"), BAD_INPUTS, ids=[w for _, w in BAD_INPUTS])
def test_documented_bad_input_gets_its_documented_message(
    data: dict[str, object], why: str
) -> None:
    with pytest.raises(ConfigError) as info:
        MonitorConfig.from_dict(data)
    page = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert f"```\n{info.value}\n```" in page  # the page shows exactly this message
    key = next(iter(data))
    assert key in str(info.value)  # and the message names the key


def test_config_reference_page_is_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_config_reference.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_every_field_is_documented() -> None:
    for name, field in MonitorConfig.model_fields.items():
        assert field.description, name


def test_misspelt_keys_get_a_suggestion() -> None:
    with pytest.raises(ConfigError, match="did you mean 'flush_secs'"):
        MonitorConfig.from_dict({"flush_sec": 1})
    with pytest.raises(ConfigError, match=r"checkpoint\.keep_max: unknown key; did you mean"):
        MonitorConfig.from_dict({"checkpoint": {"keep_max": 2}})


def test_yaml_file_own_keys_and_mindwatch_section(tmp_path: Path) -> None:
    own = tmp_path / "own.yaml"
    own.write_text("logdir: runs/x\ncollect_freq: 4\nhparams: {lr: 0.1}\n")
    assert MonitorConfig.from_yaml(own).collect_freq == 4
    nested = tmp_path / "nested.yaml"
    nested.write_text("model: {}\nmindwatch:\n  print_every: 7\n")
    assert MonitorConfig.from_any(nested).print_every == 7


def test_bad_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("logdir: runs\nflush_secs: [1, 2\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml' is not valid YAML at line 3"):
        MonitorConfig.from_yaml(bad)
    with pytest.raises(ConfigError, match="cannot read config file"):
        MonitorConfig.from_yaml(tmp_path / "missing.yaml")
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        MonitorConfig.from_yaml(listed)


def test_mindformers_documented_example_maps_to_equivalent_settings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        config = MonitorConfig.from_yaml(FIXTURES / "mindformers_monitor_example.yaml")
    assert config.logdir == "worker/tensorboard"
    assert config.collect_freq == 1  # step_interval paces the layer metrics, not the loss
    assert config.target == ["layers.0", "layers.1"]
    assert config.layer_norms_every == 1  # local_norm_format asks for per-layer grad norms
    assert config.layer_norms_of == ["gradients"]  # ... and only those: no host copies
    assert config.param_norm_every is None  # weight_state_format: null
    assert not config.optimizer_state_norms
    assert config.print_every == 1
    assert config.checkpoint.prefix == "llama2_7b"
    assert config.checkpoint.save_checkpoint_steps == 100
    assert config.checkpoint.keep_checkpoint_max == 3
    assert config.hparams == {
        "seed": 0,
        "batch_size": 8,
        "epochs": 2,
        "optimizer": "AdamW",
        "learning_rate": 1e-4,
    }
    # Keys that mean nothing here are reported once, with the reason, never dropped silently.
    (warning,) = [
        r.getMessage() for r in caplog.records if "accepted but not used" in r.getMessage()
    ]
    for key in (
        "monitor_config.dump_path",
        "monitor_config.device_local_norm_format",
        "monitor_config.local_loss_format",
        "tensorboard.tensorboard_queue_size",
        "callbacks.1 (CheckpointMonitor).integrated_save",
    ):
        assert key in warning
    assert "monitor_config.weight_state_format" not in warning  # null: nothing asked for
    assert "monitor_config.target" not in warning  # used


def test_mindformers_sections_are_validated(tmp_path: Path) -> None:
    bad = tmp_path / "mf.yaml"
    bad.write_text(
        "monitor_config:\n  monitor_on: True\n  step_interval: 0\n  local_norm_format: log\n"
    )
    with pytest.raises(ConfigError, match=r"monitor_config\.step_interval = 0: Input should"):
        MonitorConfig.from_yaml(bad)
    bad.write_text("callbacks:\n  type: MFLossMonitor\n")
    with pytest.raises(ConfigError, match="callbacks: must be a list"):
        MonitorConfig.from_yaml(bad)
    bad.write_text("callbacks:\n  - per_print_times: 3\n")
    with pytest.raises(ConfigError, match=r"callbacks\.0: each callback needs a 'type:' key"):
        MonitorConfig.from_yaml(bad)
    bad.write_text("callbacks:\n  - type: MindWatchMonitor\n    flush_sec: 3\n")
    with pytest.raises(ConfigError, match="did you mean 'flush_secs'"):
        MonitorConfig.from_yaml(bad)
    off = {"monitor_config": {"monitor_on": False, "step_interval": 5}}
    assert MonitorConfig.from_any(str(_yaml(tmp_path, off))).collect_freq == 1
    assert "ignored because monitor_on is off" in mindformers_notes(off)[0]
    on = {
        "monitor_config": {
            "monitor_on": True,
            "step_interval": 50,
            "weight_state_format": "log",
            "optimizer_state_format": ["tensorboard"],
        }
    }
    config = MonitorConfig.from_any(str(_yaml(tmp_path, on)))
    assert (config.param_norm_every, config.layer_norms_every) == (50, 50)
    assert config.optimizer_state_norms


def _yaml(tmp_path: Path, data: dict[str, object]) -> Path:
    path = tmp_path / "data.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    return path


def test_run_name_makes_a_named_unique_folder(tmp_path: Path) -> None:
    config = {
        "logdir": str(tmp_path),
        "run_name": "bert 微调",
        "print_every": 0,
        "hparams": {"lr": 0.001, "bs": 32},
        "name_hparams": ["lr", "bs"],
    }
    with mindwatch.Monitor(config=config) as first, mindwatch.Monitor(config=config) as second:
        pass
    for mon in (first, second):
        assert mon.logdir.parent == tmp_path
        stamp, *rest = mon.logdir.name.split("_")
        assert len(stamp) == 15
        assert "_".join(rest).startswith("bert_lr-0.001_bs-32") or "_".join(rest).startswith(
            "bert-"
        )
        assert mon.logdir.name.isascii()
    assert first.logdir != second.logdir


def test_collect_freq_records_every_nth_step_with_honest_timing(tmp_path: Path) -> None:
    """The recorded step's time is the wall time of the 5 steps it stands for, shared by
    5. The monitor reads its clock inside each call, so its reading lies between the
    times taken just before and just after the call: the recorded time must lie between
    the shortest and the longest span those brackets allow, however slow the machine."""
    import time

    before, after = {}, {}
    with mindwatch.Monitor(tmp_path, {"print_every": 0, "collect_freq": 5}) as mon:
        before[0] = time.perf_counter()
        mon.restart_clock()
        after[0] = time.perf_counter()
        for step in range(1, 21):
            time.sleep(0.002 * (1 + step % 5))  # unequal: the mean of 5 is not the last
            before[step] = time.perf_counter()
            mon.log_step(step, loss=float(step), samples=10)
            after[step] = time.perf_counter()
    read = scalars(tmp_path)
    assert [s for s, _ in read["train/loss"]] == [5, 10, 15, 20]
    for step, ms in read["perf/step_time_ms"]:
        shortest = (before[step] - after[step - 5]) * 1000 / 5
        longest = (after[step] - before[step - 5]) * 1000 / 5
        # float32 in the event file: a relative 1e-6 either way
        assert shortest * (1 - 1e-6) <= ms <= longest * (1 + 1e-6), (step, ms)
        assert shortest >= 6.0  # the sleeps' mean: the last step alone slept 2 ms
    for (_, ms), (_, sps) in zip(read["perf/step_time_ms"], read["perf/samples_per_s"]):
        assert sps == pytest.approx(10 * 1000 / ms, rel=1e-5)


def test_mindformers_tag_style_writes_their_names_and_vs_samples_twins(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path, {"print_every": 0, "tag_style": "mindformers"}) as mon:
        for step in range(1, 4):
            mon.log_step(step, loss=0.5, lr=0.01, grad_norm=1.0, samples=8, loss_scale=1024.0)
    read = scalars(tmp_path)
    assert read["loss"] == [(1, 0.5), (2, 0.5), (3, 0.5)]
    assert [v for _, v in read["learning-rate"]] == pytest.approx([0.01] * 3)
    assert read["batch-size"] == [(1, 8.0), (2, 8.0), (3, 8.0)]
    # MindFormers' twins, under the names its tensorboardX writer gives them on disk
    assert [s for s, _ in read["loss_vs_samples"]] == [8, 16, 24]
    for tag in ("grad-norm", "loss-scale", "iteration-time", "throughput", "throughput_vs_samples"):
        assert tag in read
    assert "B-samples-per-day" in read
    assert "train/loss" in read  # the mindwatch names stay, for mindwatch's own tools
    # Under data parallelism the batch size and the samples axis are global, as in MindFormers.
    config = {"print_every": 0, "tag_style": "mindformers"}
    with mindwatch.Monitor(tmp_path / "dp", config, world_size=2) as mon:
        mon.log_step(3, loss=0.5, samples=8)
    read = scalars(tmp_path / "dp")
    assert read["batch-size"] == [(3, 16.0)]
    assert [s for s, _ in read["loss_vs_samples"]] == [48]


def test_monitor_takes_a_yaml_path(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text(f"logdir: {tmp_path / 'run'}\nprint_every: 0\n")
    with mindwatch.Monitor(config=str(path)) as mon:
        mon.log_step(1, loss=1.0)
    assert mon.logdir == tmp_path / "run"


def test_perplexity_and_tokens_per_sample(tmp_path: Path) -> None:
    import math

    from mindwatch.metrics.derived import perplexity

    assert perplexity(1000.0) == math.inf
    assert math.isnan(perplexity(math.nan))
    config = {"print_every": 0, "perplexity": True, "tokens_per_sample": 128}
    with mindwatch.Monitor(tmp_path, config) as mon:
        for step in (1, 2):
            mon.log_step(step, loss=2.0, samples=4)
        mon.log_eval(2, loss=1.0)
    read = scalars(tmp_path)
    assert [v for _, v in read["train/perplexity"]] == pytest.approx([math.exp(2.0)] * 2)
    assert read["eval/perplexity"] == [(2, pytest.approx(math.e))]
    for (_, sps), (_, tps) in zip(read["perf/samples_per_s"], read["perf/tokens_per_s"]):
        assert tps == pytest.approx(128 * sps, rel=1e-5)


def test_the_seeds_monitor_config_works_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    seeds = {  # seed 000's monitor_config (section 3.2), verbatim
        "summary_dir": "./summary/bert_base_zh",
        "save_graphs": True,
        "save_graphs_path": "./graph",
        "collect_freq": 20,
        "max_file_size": 1073741824,
        "collect_specified_data": ["parameters", "gradients"],
        "keep_default_action": False,
        "export_kwargs": {"file_name": "bert_export", "file_format": "AIR"},
    }
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        config = MonitorConfig.from_dict(seeds)
    assert (config.logdir, config.collect_freq) == ("./summary/bert_base_zh", 20)
    assert config.histograms_of == ["parameters", "gradients"]
    # Named without an interval: collected at collect_freq, as SummaryCollector does.
    assert (config.histogram_every_steps, config.histogram_interval) == (20, None)
    (note,) = [r.getMessage() for r in caplog.records if "accepted but not used" in r.getMessage()]
    assert "save_graphs: a MindSpore context option" in note
    assert "export_kwargs" in note


def test_collect_specified_data_gets_what_it_names_or_says_why_not_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def build(**data: object) -> MonitorConfig:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mindwatch"):
            return MonitorConfig.from_dict(data)

    # The seeds' first template also names inputs and outputs: the run starts, with the
    # two items dropped and one warning naming the key and the fix.
    config = build(collect_specified_data=["parameters", "gradients", "inputs", "outputs"])
    assert config.histograms_of == ["parameters", "gradients"]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "collect_specified_data: 'inputs' and 'outputs' not collected" in warning
    assert "Remove 'inputs' and 'outputs' from collect_specified_data" in warning
    assert config.histogram_every_steps == 10  # SummaryCollector's default collect_freq
    assert build(histograms_of=["outputs"]).histograms_of == []
    assert "histograms_of: 'outputs' not collected" in caplog.records[0].getMessage()
    assert build(histograms_of=["outputs"]).histogram_every_steps is None  # nothing to pace

    # An interval given (even null: off) is the user's choice; collect_freq's aliases count.
    assert (
        build(collect_specified_data=["parameters"], histogram_interval=2).histogram_every_steps
        is None
    )
    assert (
        build(histograms_of=["gradients"], histogram_every_steps=None).histogram_every_steps is None
    )
    assert build(histograms_of=["gradients"], step_interval=7).histogram_every_steps == 7
    assert not caplog.records
    assert MonitorConfig.from_dict({}).histogram_every_steps is None  # not named: none
    with pytest.raises(ConfigError, match="collect_freq") as info:
        MonitorConfig.from_dict({"histograms_of": ["parameters"], "collect_freq": 0})
    assert "histogram_every_steps" not in str(info.value)  # one error, about the real key
    with pytest.raises(ConfigError, match="'weights'"):
        MonitorConfig.from_dict({"collect_specified_data": ["weights"]})  # a typo is an error


def test_one_setting_under_two_names_is_refused() -> None:
    with pytest.raises(
        ConfigError, match="'collect_freq' and 'step_interval' are the same setting"
    ):
        MonitorConfig.from_dict({"collect_freq": 10, "step_interval": 3})
    with pytest.raises(ConfigError, match="must be a bool, number or string") as info:
        MonitorConfig.from_dict({"hparams": {"lr": [1]}, "name_hparams": ["lr"]})
    assert "name_hparams" not in str(info.value)  # no second, false error
    for zero in ("0", False, 0.0):
        with pytest.raises(ConfigError, match="collect_freq"):
            MonitorConfig.from_dict({"collect_freq": zero})


def test_the_hardware_section_in_a_config_and_in_a_mindformers_yaml() -> None:
    from mindwatch.config import HardwareSettings

    assert MonitorConfig().hardware == HardwareSettings()  # on by default
    config = MonitorConfig.from_dict({"hardware": {"period_s": 10, "device_memory": False}})
    assert (config.hardware.period_s, config.hardware.device_memory) == (10.0, False)
    callback = {"callbacks": [{"type": "MindWatchMonitor", "hardware": {"period_s": 2}}]}
    found = MonitorConfig.from_mindformers(callback).hardware
    assert (found.period_s, found.host, found.enabled) == (2.0, True, True)
    section = MonitorConfig.from_mindformers({"mindwatch": {"hardware": {"host": False}}})
    assert (section.hardware.period_s, section.hardware.host) == (5.0, False)
    with pytest.raises(ConfigError, match=r"hardware\.period_s"):
        MonitorConfig.from_dict({"hardware": {"period_s": 0}})
    with pytest.raises(ConfigError, match=r"hardware\.perod_s.*period_s"):
        MonitorConfig.from_dict({"hardware": {"perod_s": 5}})
