"""What the machine says about this process (framework-free, cheap enough per step)."""

from __future__ import annotations

import sys

__all__ = ["host_peak_rss_mb"]


def host_peak_rss_mb() -> float:
    """This process's peak resident memory in MiB (``getrusage``; about 1 us), or NaN
    where the platform cannot tell (Windows)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Linux/macOS
        return float("nan")
    peak = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    # Linux reports KiB, macOS bytes.
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0
