"""MindFormers integration: ``callbacks: - type: MindWatchMonitor`` in a MindFormers YAML.

MindFormers builds callbacks from its registry (``MindFormerRegister``, module type
``CALLBACK``) by the ``type`` name of each ``callbacks:`` entry, passing the entry's
other keys as arguments. :func:`register` adds :class:`MindWatchMonitor` there, so
that a YAML can say::

    callbacks:
      - type: MFLossMonitor
      - type: MindWatchMonitor
        logdir: ./output/mindwatch
        per_rank: true
      - type: CheckpointMonitor

MindFormers imports no plugins by itself, so run its script through mindwatch, which
registers first and then runs the script unchanged::

    python -m mindwatch.mindspore.mindformers run_mindformer.py --config my.yaml

(or ``import mindwatch.mindspore.mindformers; mindwatch.mindspore.mindformers.register()``
in your own script before MindFormers builds its callbacks).

What it records from MindFormers' train cells (``MFTrainOneStepCell`` and the others, any
subclass): the loss as ``MFLossMonitor`` shows it, the lr the cell applied, the grad norm
(with ``use_clip_grad``), the loss scale and overflow, ``local_norm`` as per-layer
gradient norms, and TFLOPS / MFU from MindSpore's FLOPs count; ``tag_style: mindformers``
adds MindFormers' own tag names. See ``docs/mindformers.md``.
"""

from __future__ import annotations

import logging
import runpy
import sys
from typing import Any, Optional

from mindwatch.config import MonitorConfig, accepted_keys
from mindwatch.mindspore.callback import TrainingMonitor

__all__ = ["NAME", "MindWatchMonitor", "register"]

log = logging.getLogger(__name__)

NAME = "MindWatchMonitor"


class MindWatchMonitor(TrainingMonitor):
    """:class:`TrainingMonitor` as a MindFormers ``callbacks:`` entry.

    Every key of the entry is a :class:`~mindwatch.MonitorConfig` key; ``config`` may
    name a YAML file (mindwatch's, or the MindFormers training YAML itself, whose
    ``monitor_config`` / ``tensorboard`` sections are read) that the other keys refine.
    Keys MindFormers adds for its own callbacks are ignored with a warning.
    """

    def __init__(self, config: Optional[str] = None, **options: Any) -> None:
        base = MonitorConfig.from_any(config) if config else MonitorConfig()
        known = set(accepted_keys(MonitorConfig))
        extra = sorted(k for k in options if k not in known)
        if extra:
            log.warning("mindwatch: %s ignores the keys %s", NAME, extra)
        given = {k: v for k, v in options.items() if k in known}
        merged = MonitorConfig.from_dict({**base.model_dump(exclude_unset=True), **given})
        super().__init__(merged)


def register() -> bool:
    """Register :class:`MindWatchMonitor` with MindFormers' callback registry.

    Returns False (and does nothing) when ``mindformers`` is not importable.
    """
    try:
        from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
    except ImportError:
        return False
    if not MindFormerRegister.is_exist(MindFormerModuleType.CALLBACK, NAME):
        MindFormerRegister.register(MindFormerModuleType.CALLBACK, alias=NAME)(MindWatchMonitor)
    return True


def main(argv: Optional[list[str]] = None) -> None:
    """``python -m mindwatch.mindspore.mindformers SCRIPT [ARGS...]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit("usage: python -m mindwatch.mindspore.mindformers SCRIPT [ARGS...]")
    if not register():
        raise SystemExit("mindformers is not importable in this Python: nothing to register")
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
