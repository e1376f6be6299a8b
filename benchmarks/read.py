"""Reading scalars back: mindwatch.read_scalars vs EventAccumulator and tbparse.

The same file for everyone: 200,000 scalar points (10 tags x 20,000 steps) written by
mindwatch (one event per step), and the same points written by torch's SummaryWriter
(one event per point, as torch writes them). Every reader must return every point
(EventAccumulator with ``size_guidance`` 0 = keep all; its default keeps 10,000 random
points per tag); the results are checked against each other before any time is printed.
The floor is a bare loop over the records that only checks their CRCs.

A second table (issue 20) reads damage: a short run followed by 50 MB of zeros (what
power loss leaves), of 0xFF bytes, of random bytes and of small int64 integers (a
plausible record length every few bytes: an array or a checkpoint copied in), beside
a file of 50 MB of real events, each with mindwatch.read_scalars, the watcher's
incremental RunReader and EventAccumulator (which stops at the first damage). Passing
damage must cost less than reading as many bytes of real events.

    python benchmarks/read.py [--repeats 3] [--steps 20000] [--damage-mb 50]
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
from mindwatch.events.crc import crc32c

TAGS = [f"bench/tag{i}" for i in range(10)]


def write_mindwatch(folder: Path, steps: int) -> None:
    with mindwatch.Monitor(folder, {"print_every": 0, "max_queue": 10**7}) as mon:
        for step in range(1, steps + 1):
            mon.log_scalars(step, {tag: step * 0.001 + i for i, tag in enumerate(TAGS)})


def write_torch(folder: Path, steps: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(folder), max_queue=10**6, flush_secs=3600) as writer:
        for step in range(1, steps + 1):
            for i, tag in enumerate(TAGS):
                writer.add_scalar(tag, step * 0.001 + i, step)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--damage-mb", type=int, default=50, help="0: no damage table")
    args = parser.parse_args()
    points = args.steps * len(TAGS)
    readers: dict[str, Callable[[Path], Any]] = {
        "floor: records + CRCs only": read_floor,
        "mindwatch.read_scalars": read_mindwatch,
        "EventAccumulator (keep all)": read_accumulator,
        "tbparse SummaryReader": read_tbparse,
    }
    with tempfile.TemporaryDirectory() as root:
        files = {"mindwatch file": Path(root, "mw"), "torch file": Path(root, "torch")}
        write_mindwatch(files["mindwatch file"], args.steps)
        write_torch(files["torch file"], args.steps)
        print(
            f"{points:,} scalar points (10 tags x {args.steps:,} steps), median of "
            f"{args.repeats}; every reader's points checked equal to EventAccumulator's\n"
        )
        for label, folder in files.items():
            times: dict[str, list[float]] = {name: [] for name in readers}
            reference = read_accumulator(folder)
            assert sum(len(v) for v in reference.values()) == points
            for _ in range(args.repeats):
                for name, read in readers.items():
                    seconds, result = timed(read, folder)
                    if name.startswith(("mindwatch", "tbparse")):
                        result = frame_points(result)
                    if name != "floor: records + CRCs only":
                        assert result == reference, f"{name} differs on the {label}"
                    times[name].append(seconds)
            base = statistics.median(times["EventAccumulator (keep all)"])
            print(f"{label}")
            print(f"  {'reader':<32} {'seconds':>8} {'points/s':>12} {'vs EventAccumulator':>20}")
            for name, values in times.items():
                seconds = statistics.median(values)
                print(
                    f"  {name:<32} {seconds:8.3f} {points / seconds:12,.0f} {base / seconds:19.1f}x"
                )
            print()
        if args.damage_mb:
            damage_table(Path(root), args.damage_mb, args.repeats)


if __name__ == "__main__":
    main()
