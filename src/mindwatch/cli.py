"""The ``mindwatch`` command."""

from __future__ import annotations

import logging
import sys
from typing import Optional

import click

from mindwatch._version import __version__

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mindwatch")
def main() -> None:
    """mindwatch: an online training monitor for MindSpore and MindSpore Transformers."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s")


@main.command()
@click.option(
    "--logdir",
    default="./runs",
    show_default=True,
    help="Root folder; the run is written to <logdir>/<YYYYmmdd-HHMMSS>_demo.",
)
@click.option("--steps", default=300, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--mode",
    type=click.Choice(["graph", "pynative"]),
    default="graph",
    show_default=True,
    help="MindSpore execution mode.",
)
@click.option(
    "--sink/--no-sink", default=False, show_default=True, help="dataset_sink_mode of Model.train."
)
def demo(logdir: str, steps: int, seed: int, mode: str, sink: bool) -> None:
    """Train a small MindSpore model on CPU with full monitoring.

    Synthetic data is made in memory; the run folder gets TensorBoard event files and
    run.json, and the command to view them is printed at the end.
    """
    try:
        from mindwatch.mindspore.demo import run_demo
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise click.ClickException(_no_mindspore(exc)) from exc
    run_demo(logdir=logdir, steps=steps, seed=seed, mode=mode, sink=sink)


def _no_mindspore(exc: Optional[BaseException]) -> str:
    return (
        f"mindwatch demo needs MindSpore ({exc}). Install it with "
        "`pip install 'mindwatch[mindspore]'` (CPU build from PyPI), or install the "
        "MindSpore build that matches your CANN version on Ascend."
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
