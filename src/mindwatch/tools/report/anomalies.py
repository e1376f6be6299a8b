"""The report's "Anomalies" section: each analysed alert's story (the one ``mindwatch
explain`` prints, :mod:`mindwatch.tools.explain`) and a small heatmap of the layers
around it.

The heatmap is the analysis's ``heat``: the robust z-score of each layer's gradient
norm (rows: the first movers first, then the layers that moved most, at most a dozen)
at each judged step up to the alert (columns, a few dozen), so the first mover is the
top row lighting up before the others. Colours are symmetric around 0 (red: larger
than its usual size, blue: smaller), clipped at twice the departure threshold; black:
not finite. Interactive HTML draws it with plotly (hover: layer, step, z), the static
HTML as a table of coloured cells, the PDF with matplotlib; each is a few kilobytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from mindwatch.common.i18n import _
from mindwatch.tools.explain import Story, incidents, story
from mindwatch.tools.report.plot import Plot, text
from mindwatch.tools.report.summary import RunSummary

__all__ = [
    "HEAT_COLORS",
    "MAX_ANOMALIES",
    "anomalies",
    "draw_heat",
    "heat_caption",
    "heat_limit",
    "heat_plot",
    "heat_table",
    "run_anomalies",
]

MAX_ANOMALIES = 10  # per run; ``mindwatch explain --alert N`` tells the others


def anomalies(run: RunSummary) -> tuple[list[Story], int]:
    """The stories of ``run``'s analysed alerts (the first :data:`MAX_ANOMALIES`), and
    how many analysed alerts it has in all."""
    analysed = [i for i in incidents(run.folder, run.alerts) if i.analysed]
    return [story(i) for i in analysed[:MAX_ANOMALIES]], len(analysed)


# ColorBrewer's RdBu, 11 classes, blue (below usual) to red (above): the static
# heatmap's cells, as CSS classes h0..h10 (h5: as usual), hx: not finite.
HEAT_COLORS = (
    "#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
    "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f",
)  # fmt: skip


def heat_limit(told: Story) -> float:
    """Where the colours clip: twice the departure threshold."""
    return 2.0 * told.threshold


def _matrix(heat: dict[str, Any]) -> np.ndarray[Any, Any]:
    """The heat's z as floats; NaN where it was not finite (null in the file)."""
    rows = heat.get("z") or []
    steps = len(heat.get("steps") or [])
    out = np.full((len(rows), steps), math.nan)
    for r, row in enumerate(rows):
        for c, value in enumerate(row[:steps] if isinstance(row, list) else []):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[r, c] = float(value)
    return out


def heat_caption(told: Story) -> str:
    return _(
        "Robust z-score of each layer's gradient norm against its own recent history, per "
        "step up to the alert (red: larger than usual, blue: smaller; black: not finite; "
        "a layer departs at |z| {z})."
    ).format(z=f"{told.threshold:g}")


def heat_plot(told: Story, key: str) -> Optional[Plot]:
    """The interactive heatmap of ``told`` (None without heat)."""
    heat = told.heat
    if heat is None:
        return None
    z = _matrix(heat)
    limit = heat_limit(told)
    layers = [text(name) for name in heat["layers"]]
    data = [
        {
            "type": "heatmap",
            "x": [int(s) for s in heat["steps"]],
            "y": layers,
            "z": [[None if math.isnan(v) else round(v, 2) for v in row] for row in z.tolist()],
            "zmin": -limit,
            "zmax": limit,
            "zmid": 0,
            # the static table's colours (a named plotly.js scale differs from
            # ColorBrewer's): blue below the usual size, white as usual, red above
            "colorscale": [[i / (len(HEAT_COLORS) - 1), c] for i, c in enumerate(HEAT_COLORS)],
            "colorbar": {"title": {"text": "z"}, "thickness": 10},
            "hovertemplate": _("{layer}, step {step}: z {z}").format(
                layer="%{y}", step="%{x}", z="%{z}"
            )
            + "<extra></extra>",
            "hoverongaps": False,
        }
    ]
    layout = {
        "height": 120 + 16 * len(layers),
        "margin": {"l": 10, "r": 10, "t": 10, "b": 40},
        "xaxis": {"title": {"text": _("step")}},
        "yaxis": {"autorange": "reversed", "automargin": True, "tickfont": {"size": 10}},
        "plot_bgcolor": "#000000",  # the gaps (not finite) show it
    }
    return Plot(key, heat_caption(told), {"data": data, "layout": layout})


def draw_heat(ax: Any, told: Story, *, fontsize: float = 6.0) -> None:
    """The heatmap of ``told`` into matplotlib axes (a story with heat)."""
    from matplotlib import colormaps

    heat = told.heat or {}
    z = _matrix(heat)  # NaN: drawn in the colour map's "bad" colour
    limit = heat_limit(told)
    cmap = colormaps["RdBu_r"].with_extremes(bad="#000000")
    steps = [int(s) for s in heat.get("steps") or []]
    image = ax.imshow(z, cmap=cmap, vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
    names = [str(n) for n in heat.get("layers") or []]
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([n if len(n) <= 48 else "..." + n[-45:] for n in names], fontsize=fontsize)
    every = max(len(steps) // 6, 1)
    ticks = list(range(0, len(steps), every))
    if ticks and len(steps) - 1 - ticks[-1] < every / 2:
        ticks[-1] = len(steps) - 1  # the alert's step, not a label on top of it
    elif steps:
        ticks.append(len(steps) - 1)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(steps[t]) for t in ticks], fontsize=fontsize)
    ax.set_xlabel(_("step"), fontsize=fontsize + 1)
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    bar.ax.tick_params(labelsize=fontsize)
    bar.set_label("z", fontsize=fontsize + 1)


def heat_table(told: Story) -> Optional[dict[str, Any]]:
    """The heatmap for the script-free HTML, as table cells: ``rows`` of (layer, [css
    class per step]), ``first`` and ``last`` step. A table of classed cells is a few
    kilobytes where an SVG with the names drawn as shapes is tens; the names stay
    text the page escapes."""
    heat = told.heat
    if heat is None:
        return None
    z = _matrix(heat)
    limit = heat_limit(told)
    half = len(HEAT_COLORS) // 2
    rows = []
    for name, row in zip(heat["layers"], z):
        classes = []
        for value in row:
            if math.isnan(value):
                classes.append("hx")
            else:
                level = round(max(min(value / limit, 1.0), -1.0) * half) + half
                classes.append(f"h{level}")
        rows.append((str(name), classes))
    steps = [int(s) for s in heat["steps"]]
    return {"rows": rows, "first": steps[0], "last": steps[-1], "columns": len(steps)}


def run_anomalies(runs: Sequence[RunSummary]) -> list[tuple[RunSummary, list[Story], int]]:
    """Each run with analysed alerts, its stories and its count of analysed alerts."""
    found = []
    for run in runs:
        stories, total = anomalies(run)
        if stories:
            found.append((run, stories, total))
    return found
