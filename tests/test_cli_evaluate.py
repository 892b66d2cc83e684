"""What ``torchstream run`` and ``torchstream evaluate`` report: the iPDP recognised by its type,
the summary as :func:`~torchstream.sinks.summary_table.markdown_table`, and every detector's
alarms on the metric plot."""

from __future__ import annotations

import math

import pandas as pd
import torch

from torchstream.cli import evaluate as evaluate_module
from torchstream.cli import main
from torchstream.cli.run import _importance_line, _values
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.sinks.summary_table import markdown_table
from torchstream.viz.evaluation import SMOOTH_STEPS


def _rows(n: int = 400) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.rand(n, 2, generator=g, dtype=torch.float64) * 2 - 1


def test_ipdp_reports_its_score_and_other_explainers_their_importances():
    X = _rows()
    pdp = IncrementalPDP(lambda Z: 3 * Z[:, 0] + Z[:, 1], 0, grid_size=5, alpha=0.05,
                         feature_names=["x0", "x1"])
    for start in range(0, len(X), 20):
        pdp.explain(X[start:start + 20])
    assert math.isfinite(pdp.score) and pdp.score > 0
    assert _values(pdp) == {"importance": pdp.score}
    assert _importance_line(pdp) == f"{pdp.name}: importance {pdp.score:.4f}"

    ipfi = IncrementalPFI(lambda Z: Z[:, 0], "mse", 2, alpha=0.05, feature_names=["a", "b"],
                          seed=0)
    y = X[:, 0]
    for start in range(0, len(X), 20):
        ipfi.explain(X[start:start + 20], y[start:start + 20])
    values = _values(ipfi)
    assert values == ipfi.as_dict() and values["a"] > 0.1 and abs(values["b"]) < 1e-12
    assert _importance_line(ipfi).startswith(f"{ipfi.name}: a={values['a']:.4f}, ")


def test_evaluate_marks_every_detector_and_writes_the_markdown_summary(tmp_path, monkeypatch):
    calls = []
    draw = evaluate_module.plot_metric_over_time

    def recording(*args, **kwargs):
        calls.append(kwargs)
        return draw(*args, **kwargs)

    monkeypatch.setattr(evaluate_module, "plot_metric_over_time", recording)
    out = tmp_path / "ev"
    assert main(["evaluate", "--stream", "sea-drift", "--n-samples", "1500",
                 "--models", "naive_bayes,hoeffding_tree", "--detectors", "ddm,adwin,kswin",
                 "--out", str(out)]) == 0
    (kwargs,) = calls
    assert kwargs["smooth"] == SMOOTH_STEPS
    assert kwargs["known_drifts"] == [750]
    detections = pd.read_csv(out / "detections.csv")
    expected = {f"drift_{d}": detections.loc[detections["detector"] == f"drift_{d}",
                                             "position"].tolist()
                for d in ("ddm", "adwin", "kswin")}
    assert sum(map(len, expected.values())) > 0
    assert kwargs["detected_drifts"] == expected
    summary = pd.read_csv(out / "summary.csv", index_col=0)
    assert (out / "summary.md").read_text() == markdown_table(summary)
