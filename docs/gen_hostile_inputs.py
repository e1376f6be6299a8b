"""Generate docs/hostile-inputs.md by feeding mindwatch every hostile input it promises
to survive, and writing down what it really did.

    python docs/gen_hostile_inputs.py          # rewrite docs/hostile-inputs.md
    python docs/gen_hostile_inputs.py --check  # exit 1 if the page is stale

Each case runs for real (a Monitor writing event files into a scratch folder, the
``mindwatch`` command through click's runner, real bytes on disk) and is checked against
the promise while it runs: the outcome is one of (a) an error before training naming the
key or file, (b) one warning and training goes on, (c) exit status 2 naming the file; and
the points logged before the fault read back with TensorBoard's own EventAccumulator. A
case that breaks the promise stops the script. Paths, times and process ids are replaced
by placeholders so the page is the same on every machine; the test suite runs --check.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from click.testing import CliRunner
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from mindwatch import Monitor
from mindwatch.cli import main as cli
from mindwatch.config import ConfigError

PAGE = Path(__file__).with_name("hostile-inputs.md")


@dataclass
class Case:
    item: str  # the item
    given: str  # what the user did
    outcome: str  # "a", "b" or "c"
    shown: str  # what mindwatch printed (normalised)
    kept: str  # what reads back


class Scratch:
    """A scratch folder and a log capture for one case."""

    def __init__(self, root: Path, name: str) -> None:
        self.folder = root / name
        self.records: list[logging.LogRecord] = []

    def warnings(self) -> list[str]:
        return [
            r.getMessage()
            for r in self.records
            if r.name.startswith("mindwatch") and r.levelno >= logging.WARNING
        ]


class _Capture(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def captured(scratch: Scratch) -> Iterator[None]:
    handler = _Capture(scratch.records)
    logger = logging.getLogger("mindwatch")
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.INFO
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = True


def read_back(folder: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def steps_of(folder: Path, tag: str = "train/loss") -> list[int]:
    return [step for step, _ in read_back(folder).get(tag, [])]


# The end-of-run summary of non-finite values counts what a warning already said.
SUMMARY = "mindwatch: non-finite values were logged"


def one_warning(scratch: Scratch, *names: str) -> str:
    """The one warning (naming ``names``), and the end-of-run summary if there is one."""
    warnings = scratch.warnings()
    faults = [w for w in warnings if not w.startswith(SUMMARY)]
    assert len(faults) == 1, warnings
    assert len(warnings) <= 2, warnings
    for name in names:
        assert name in faults[0], (name, faults[0])
    return "\n".join(warnings)


def config_error(call: Callable[[], Any], *names: str) -> str:
    try:
        call()
    except ConfigError as exc:
        message = str(exc)
        for name in names:
            assert name in message, (name, message)
        return message
    raise AssertionError("no ConfigError")


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def exit_2(*args: str, names: tuple[str, ...] = ()) -> str:
    result = run_cli(*args)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    for name in names:
        assert name in result.output, (name, result.output)
    return str(result.output).strip()


def short_run(folder: Path, steps: int = 5, **config: Any) -> Path:
    with Monitor(folder, {"print_every": 0, **config}) as mon:
        for step in range(1, steps + 1):
            mon.log_step(step, loss=1.0 / step, lr=0.1)
    return folder


# ---------------------------------------------------------------------- the cases


def flush_secs(s: Scratch) -> Case:
    shown = config_error(lambda: Monitor(s.folder, {"flush_secs": 1e10}), "flush_secs")
    return Case("1", "`{flush_secs: 1e10}` (or `.inf`)", "a", shown, "nothing was logged yet")


def max_block_secs(s: Scratch) -> Case:
    config = {"max_block_secs": 1e10, "max_queue": 10}
    shown = config_error(lambda: Monitor(s.folder, config), "max_block_secs")
    return Case("2", "`{max_block_secs: 1e10, max_queue: 10}`", "a", shown, "nothing yet")


def huge_int(s: Scratch) -> Case:
    with captured(s), Monitor(s.folder, {"print_every": 0}) as mon:
        mon.log_step(1, loss=0.5, tokens=1000)
        mon.log_step(2, loss=0.4, tokens=10**400)
        mon.log_step(3, loss=0.3, tokens=1000)
    shown = one_warning(s, "'tokens'")
    assert steps_of(s.folder) == [1, 2, 3]
    return Case("3", "`log_step(2, tokens=10**400)`", "b+summary", shown, "train/loss steps 1-3")


def bad_run_json(s: Scratch) -> Case:
    short_run(s.folder)
    info = s.folder / "run.json"
    data = json.loads(info.read_text(encoding="utf-8"))
    info.write_text(json.dumps({**data, "hparams": [1, 2], "config": "oops"}), "utf-8")
    out = s.folder / "report.json"
    with captured(s):
        result = run_cli("report", str(s.folder), "--format", "json", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert out.exists()
    shown = one_warning(s, "run.json", "hparams")
    return Case(
        "4",
        'run.json with `hparams: [1, 2]`, `config: "oops"`; `mindwatch report`',
        "b",
        shown,
        "the report, from the event files",
    )


def binary_alerts(s: Scratch) -> Case:
    short_run(s.folder)
    (s.folder / "alerts.jsonl").write_bytes(bytes(range(256)) * 4)
    out = s.folder / "report.md"
    with captured(s):
        result = run_cli("report", str(s.folder), "--format", "md", "--out", str(out))
    assert result.exit_code == 0, result.output
    shown = one_warning(s, "alerts.jsonl")
    return Case("5", "a binary alerts.jsonl; `mindwatch report`", "b", shown, "the report")


def gbk_yaml(s: Scratch) -> Case:
    s.folder.mkdir(parents=True)
    config = s.folder / "monitor.yaml"
    config.write_bytes("# 训练监控配置\nflush_secs: 1\nprint_every: 0\n".encode("gbk"))
    with captured(s), Monitor(s.folder / "run", config) as mon:
        mon.log_step(1, loss=1.0)
    shown = one_warning(s, "monitor.yaml")
    assert steps_of(s.folder / "run") == [1]
    return Case("6", "a config YAML saved in GBK (a Chinese comment)", "b", shown, "train/loss")


def latin1_yaml(s: Scratch) -> Case:
    short_run(s.folder / "run")
    config = s.folder / "alerts.yaml"
    config.write_bytes("# caf\xe9\nalerts:\n  spike: {ratio: 3}\n".encode("latin-1"))
    shown = exit_2(
        "watch", str(s.folder), "--once", "--config", str(config), names=("alerts.yaml",)
    )
    return Case(
        "6",
        "`watch --config` of a Latin-1 YAML",
        "c",
        shown,
        "nothing logged: the input of a command",
    )


def tolerances_utf16(s: Scratch) -> Case:
    run = short_run(s.folder / "run")
    tolerances = s.folder / "tol.yaml"
    tolerances.write_bytes("loss_rel: [0.05\n".encode("utf-16"))
    shown = exit_2(
        "compare",
        str(run),
        "--baseline",
        str(run),
        "--tolerances",
        str(tolerances),
        names=("tol.yaml",),
    )
    return Case(
        "6",
        "`compare --tolerances` of a broken UTF-16 YAML",
        "c",
        shown,
        "nothing logged: the input of a command",
    )


def token_in_argv(s: Scratch) -> Case:
    saved = sys.argv
    sys.argv = [
        "train.py",
        "--webhook",
        "https://oapi.dingtalk.com/robot/send?access_token=ab12cd34",
    ]
    try:
        short_run(s.folder)
    finally:
        sys.argv = saved
    text = (s.folder / "run.json").read_text(encoding="utf-8")
    assert "ab12cd34" not in text
    argv = re.search(r'"argv": \[[^\]]*\]', text)
    assert argv is not None
    shown = " ".join(argv.group(0).split())
    return Case(
        "7",
        "a webhook token in the command line",
        "masked",
        f"run.json: {shown}",
        "every point; the token is nowhere in the folder",
    )


def zero_tail(s: Scratch) -> Case:
    short_run(s.folder)
    (event,) = s.folder.glob("events.out.tfevents.*")
    with open(event, "ab") as handle:
        handle.write(bytes(5 << 20))  # what a power loss leaves: the size, not the data
    with captured(s):
        result = run_cli("export", str(s.folder), "--out", str(s.folder / "x.csv"))
    assert result.exit_code == 0, result.output
    shown = one_warning(s, "damaged")
    return Case(
        "8",
        "5 MB of zeros after the last record (power loss); `mindwatch export`",
        "b",
        shown,
        "every record before the zeros",
    )


def bad_webhook(s: Scratch) -> Case:
    config = {"alerts": {"notify": [{"kind": "webhook", "url": "http://hooks.example:abc/x"}]}}
    shown = config_error(lambda: Monitor(s.folder, config), "alerts.notify.0.url")
    assert "hooks.example" not in shown
    return Case("9", "a webhook URL `http://host:abc/...`", "a", shown, "nothing yet")


def cut_file(s: Scratch) -> Case:
    short_run(s.folder, steps=50)
    (event,) = s.folder.glob("events.out.tfevents.*")
    data = event.read_bytes()
    event.write_bytes(data[: len(data) * 2 // 3])
    result = run_cli("doctor", str(s.folder))
    assert result.exit_code == 1, result.output
    shown = "\n".join(line for line in result.output.splitlines() if "missing" in line)
    assert shown, result.output
    return Case(
        "10",
        "a finished 50-step run whose event file was cut; `mindwatch doctor`",
        "finding",
        shown,
        f"the {len(steps_of(s.folder))} steps before the cut",
    )


def steps_back(s: Scratch) -> Case:
    with captured(s), Monitor(s.folder, {"print_every": 0}) as mon:
        for step in (1, 2, 10, 10, 3, -5):
            mon.log_step(step, loss=1.0)
    shown = one_warning(s, "log_step(10)")
    assert sorted(steps_of(s.folder)) == [-5, 1, 2, 3, 10, 10]
    return Case("10", "`log_step(10)` twice, then 3, then -5", "b", shown, "all six points")


def folder_deleted(s: Scratch) -> Case:
    with captured(s), Monitor(s.folder, {"print_every": 0, "flush_secs": 0.05}) as mon:
        for step in range(1, 6):
            mon.log_step(step, loss=1.0)
        mon.flush()
        shutil.rmtree(s.folder)
        for step in range(6, 11):
            mon.log_step(step, loss=1.0)
    shown = one_warning(s, "deleted or moved")
    assert steps_of(s.folder) == list(range(6, 11))
    return Case(
        "11",
        "the run folder deleted at step 5",
        "b",
        shown,
        "steps 6-10 in the folder made again (1-5 went with the deleted one)",
    )


def monitor_on_string(s: Scratch) -> Case:
    s.folder.mkdir(parents=True)
    config = s.folder / "mf.yaml"
    config.write_text(
        "output_dir: ./out\nmonitor_config:\n  monitor_on: 'maybe'\n  step_interval: 1\n",
        encoding="utf-8",
    )
    shown = config_error(lambda: Monitor(s.folder / "run", config), "monitor_on")
    return Case(
        "also",
        "MindFormers `monitor_on: 'maybe'` (`'False'` now means off)",
        "a",
        shown,
        "nothing yet",
    )


def drops(s: Scratch) -> Case:
    config = {"print_every": 0, "max_block_secs": 0, "max_queue": 10, "alerts": {"enabled": False}}
    with captured(s), Monitor(s.folder, config) as mon:
        for step in range(1, 20001):
            mon.log_step(step, loss=1.0 / step)
    warnings = s.warnings()
    total = [w for w in warnings if "in all" in w]
    assert len(total) == 1, warnings
    recorded = json.loads((s.folder / "run.json").read_text(encoding="utf-8"))["points_dropped"]
    assert f"{recorded} points" in total[0], (recorded, total[0])
    assert steps_of(s.folder)  # what was not dropped reads back
    shown = re.sub(r"\b\d+ points were dropped", "<n> points were dropped", "\n".join(warnings))
    return Case(
        "also",
        "`{max_block_secs: 0, max_queue: 10}` and 20,000 steps at once",
        "drops",
        shown,
        "the steps that found room (the queues never wait); <n> is the number run.json records",
    )


CASES = [
    flush_secs,
    max_block_secs,
    huge_int,
    bad_run_json,
    binary_alerts,
    gbk_yaml,
    latin1_yaml,
    tolerances_utf16,
    token_in_argv,
    zero_tail,
    bad_webhook,
    cut_file,
    steps_back,
    folder_deleted,
    monitor_on_string,
    drops,
]


# ---------------------------------------------------------------------- the page


def normalise(text: str, root: Path) -> str:
    text = text.replace(str(root), "<tmp>")
    text = re.sub(
        r"events\.out\.tfevents\.\d+\.[^.\s]+\.\d+\.\d+", "events.out.tfevents.<...>", text
    )
    return re.sub(r"\d{8}-\d{6}", "<date>-<time>", text)


OUTCOMES = {
    "a": "(a) refused before training, naming the key or file",
    "b": "(b) one warning; training (or the command) goes on",
    "c": "(c) exit status 2, naming the file",
    "b+summary": "(b) one warning; training goes on (the end-of-run summary of non-finite "
    "values counts it again)",
    "masked": "Nothing to warn about: the secret is masked wherever mindwatch stores or prints it",
    "drops": "A warning from each queue when it starts dropping, and one total at the end",
    "finding": "A finding of a checking command (exit status 1: what it is there to find)",
}

HEAD = """# Hostile inputs: what mindwatch does with them

mindwatch's promise for bad input: it is one of (a) a clear error before training
starts, naming the key or file and the fix; (b) one warning, and training goes on; (c)
exit status 2 from a `mindwatch` command, naming the file and the reason. Never a
traceback, and everything logged before the fault stays readable by TensorBoard.

This page is generated by running each input for real
(`python docs/gen_hostile_inputs.py`; the test suite runs it with `--check`, so what is
shown here is what the code prints today). Each case asserts its promise while it
runs, including the read-back with TensorBoard's own `EventAccumulator`. The numbered
items are those of the issue that collected them; the suite also tries each class of
input with property tests (`tests/hostile/`): every numeric config field at and beyond
its bounds, YAML in any encoding, `run.json` and `alerts.jsonl` holding any JSON value
or any bytes, event files cut, zero-filled, garbled, duplicated and reversed, and
`log_step` values of every Python, numpy and MindSpore number type.

Two more promises that are not an input:

* A crash of a checking command (`watch`, `report`, `compare`, `export`, `doctor`,
  `convert`, `runs`, `tensorboard`, `explain`) is exit status 2 with one line naming
  the command and the error, never 1, which means "findings"; `MINDWATCH_DEBUG=1` adds
  the traceback.
* Under CI (`CI=true`, which `.ci/run` sets) no test may be skipped: a missing
  dependency fails the run, naming it (`tests/ci_skips.py`).

"""


def render() -> str:
    root = Path(tempfile.mkdtemp(prefix="mindwatch-hostile-"))
    previous = os.getcwd()
    os.chdir(root)
    sections = [HEAD]
    try:
        for make in CASES:
            scratch = Scratch(root, make.__name__)
            case = make(scratch)
            shown = normalise(case.shown, root)
            sections.append(
                f"## {case.item}. {case.given}\n\n"
                f"{OUTCOMES[case.outcome]}. Kept: {case.kept}.\n\n```\n{shown}\n```\n"
            )
    finally:
        os.chdir(previous)
        shutil.rmtree(root, ignore_errors=True)
    return "\n".join(sections)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)  # the cases capture what they check
    page = render()
    if args.check:
        if PAGE.read_text(encoding="utf-8") != page:
            sys.exit(f"{PAGE} is stale: run python docs/gen_hostile_inputs.py")
        return
    PAGE.write_text(page, encoding="utf-8")


if __name__ == "__main__":
    main()
