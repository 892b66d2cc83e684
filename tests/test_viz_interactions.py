"""The interaction matrix over the rows: the heat map of an interactions explainer's pairs with
the drifts and alarms marked, as the TensorBoard sink draws it from its record."""

from __future__ import annotations

import math

import numpy as np
import pytest

from torchstream.sinks.history import History
from torchstream.sinks.tensorboard import ExplanationLog
from torchstream.viz.importance import (
    FIGURE_TAG,
    INTERACTIONS_TAG,
    explanation_figures,
    interaction_cells,
    plot_interactions,
)


def _log() -> ExplanationLog:
    """Rows 10..80: (x0, x1) explained throughout at 1, 2, ..., (x1, x2) only from row 50;
    a known drift at 45, an alarm at 55."""
    history = History()
    for k, step in enumerate(range(10, 90, 10)):
        values = {"interactions/(x0, x1)": float(k + 1), "isage/x0": 0.5}
        if step >= 50:
            values["interactions/(x1, x2)"] = -float(k)
        history.log_scalars(step, values)
    return ExplanationLog(history, ("isage", "interactions"), (45,), {"adwin": (55,)})


def test_cells_hold_each_pairs_last_value_per_span():
    pairs, edges, cells = interaction_cells(_log(), "interactions", bins=4)
    assert pairs == ["(x0, x1)", "(x1, x2)"]
    assert edges.tolist() == [10.0, 27.5, 45.0, 62.5, 80.0]
    # spans [10, 27.5): 10, 20; [27.5, 45): 30, 40; [45, 62.5): 50, 60; [62.5, 80]: 70, 80
    assert cells[0].tolist() == [2.0, 4.0, 6.0, 8.0]
    assert math.isnan(cells[1, 0]) and math.isnan(cells[1, 1])
    assert cells[1, 2:].tolist() == [-5.0, -7.0]
    _, edges, cells = interaction_cells(_log(), "interactions", bins=200)
    assert len(edges) == 9 and cells.shape == (2, 8)  # never more spans than logged steps


def test_heat_map_marks_the_drifts_and_alarms():
    fig = plot_interactions(_log())
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert list(lines["known drift"].get_xdata()) == [45, 45]
    assert list(lines["alarm adwin"].get_xdata()) == [55, 55]
    mesh = ax.collections[0]
    data = np.ma.getdata(mesh.get_array()).reshape(2, -1)
    assert data[0].tolist() == [float(k) for k in range(1, 9)]
    assert mesh.get_array().mask.reshape(2, -1)[1].tolist() == [True] * 4 + [False] * 4
    assert mesh.norm.vmin == -8.0 and mesh.norm.vmax == 8.0  # centred at 0
    assert [t.get_text() for t in ax.get_yticklabels()] == ["(x0, x1)", "(x1, x2)"]
    assert set(explanation_figures(_log())) == {FIGURE_TAG, INTERACTIONS_TAG}
    without = ExplanationLog(_log().history, ("isage",), (), {})
    assert set(explanation_figures(without)) == {FIGURE_TAG}
    with pytest.raises(ValueError, match="no series of 'missing'"):
        plot_interactions(without, "missing")
