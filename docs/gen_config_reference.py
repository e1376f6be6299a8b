"""Generate docs/config.md from MonitorConfig itself: every field, and the exact error
message each documented bad input gets.

    python docs/gen_config_reference.py          # rewrite docs/config.md
    python docs/gen_config_reference.py --check  # exit 1 if docs/config.md is stale

The test suite runs --check, so the page always shows what the code really says.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel

from mindwatch.config import (
    AlertSettings,
    CheckpointSettings,
    ConfigError,
    HardwareSettings,
    MonitorConfig,
    PrometheusSettings,
    PushSettings,
)
from mindwatch.metrics.derived import DERIVED_TAGS

PAGE = Path(__file__).with_name("config.md")

# (what the user wrote, why it is wrong) -- each must be refused.
BAD_INPUTS: list[tuple[dict[str, Any], str]] = [
    ({"collect_freq": 0}, "MindSpore accepts it and records nothing"),
    ({"step_interval": -5}, "MindFormers' name for collect_freq, negative"),
    ({"flush_sec": 2}, "misspelt key"),
    ({"sumary_dir": "runs/exp"}, "misspelt alias of logdir"),
    ({"collect_specified_data": ["weights"]}, "not an item mindwatch collects"),
    ({"target": ["layers.[0"]}, "not a regular expression"),
    ({"flush_secs": 0}, "a flush delay must be positive"),
    ({"flush_secs": 1e10}, "a flush delay beyond its bound (an hour)"),
    ({"max_block_secs": float("inf")}, "an infinite duration (.inf in YAML)"),
    ({"max_queue": 10**30}, "an integer beyond 64 bits"),
    ({"max_file_size": 100}, "rotation below 1 KiB would make a file per event"),
    ({"progress": "fancy"}, "not one of the display modes"),
    ({"tag_style": "megatron"}, "unknown tag style"),
    ({"print_every": -1}, "negative interval"),
    ({"logdir": 5}, "a folder must be a path string"),
    ({"logdir": "s3://bucket/runs/exp"}, "a remote store's URL: mindwatch writes a local folder"),
    ({"filename_suffix": "/rank0"}, "a file name suffix that names another folder"),
    ({"checkpoint": {"keep_max": 3}}, "misspelt nested key"),
    ({"checkpoint": {"save_checkpoint_steps": 0}}, "a checkpoint every 0 steps"),
    ({"name_hparams": ["lr"]}, "folder name from an hparam that is not given"),
    ({"hparams": {"layers": {"a": 1}}}, "hparam values must be scalars"),
    ({"aggregate_every": -1}, "a negative reduction interval"),
    ({"reductions": {"accuracy": "average"}}, "not one of the reduction kinds"),
    ({"prometheus": {"port": 9410, "labels": {"team-name": "nlp"}}}, "not a label name"),
    ({"prometheus": {"port": 9410, "labels": {"rank": "0"}}}, "a label mindwatch sets"),
    ({"prometheus": {"host": "0.0.0.0"}}, "neither a port nor a push"),
    ({"hardware": {"period_s": 0.01}}, "a sampling period too short for npu-smi"),
    ({"prometheus": {"push": {"url_env": "http://gw:9091"}}}, "a URL where a name belongs"),
    (
        {"alerts": {"notify": [{"kind": "dingtalk", "url": "oapi.dingtalk.com/robot/send"}]}},
        "a webhook URL without https:// (shown masked)",
    ),
]


def _aliases(field: Any) -> list[str]:
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [a for a in alias.choices if isinstance(a, str) and a != field.alias]
    return []


def _fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        value = field.get_default(call_default_factory=True)
        default = "see below" if isinstance(value, BaseModel) else f"`{json.dumps(value)}`"
        aliases = [a for a in _aliases(field) if a != name]
        shown = f"`{prefix}{name}`" + (
            f" (also {', '.join(f'`{a}`' for a in aliases)})" if aliases else ""
        )
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| {shown} | {default} | {description} |")
    return rows


def _rule_sections() -> list[str]:
    out = []
    for name, field in AlertSettings.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            title = (model.__doc__ or "").strip().splitlines()[0]
            out += [f"### `alerts.{name}`", "", title, "", "| key | default | meaning |"]
            out += ["|---|---|---|", *_fields(model, f"alerts.{name}."), ""]
    return out


def _warnings_of(data: dict[str, Any]) -> tuple[MonitorConfig, list[str]]:
    """The config ``data`` builds, and the warnings it logs while doing so."""
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger = logging.getLogger("mindwatch")
    handler, level = Keep(logging.WARNING), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        config = MonitorConfig.from_dict(data)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return config, seen


def _asked_and_got() -> list[str]:
    seed = {"collect_freq": 50, "collect_specified_data": ["parameters", "gradients"]}
    paced = MonitorConfig.from_dict(seed).histogram_every_steps
    default = MonitorConfig.from_dict({"histograms_of": ["parameters"]}).histogram_every_steps
    heavy = {"collect_specified_data": ["parameters", "gradients", "inputs", "outputs"]}
    config, warnings = _warnings_of(heavy)
    derived = ", ".join(f"`{tag}`" for tag in sorted(DERIVED_TAGS))
    return [
        "## What a config asks for, and what it gets",
        "",
        "A config that names something to collect gets it, or is told once why not and",
        "how to get it.",
        "",
        f"- **Histograms named without an interval.** `{json.dumps(seed)}` (seed 000's",
        "  choice, with no `histogram_interval` or `histogram_every_steps`) collects them",
        "  as MindSpore's `SummaryCollector` does, every `collect_freq` steps: here",
        f"  `histogram_every_steps` = {paced}. Without `collect_freq` either, every {default}",
        "  steps (`SummaryCollector`'s default). Give either interval, or",
        "  `histogram_every_steps: null`, to choose otherwise. A run that ends before its",
        "  first histogram is due is told so when it ends, with the interval to lower;",
        "  gradient histograms in dataset sink mode (callbacks never see the batch) are",
        "  skipped with one warning.",
        f"- **Items that cannot be collected.** `{json.dumps(heavy)}` starts, collecting",
        f"  `{json.dumps(config.histograms_of)}`, with one warning:",
        "",
        "  ```",
        *[f"  {line}" for w in warnings for line in w.splitlines()],
        "  ```",
        "",
        "- **The gradient norm.** A train cell that returns none (MindSpore's",
        "  `TrainOneStepCell` under a plain `Model(net, loss_fn, optimizer)`, a loss-scale",
        "  cell, MindFormers without `use_clip_grad`) gives no `train/grad_norm`; the",
        "  MindSpore callback says so once, at the first step, with the fix for that cell:",
        "  `mindwatch.mindspore.build_model(net, loss_fn, optimizer)` for the plain `Model`",
        "  ([quickstart.md](quickstart.md#with-modeltrain) shows the warning and what the",
        "  norm costs).",
        "- **One point per tag per step.** A value logged under a tag mindwatch derives",
        f"  ({derived}) is written instead of the derived one, also after the reduction",
        "  across ranks; from the first step it is logged on, mindwatch stops deriving that",
        "  tag, so a value logged every few steps does not alternate with mindwatch's own.",
        "",
    ]


def render() -> str:
    out = [
        "# Configuration reference",
        "",
        "Generated from `mindwatch.MonitorConfig` by `docs/gen_config_reference.py`; do not",
        "edit by hand. A config is a dict, a YAML file of these keys (or a `mindwatch:`",
        "section), or a MindFormers training YAML (1.x: `monitor_config`, `tensorboard`,",
        "`callbacks:`; 2.x: `monitor:`; see `mindwatch.config.mindformers` for the mapping).",
        "",
        "Numbers must be finite (`.nan`, `.inf` are refused everywhere but in `hparams`),",
        "integers must fit in 64 bits, and every duration has an upper bound, given with",
        "its reason below. A YAML file may be UTF-8 (with or without a BOM), UTF-16 or",
        "UTF-32 with a BOM, or GBK/GB18030 (read with a warning: save it as UTF-8).",
        "",
        "## `MonitorConfig`",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *_fields(MonitorConfig),
        "",
        *_asked_and_got(),
        "## `checkpoint`",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *_fields(CheckpointSettings, "checkpoint."),
        "",
        "## `hardware`",
        "",
        "Per-rank telemetry, sampled on mindwatch's own thread (never the training thread);",
        "on by default, each source can be switched off, e.g. `hardware: {npu_smi: false}`.",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *_fields(HardwareSettings, "hardware."),
        "",
        "## `prometheus`",
        "",
        "Prometheus metrics of the run (docs/prometheus.md); off unless the section is given,",
        "e.g. `prometheus: {port: 9410, labels: {job: llama-7b, team: nlp}}`.",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *_fields(PrometheusSettings, "prometheus."),
        "",
        "### `prometheus.push`",
        "",
        (PushSettings.__doc__ or "").strip(),
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *_fields(PushSettings, "prometheus.push."),
        "",
        "## `alerts`",
        "",
        "The anomaly rules (docs/alerts.md). Each rule has its own section below.",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *_fields(AlertSettings, "alerts."),
        "",
        *_rule_sections(),
        "## Bad input and the message it gets",
        "",
        "Every one of these is refused when the config is built, before training starts.",
        "Two more traps from the seeds are handled where they can be seen: a `summary_dir`",
        "whose parent folder is missing is created (MindSpore's SummaryCollector fails",
        "silently there), and one that cannot be created or written raises `LogDirError`",
        "naming the folder when the monitor is created, still before training. Keys of the",
        "seeds' `monitor_config` that are not about monitoring (`save_graphs`,",
        "`save_graphs_path`, `export_kwargs`, `keep_default_action`) are accepted and named",
        "in one warning.",
        "",
    ]
    for data, why in BAD_INPUTS:
        try:
            MonitorConfig.from_dict(data)
        except ConfigError as exc:
            message = str(exc)
        else:
            raise SystemExit(f"BAD_INPUTS entry {data} was accepted")
        out += [f"**`{json.dumps(data)}`** ({why}):", "", "```", message, "```", ""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    page = render()
    if args.check:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != page:
            print(f"{PAGE} is stale: run python docs/gen_config_reference.py", file=sys.stderr)
            sys.exit(1)
        return
    PAGE.write_text(page, encoding="utf-8")


if __name__ == "__main__":
    main()
