"""Reading scalars back: mindwatch.read_scalars vs EventAccumulator and tbparse.

The same 200,000 scalar points (10 tags x 20,000 steps) in the shapes writers leave them:
mindwatch's (one event per step holding every tag), and one scalar per event as torch's
and tensorboardX's SummaryWriter write them, as MindFormers writes them (tensorboardX's
writer, MindFormers' tags of different lengths) and as mindwatch.SummaryWriter writes
them (when this mindwatch has it). For each file, first the exact-value check: every
reader's points (tag, step, float32 value, in order) must equal EventAccumulator's
(with ``size_guidance`` 0 = keep all; its default keeps 10,000 random points per tag);
only then are the reads timed, side by side in one run. The floor is a bare Python loop
over the records that only checks their CRCs.

A second table (issue 20) reads damage: a short run followed by 50 MB of zeros (what
power loss leaves), of 0xFF bytes, of random bytes and of small int64 integers (a
plausible record length every few bytes: an array or a checkpoint copied in), beside
a file of 50 MB of real events, each with mindwatch.read_scalars, the watcher's
incremental RunReader and EventAccumulator (which stops at the first damage). Passing
damage must cost less than reading as many bytes of real events.

    python benchmarks/read.py [--repeats 3] [--steps 20000] [--damage-mb 50]
        [--files mindwatch,torch,tensorboardX,MindFormers,SummaryWriter]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import mindwatch
from mindwatch.events.crc import BACKEND as CRC_BACKEND
from mindwatch.events.crc import crc32c

TAGS = [f"bench/tag{i}" for i in range(10)]


def write_mindwatch(folder: Path, steps: int) -> None:
    with mindwatch.Monitor(folder, {"print_every": 0, "max_queue": 10**7}) as mon:
        for step in range(1, steps + 1):
            mon.log_scalars(step, {tag: step * 0.001 + i for i, tag in enumerate(TAGS)})


def per_event(writer: Any, steps: int, tags: list[str]) -> None:
    """One ``add_scalar`` a tag a step: one scalar per event."""
    with writer:
        for step in range(1, steps + 1):
            for i, tag in enumerate(tags):
                writer.add_scalar(tag, step * 0.001 + i, step)


def write_torch(folder: Path, steps: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    per_event(SummaryWriter(str(folder), max_queue=10**6, flush_secs=3600), steps, TAGS)


def write_tensorboardx(folder: Path, steps: int) -> None:
    from tensorboardX import SummaryWriter

    per_event(SummaryWriter(str(folder), max_queue=10**6, flush_secs=3600), steps, TAGS)


# MindFormers' training callback writes each of these with tensorboardX's add_scalar
# every logged step: one scalar per event, tags of different lengths.
MINDFORMERS_TAGS = [
    "loss",
    "learning-rate",
    "global-norm",
    "loss-scale",
    "batch-size",
    "epoch",
    "step-time",
    "throughput",
    "model-flops-throughput-per-npu",
    "overflow",
]


def write_mindformers(folder: Path, steps: int) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(folder), max_queue=10**6, flush_secs=3600)
    per_event(writer, steps, MINDFORMERS_TAGS)


def write_summarywriter(folder: Path, steps: int) -> None:
    writer = mindwatch.SummaryWriter(str(folder), config={"print_every": 0})
    per_event(writer, steps, TAGS)


WRITERS: dict[str, Callable[[Path, int], None]] = {
    "mindwatch": write_mindwatch,
    "torch": write_torch,
    "tensorboardX": write_tensorboardx,
    "MindFormers": write_mindformers,
    "SummaryWriter": write_summarywriter,
}
LABELS = {
    "mindwatch": "mindwatch Monitor file (one event per step, 10 scalars each)",
    "torch": "torch SummaryWriter file (one scalar per event)",
    "tensorboardX": "tensorboardX SummaryWriter file (one scalar per event)",
    "MindFormers": "MindFormers-shaped file (tensorboardX, its tags, one scalar per event)",
    "SummaryWriter": "mindwatch.SummaryWriter file (add_scalar; a step's scalars share one event)",
}


def read_floor(folder: Path) -> int:
    """Records framed and CRC-checked, nothing decoded: the least any reader must do."""
    records = 0
    for path in sorted(folder.glob("*tfevents*")):
        data = path.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from("<Q", data, pos)
            crc32c(data[pos : pos + 8])
            crc32c(data[pos + 12 : pos + 12 + length])
            pos += 16 + length
            records += 1
    return records


def read_mindwatch(folder: Path) -> Any:
    return mindwatch.read_scalars(folder)


def frame_points(frame: Any) -> dict[str, list[tuple[int, float]]]:
    """A DataFrame's points per tag (outside the timing: only the read is timed)."""
    out: dict[str, list[tuple[int, float]]] = {}
    for tag, group in frame.groupby("tag", sort=False):
        out[str(tag)] = list(zip(group["step"].tolist(), group["value"].tolist()))
    return out


def read_accumulator(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def read_tbparse(folder: Path) -> Any:
    from tbparse import SummaryReader

    return SummaryReader(str(folder), pivot=False).scalars


def read_run_reader(folder: Path) -> int:
    """The watcher's path: every item of the run, incrementally decoded."""
    from mindwatch.events.reader import RunReader

    return sum(1 for _ in RunReader(folder).read())


def write_events_of_size(folder: Path, size: int, chunk: int = 10_000) -> int:
    """A mindwatch event file of at least ``size`` bytes of real scalar events (10 tags
    a step, ``chunk`` steps at a time); its number of steps."""
    from mindwatch.events import EventFileWriter

    writer = EventFileWriter(folder, max_queue=10**7)
    step = 0
    while True:
        for _ in range(chunk):
            step += 1
            writer.add_scalars(step, tuple((tag, step * 0.001 + i) for i, tag in enumerate(TAGS)))
        writer.flush()
        if sum(f.stat().st_size for f in folder.glob("*tfevents*")) >= size:
            break
    writer.close()
    return step


def damage_table(root: Path, megabytes: int, repeats: int) -> None:
    import logging
    import random

    logging.getLogger("mindwatch").setLevel(logging.ERROR)  # one warning per damaged file
    size = megabytes << 20
    names = ("real", "zeros", "0xff", "random", "int64")
    folders = {name: Path(root, f"damage-{name}") for name in names}
    steps = write_events_of_size(folders["real"], size)
    tails = {
        "zeros": bytes(size),
        "0xff": b"\xff" * size,
        "random": random.Random(20).randbytes(size),
        "int64": np.arange(size // 8, dtype="<i8").tobytes(),
    }
    for name, tail in tails.items():
        write_events_of_size(folders[name], 1, chunk=100)  # 100 steps, then the damage
        (path,) = folders[name].glob("*tfevents*")
        with path.open("ab") as handle:
            handle.write(tail)
    for name, folder in folders.items():
        got = frame_points(read_mindwatch(folder))
        assert got == read_accumulator(folder), f"read_scalars differs on {name}"
    readers: dict[str, Callable[[Path], Any]] = {
        "mindwatch.read_scalars": read_mindwatch,
        "RunReader.read (watch)": read_run_reader,
        "EventAccumulator (keep all)": read_accumulator,
    }
    columns = {
        "real": f"{megabytes} MB real events",
        "zeros": f"+{megabytes} MB zeros",
        "0xff": f"+{megabytes} MB 0xFF",
        "random": f"+{megabytes} MB random",
        "int64": f"+{megabytes} MB int64",
    }
    print(
        f"Damage vs real events: {steps:,} steps (10 tags each) of real events in "
        f"{megabytes} MB, against 100 steps followed by {megabytes} MB of damage; "
        f"seconds, median of {repeats}"
    )
    print(f"  {'reader':<28}" + "".join(f"{label:>20}" for label in columns.values()))
    for name, read in readers.items():
        cells = []
        for column in columns:
            times = [timed(read, folders[column])[0] for _ in range(repeats)]
            cells.append(f"{statistics.median(times):20.3f}")
        print(f"  {name:<28}" + "".join(cells))
    print()


def timed(read: Callable[[Path], Any], folder: Path) -> tuple[float, Any]:
    start = time.perf_counter()
    result = read(folder)
    return time.perf_counter() - start, result


def exact_check(folder: Path, points: int) -> dict[str, list[tuple[int, float]]]:
    """EventAccumulator's points, after checking mindwatch's and tbparse's equal them
    exactly (tags, steps and float32 values, in order)."""
    reference = read_accumulator(folder)
    found = sum(len(v) for v in reference.values())
    assert found == points, f"EventAccumulator read {found} points, not {points}"
    assert frame_points(read_mindwatch(folder)) == reference, "read_scalars differs"
    assert frame_points(read_tbparse(folder)) == reference, "tbparse differs"
    return reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--damage-mb", type=int, default=50, help="0: no damage table")
    parser.add_argument(
        "--files",
        default=",".join(WRITERS),
        help="which writers' files to read, comma-separated (default: all; SummaryWriter "
        "only where this mindwatch has it)",
    )
    args = parser.parse_args()
    points = args.steps * len(TAGS)
    chosen = [name for name in args.files.split(",") if name]
    unknown = set(chosen) - set(WRITERS)
    if unknown:
        parser.error(f"unknown --files {sorted(unknown)}; choose from {list(WRITERS)}")
    if "SummaryWriter" in chosen and not hasattr(mindwatch, "SummaryWriter"):
        chosen.remove("SummaryWriter")
    readers: dict[str, Callable[[Path], Any]] = {
        "floor: records + CRCs only": read_floor,
        "mindwatch.read_scalars": read_mindwatch,
        "EventAccumulator (keep all)": read_accumulator,
        "tbparse SummaryReader": read_tbparse,
    }
    with tempfile.TemporaryDirectory() as root:
        print(
            f"{points:,} scalar points (10 tags x {args.steps:,} steps) a file, median of "
            f"{args.repeats}; crc32c backend: {CRC_BACKEND}\n"
        )
        for name in chosen:
            folder = Path(root, name)
            WRITERS[name](folder, args.steps)
            size = sum(f.stat().st_size for f in folder.glob("*tfevents*"))
            print(f"{LABELS[name]}, {size / 1e6:.1f} MB")
            reference = exact_check(folder, points)
            print(
                f"  exact-value check: mindwatch.read_scalars and tbparse return the "
                f"{points:,} points of EventAccumulator, same tags, steps and values"
            )
            times: dict[str, list[float]] = {reader: [] for reader in readers}
            for _ in range(args.repeats):
                for reader, read in readers.items():
                    seconds, result = timed(read, folder)
                    if reader.startswith(("mindwatch", "tbparse")):
                        result = frame_points(result)
                    if reader != "floor: records + CRCs only":
                        assert result == reference, f"{reader} differs on the {name} file"
                    times[reader].append(seconds)
            base = statistics.median(times["EventAccumulator (keep all)"])
            print(f"  {'reader':<32} {'seconds':>8} {'points/s':>12} {'vs EventAccumulator':>20}")
            for reader, values in times.items():
                seconds = statistics.median(values)
                print(
                    f"  {reader:<32} {seconds:8.3f} {points / seconds:12,.0f} "
                    f"{base / seconds:19.1f}x"
                )
            print()
        if args.damage_mb:
            damage_table(Path(root), args.damage_mb, args.repeats)


if __name__ == "__main__":
    main()
