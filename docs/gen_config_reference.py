"""Generate docs/config.md from MonitorConfig itself: every field, and the exact error
message each documented bad input gets.

    python docs/gen_config_reference.py          # rewrite docs/config.md
    python docs/gen_config_reference.py --check  # exit 1 if docs/config.md is stale

The test suite runs --check, so the page always shows what the code really says.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel

from mindwatch.config import AlertSettings, CheckpointSettings, ConfigError, MonitorConfig

PAGE = Path(__file__).with_name("config.md")

# (what the user wrote, why it is wrong) -- each must be refused.
BAD_INPUTS: list[tuple[dict[str, Any], str]] = [
    ({"collect_freq": 0}, "MindSpore accepts it and records nothing"),
    ({"step_interval": -5}, "MindFormers' name for collect_freq, negative"),
    ({"flush_sec": 2}, "misspelt key"),
    ({"sumary_dir": "runs/exp"}, "misspelt alias of logdir"),
    ({"collect_specified_data": ["inputs"]}, "blows device memory; MindSpore accepts it"),
    ({"target": ["layers.[0"]}, "not a regular expression"),
    ({"flush_secs": 0}, "a flush delay must be positive"),
    ({"max_file_size": 100}, "rotation below 1 KiB would make a file per event"),
    ({"progress": "fancy"}, "not one of the display modes"),
    ({"tag_style": "megatron"}, "unknown tag style"),
    ({"print_every": -1}, "negative interval"),
    ({"logdir": 5}, "a folder must be a path string"),
    ({"checkpoint": {"keep_max": 3}}, "misspelt nested key"),
    ({"checkpoint": {"save_checkpoint_steps": 0}}, "a checkpoint every 0 steps"),
    ({"name_hparams": ["lr"]}, "folder name from an hparam that is not given"),
    ({"hparams": {"layers": {"a": 1}}}, "hparam values must be scalars"),
    ({"aggregate_every": -1}, "a negative reduction interval"),
    ({"reductions": {"accuracy": "average"}}, "not one of the reduction kinds"),
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


def render() -> str:
    out = [
        "# Configuration reference",
        "",
        "Generated from `mindwatch.MonitorConfig` by `docs/gen_config_reference.py`; do not",
        "edit by hand. A config is a dict, a YAML file of these keys (or a `mindwatch:`",
        "section), or a MindFormers training YAML (`monitor_config`, `tensorboard`,",
        "`callbacks:`; see `mindwatch.config.mindformers` for the mapping).",
        "",
        "## `MonitorConfig`",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *_fields(MonitorConfig),
        "",
        "## `checkpoint`",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *_fields(CheckpointSettings, "checkpoint."),
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
