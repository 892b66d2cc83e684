"""Evaluation figures show something: holdout lines, smoothing, every detector, a spider chart
without collapsed predictors, and integer counts in summary.md."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from matplotlib.image import imread

from torchstream.cli import main
from torchstream.viz.evaluation import (
    SMOOTH_STEPS,
    detector_colors,
    plot_metric_over_time,
    plot_spider,
    smooth_steps,
    spider_radii,
    spider_ranges,
)
from torchstream.sinks.summary_table import is_count_column, markdown_table

NAN = np.nan


def _holdout_series(values: list[float], interval: int, n_steps: int) -> np.ndarray:
    out = np.full(n_steps, NAN)
    out[::interval] = values
    return out


def test_holdout_series_draws_a_line_through_the_tested_steps() -> None:
    # tested every 5th step of 20, NaN in between (as a periodic holdout records them)
    a = _holdout_series([0.6, 0.7, 0.8, 0.9], 5, 20)
    b = _holdout_series([0.5, 0.5, 0.6, 0.4], 5, 20)
    fig = plot_metric_over_time({"a": a, "b": b}, n_pretrain=100, batch_size=10)
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["a", "b"]
    for line, want in zip(lines, ([0.6, 0.7, 0.8, 0.9], [0.5, 0.5, 0.6, 0.4])):
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        assert np.isfinite(y).all() and np.isfinite(x).all()
        np.testing.assert_array_equal(x, [100, 150, 200, 250])  # steps 0, 5, 10, 15
        np.testing.assert_allclose(y, want)
    lo, hi = ax.get_xlim()
    assert lo <= 100 and hi >= 250
    lo, hi = ax.get_ylim()
    assert np.isfinite([lo, hi]).all() and lo <= 0.4 and hi >= 0.9
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]


def test_single_tested_step_is_a_visible_marker() -> None:
    fig = plot_metric_over_time({"a": [NAN, 0.5, NAN]})
    line = fig.axes[0].get_lines()[0]
    assert list(line.get_ydata()) == [0.5] and line.get_marker() == "."


def test_smooth_steps_hand_computed() -> None:
    v = np.array([1.0, 3.0, 5.0, 7.0, 9.0])
    # trailing mean of the last 3 steps, fewer at the start
    np.testing.assert_allclose(smooth_steps(v, 3), [1.0, 2.0, 3.0, 5.0, 7.0])
    np.testing.assert_allclose(
        smooth_steps(v, 3), pd.Series(v).rolling(3, min_periods=1).mean().to_numpy()
    )
    # gaps: only finite values of the window count, untested steps stay NaN
    g = np.array([1.0, NAN, 4.0, NAN, NAN, 10.0])
    out = smooth_steps(g, 3)
    np.testing.assert_allclose(out[[0, 2, 5]], [1.0, 2.5, 10.0])
    assert np.isnan(out[[1, 3, 4]]).all()
    np.testing.assert_array_equal(smooth_steps(v, 1), v)
    with pytest.raises(ValueError, match="window"):
        smooth_steps(v, 0)


def test_metric_plot_smooths_and_says_so() -> None:
    rng = np.random.default_rng(0)
    noisy = 0.8 + 0.1 * rng.standard_normal(40)
    fig = plot_metric_over_time({"mlp": noisy}, smooth=SMOOTH_STEPS, y_label="accuracy per step")
    ax = fig.axes[0]
    y = np.asarray(ax.get_lines()[0].get_ydata())
    want = pd.Series(noisy).rolling(SMOOTH_STEPS, min_periods=1).mean().to_numpy()
    np.testing.assert_allclose(y, want)
    assert np.std(np.diff(y)) < np.std(np.diff(noisy)) / 3  # the batch noise is damped
    assert ax.get_ylabel() == f"accuracy per step (mean of last {SMOOTH_STEPS} steps)"


def test_every_detector_gets_its_lines_colour_and_legend_entry() -> None:
    found = {"drift_ddm": [300, 700], "drift_adwin": [450], "drift_kswin": []}
    fig = plot_metric_over_time(
        {"mlp": np.linspace(0.5, 0.9, 100)},
        known_drifts=[400],
        detected_drifts=found,
        batch_size=10,
    )
    ax = fig.axes[0]
    colors = detector_colors(3)
    assert len({c for c in colors}) == 3 and to_rgba("red") not in colors
    vlines = [ln for ln in ax.get_lines()[1:] if ln.get_linestyle() == ":"]
    by_color: dict[tuple[float, ...], list[float]] = {}
    for ln in vlines:
        by_color.setdefault(to_rgba(ln.get_color()), []).append(float(ln.get_xdata()[0]))
    assert by_color == {to_rgba(colors[0]): [300.0, 700.0], to_rgba(colors[1]): [450.0]}
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [
        "mlp",
        "known drift",
        "drift_ddm (2 detections)",
        "drift_adwin (1 detection)",
        "drift_kswin (0 detections)",
    ]
    handles = ax.get_legend().legend_handles
    assert [to_rgba(h.get_color()) for h in handles[2:]] == [to_rgba(c) for c in colors]


def test_spider_axes_have_fixed_bounds() -> None:
    assert spider_ranges(["accuracy", "F1", "accuracy_window", "log_loss", "test time"]) == [
        (0.0, 1.0),
        (0.0, 1.0),
        (0.0, 1.0),
        None,
        None,
    ]
    # three predictors, "c" worst on every measure: accuracy, f1, log loss (lower is better)
    values = np.array([[0.9, 0.85, 0.2], [0.8, 0.75, 0.4], [0.6, 0.5, 0.8]])
    names = ["accuracy", "f1", "log_loss"]
    invert = [False, False, True]
    fig = plot_spider(values, names, ["a", "b", "c"], invert=invert)
    ax = fig.axes[0]
    radii = np.array([np.asarray(ln.get_ydata())[:3] for ln in ax.get_lines()])
    # accuracy and F1 on [0, 1]: the radius is the value; log loss: best / value
    np.testing.assert_allclose(radii[:, :2], values[:, :2])
    np.testing.assert_allclose(radii[:, 2], [1.0, 0.5, 0.25])
    assert (radii > 0).all()  # nobody collapses to the centre, the worst included
    # the polygon of the worst predictor has a positive area (shoelace on the polar points)
    theta = np.linspace(0, 2 * np.pi, 3, endpoint=False)
    px, py = radii[2] * np.cos(theta), radii[2] * np.sin(theta)
    area = 0.5 * abs(np.dot(px, np.roll(py, -1)) - np.dot(py, np.roll(px, -1)))
    assert area > 0.1
    assert ax.get_ylim() == (0.0, 1.0)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["accuracy", "f1", "log_loss\n(best ÷ value)"]
    # min-max over the predictors (the former default) would put "c" at the centre
    assert (spider_radii(values, invert=invert, scale="minmax")[2] == 0).all()


def test_spider_ratio_scale_checks_its_values() -> None:
    np.testing.assert_allclose(spider_radii([[2.0], [4.0]]), [[0.5], [1.0]])  # value / best
    np.testing.assert_allclose(spider_radii([[2.0], [4.0]], invert=[True]), [[1.0], [0.5]])
    # a best value of 0: lower is better, so the other model is infinitely worse; all-0 ties
    np.testing.assert_allclose(spider_radii([[0.0], [2.0]], invert=[True]), [[1.0], [0.0]])
    np.testing.assert_allclose(spider_radii([[0.0], [0.0]]), [[1.0], [1.0]])
    with pytest.raises(ValueError, match=r"values\[1, 0\] = -1.0 is negative.*ranges\[0\]"):
        spider_radii([[2.0], [-1.0]])
    with pytest.raises(ValueError, match="scale"):
        spider_radii([[1.0]], scale="log")
    with pytest.raises(ValueError, match="measure_names"):
        plot_spider([[0.5, 0.5]], ["accuracy"], ["a"])


def _parse_markdown(text: str) -> pd.DataFrame:
    rows = [ln.strip("|").split("|") for ln in text.strip().splitlines()]
    head = [c.strip() for c in rows[0]]
    body = [[c.strip() for c in r] for r in rows[2:]]
    assert all(set(c) <= {"-"} for c in rows[1])
    return pd.DataFrame(body, columns=head).set_index(head[0])


def test_markdown_counts_are_integers() -> None:
    frame = pd.DataFrame(
        {
            "accuracy": [0.80504, 0.68, 1.0],
            "n_parameters": [770.0, 10.0, NAN],  # floats because of the NaN
            "n_detections": [3, 0, 12],
            "rows": [1200.0, 1200.0, 1200.0],
            "n_mean": [1.5, 2.0, 2.0],  # a count name, but not whole: keeps its decimals
        },
        index=["mlp", "probit", "hoeffding_tree"],
    )
    assert [is_count_column(frame[c]) for c in frame] == [False, True, True, True, False]
    md = _parse_markdown(markdown_table(frame))
    assert list(md.index) == ["mlp", "probit", "hoeffding_tree"]
    assert md.index.name == "predictor"
    assert md["n_parameters"].tolist() == ["770", "10", "nan"]
    assert md["n_detections"].tolist() == ["3", "0", "12"]
    assert md["rows"].tolist() == ["1200", "1200", "1200"]
    assert md["accuracy"].tolist() == ["0.8050", "0.6800", "1.0000"]
    assert md["n_mean"].tolist() == ["1.5000", "2.0000", "2.0000"]


def _pixels_near(img: np.ndarray, color: str, tol: float = 0.08) -> int:
    rgb = np.asarray(to_rgba(color)[:3])
    return int((np.abs(img[..., :3] - rgb).max(axis=-1) < tol).sum())


def test_evaluate_holdout_metric_png_has_lines(tmp_path) -> None:
    out = tmp_path / "ev"
    code = main(["evaluate", "--stream", "sea-drift", "--n-samples", "1200",
                 "--models", "probit,naive_bayes", "--strategy", "holdout",
                 "--test-interval", "5", "--out", str(out)])
    assert code == 0
    img = imread(out / "metric.png")
    # each predictor's line (C0, C1) covers far more pixels than its legend sample
    assert _pixels_near(img, "C0") > 300 and _pixels_near(img, "C1") > 300
    summary = pd.read_csv(out / "summary.csv", index_col=0)
    md = _parse_markdown(markdown_table(summary))
    assert list(md.index) == ["probit", "naive_bayes"]
    if "n_parameters" in md:
        assert all(re.fullmatch(r"\d+|nan", c) for c in md["n_parameters"])
    assert all(re.fullmatch(r"\d\.\d{4}", c) for c in md["accuracy"])
