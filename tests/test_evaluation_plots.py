"""Evaluation plots: spider-chart radii (C20) and what each figure draws."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchstream.viz.evaluation import (
    plot_detections,
    plot_feature_weights,
    plot_metric_over_time,
    plot_selected_features,
    plot_selection_frequency,
    plot_spider,
    selection_frequency,
    spider_radii,
)

PNG = b"\x89PNG"


def test_spider_inversion_c20() -> None:
    # measure 0: F1 (higher better); measure 1: test time (lower better)
    values = [[0.8, 0.02], [0.6, 0.05], [0.7, 0.03]]
    r = spider_radii(values, invert=[False, True], scale="minmax")
    # the model with the smallest time is farthest out on the inverted axis
    assert int(np.argmax(r[:, 1])) == 0 and int(np.argmin(r[:, 1])) == 1
    np.testing.assert_allclose(r[:, 1], [1.0, 0.0, 2 / 3])
    np.testing.assert_allclose(r[:, 0], [1.0, 0.0, 0.5])
    # not inverted, the larger time is farther out
    assert int(np.argmax(spider_radii(values, scale="minmax")[:, 1])) == 1


def test_spider_ranges() -> None:
    r = spider_radii([[0.5, 10.0], [1.0, 30.0]], ranges=[(0, 1), (0, 40)], invert=[False, True])
    np.testing.assert_allclose(r, [[0.5, 0.75], [1.0, 0.25]])
    assert spider_radii([[2.0], [2.0]]).tolist() == [[1.0], [1.0]]  # a tie: all at full radius
    with pytest.raises(ValueError, match=r"values\[1, 0\]"):
        spider_radii([[0.5], [1.5]], ranges=[(0, 1)])
    with pytest.raises(ValueError, match="ranges"):
        spider_radii([[0.5], [1.0]], ranges=[(1, 1)])
    with pytest.raises(ValueError, match="invert"):
        spider_radii([[0.5], [1.0]], invert=[True, False])
    with pytest.raises(ValueError, match="not finite"):
        spider_radii([[np.nan], [1.0]])


def test_plot_spider_draws_the_radii(tmp_path) -> None:
    values = [[0.8, 0.02], [0.6, 0.05]]
    fig = plot_spider(
        values,
        ["F1", "time"],
        ["a", "b"],
        ranges=[None, None],
        invert=[False, True],
        scale="minmax",
        path=tmp_path / "s.png",
    )
    lines = fig.axes[0].get_lines()
    np.testing.assert_allclose(lines[0].get_ydata()[:2], [1.0, 1.0])
    np.testing.assert_allclose(lines[1].get_ydata()[:2], [0.0, 0.0])
    assert (tmp_path / "s.png").read_bytes()[:4] == PNG
    with pytest.raises(ValueError, match="model_names"):
        plot_spider(values, ["F1", "time"], ["a"])


def test_metric_over_time_uses_observation_axis(tmp_path) -> None:
    f1 = np.linspace(0.5, 0.9, 20)
    fig = plot_metric_over_time(
        {"f1": f1},
        known_drifts=[150, (200, 240)],
        detected_drifts=[170],
        n_pretrain=100,
        batch_size=10,
        variances={"f1": np.full(20, 0.01)},
        path=tmp_path / "m.png",
    )
    ax = fig.axes[0]
    line = ax.get_lines()[0]
    np.testing.assert_array_equal(line.get_xdata(), 100 + 10 * np.arange(20))
    np.testing.assert_allclose(line.get_ydata(), f1)
    vlines = [ln.get_xdata()[0] for ln in ax.get_lines()[1:]]
    assert vlines == [150, 170]  # known (dashed) and detected (dotted)
    assert (tmp_path / "m.png").read_bytes()[:4] == PNG
    with pytest.raises(ValueError, match="variances"):
        plot_metric_over_time({"f1": f1}, variances={"acc": f1})


def test_detection_scatter(tmp_path) -> None:
    found = {"adwin": [110, 250], "ph": [120, 310, 420]}
    fig = plot_detections(found, known_drifts=[100, 300], n_total=500, path=tmp_path / "d.png")
    ax = fig.axes[0]
    offsets = [c.get_offsets() for c in ax.collections]
    np.testing.assert_array_equal(offsets[0], [[110, 0], [250, 0]])
    np.testing.assert_array_equal(offsets[1], [[120, 1], [310, 1], [420, 1]])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["adwin", "ph"]
    with pytest.raises(ValueError, match="ph"):
        plot_detections({"ph": [600]}, known_drifts=[100], n_total=500)


def test_feature_selection_plots(tmp_path) -> None:
    sels = [[0, 1], [0, 2], [0, 1], [3, 1]]
    np.testing.assert_allclose(selection_frequency(sels, 5), [0.75, 0.75, 0.25, 0.25, 0.0])
    fig = plot_selected_features(sels, 5, path=tmp_path / "sc.png")
    pts = fig.axes[0].collections[0].get_offsets()
    assert sorted(map(tuple, pts.tolist())) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 2),
        (2, 0),
        (2, 1),
        (3, 1),
        (3, 3),
    ]
    fig = plot_selection_frequency(
        {"fires": sels, "ofs": [[4, 2]] * 4},
        5,
        top_n=3,
        feature_names=list("abcde"),
        path=tmp_path / "b.png",
    )
    ax = fig.axes[0]
    # mean frequency over both models: a .375, b .375, c .625, d .125, e .5 -> top 3: c, e, a
    assert [t.get_text() for t in ax.get_xticklabels()] == ["c", "e", "a"]
    heights = [p.get_height() for p in ax.patches]
    np.testing.assert_allclose(heights, [0.25, 0.0, 0.75, 1.0, 1.0, 0.0])
    for name in ("sc.png", "b.png"):
        assert (tmp_path / name).read_bytes()[:4] == PNG
    with pytest.raises(ValueError, match="feature_names"):
        plot_selection_frequency({"a": sels}, 5, feature_names=["x"])
    with pytest.raises(ValueError, match="top_n"):
        plot_selection_frequency({"a": sels}, 5, top_n=0)


def test_feature_weight_box(tmp_path) -> None:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(30, 4, generator=g) * torch.tensor([0.1, 3.0, 1.0, 0.01])
    fig = plot_feature_weights({"fires": w, "ofs": w.numpy() * 2}, top_n=2, path=tmp_path / "w.png")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2"]
    assert (tmp_path / "w.png").read_bytes()[:4] == PNG
    with pytest.raises(ValueError, match="different feature counts"):
        plot_feature_weights({"a": np.zeros((3, 4)), "b": np.zeros((3, 5))})
    with pytest.raises(ValueError, match=r"\[T, m\]"):
        plot_feature_weights({"a": np.zeros(3)})
