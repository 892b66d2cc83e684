"""DriftReporter with interaction explainers: the pairs that gained or lost interaction at an
alarm, by the features' interval rule.

Hand-computed case: a stub whose pair values the test sets row by row (alpha = 1, windows of 4
rows, so ``n_eff`` = 2 spans per window). Stream case: a concept that moves from
``y = x0 x1 + x2`` to ``y = x0 + x1 x2`` at row N = 2,000 (x ~ N(0, I_3), 4,000 rows, batches
of 20), learned by an online MLP (32-32, Adam, lr 0.01) and explained by
IncrementalInteraction (squared loss, one imputation: the single-draw game, every SII doubled,
so the pair that interacts is at ~2) with alpha = 0.005; the report's window is 1,000 rows,
the after window starting one window after N (the MLP's error is back at its level before N
~1,200-1,800 rows after N). On seeds 0-7 the report said (x0, x1) lost, (x1, x2) gained,
(x0, x2) unchanged every time; the narrowest gap (seed 0, (x0, x1): 1.40 ± 0.70 before,
0.08 ± 0.43 after) cleared the intervals by 0.19.
"""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import numpy as np
import pytest
import torch

from _report_steps import step
from torchstream import OnlineRegressor, Prequential
from torchstream.report.format import from_json
from torchstream.step import Batch
from torchstream.report.reporter import DriftReporter
from torchstream.explain import IncrementalInteraction
from torchstream.models import MLP
from torchstream.streams import from_numpy

N, T, WINDOW = 2000, 4000, 1000


# ------------------------------------------------------------------------ hand-computed case
class _Importance:
    def __init__(self) -> None:
        self.feature_names = ["a", "b", "c", "d"]
        self.alpha = 1.0
        self.name = "stub"
        self.importance = torch.zeros(4)


class _Pairs:
    """An interaction explainer whose pair matrix the test sets before each batch."""

    def __init__(self) -> None:
        self.feature_names = ["a", "b", "c", "d"]
        self.alpha = 1.0
        self.name = "pairs"
        self.interaction = torch.full((4, 4), math.nan, dtype=torch.float64)

    def set(self, values: dict[tuple[int, int], float]) -> None:
        self.interaction = torch.full((4, 4), math.nan, dtype=torch.float64)
        for (i, j), v in values.items():
            self.interaction[i, j] = self.interaction[j, i] = v


def _hand_run(rows: int = 8) -> tuple[DriftReporter, _Pairs]:
    """Alarm (known) at row 4. (a, b): 1, 2, 3, 4 then 10; (a, c): -1 then -5 (a redundancy
    that grows); (a, d): 3 then 0; (b, c): not explained before row 4, then 0.5; the other
    pairs 0."""
    pairs = _Pairs()
    rep = DriftReporter([_Importance()], window=4, settle=0, at=[4],
                        interactions=[pairs])
    for row in range(rows):
        after = row >= 4
        values = {(0, 1): 10.0 if after else float(row + 1), (0, 2): -5.0 if after else -1.0,
                  (0, 3): 0.0 if after else 3.0, (1, 3): 0.0, (2, 3): 0.0}
        if after:
            values[(1, 2)] = 0.5
        pairs.set(values)
        X = torch.tensor([[float(row % 2), 1.0, 0.0, 0.0]])
        step(rep, Batch(row, row, X, torch.zeros(1), torch.zeros(1), None))
    return rep, pairs


def test_hand_computed_pairs_follow_the_interval_rule():
    rep, _ = _hand_run()
    (r,) = rep.reports
    by_pair = {tuple(p["features"]): p for p in r["interactions"]}
    assert len(by_pair) == 6 and {p["explainer"] for p in r["interactions"]} == {"pairs"}
    z = NormalDist().inv_cdf(1 - 0.05 / 12)  # Bonferroni over 6 pairs, two-sided
    ab = by_pair[("a", "b")]
    assert ab["value_before"] == pytest.approx(2.5)
    assert ab["bound_before"] == pytest.approx(z * float(np.std([1, 2, 3, 4], ddof=1))
                                               / math.sqrt(2))  # n_eff = 4 rows * 1 / 2
    assert (ab["value_after"], ab["bound_after"], ab["verdict"]) == (10.0, 0.0, "gained")
    assert ab["evidence"] == pytest.approx(7.5 / ab["bound_before"])
    assert by_pair[("a", "c")]["verdict"] == "gained"  # |SII| grew: more redundancy
    assert by_pair[("a", "d")]["verdict"] == "lost"
    bc = by_pair[("b", "c")]
    assert bc["verdict"] == "not compared" and math.isnan(bc["value_before"])
    assert bc["value_after"] == 0.5
    assert {by_pair[p]["verdict"] for p in (("b", "d"), ("c", "d"))} == {"unchanged"}
    # changed first (by evidence: the two zero-width pairs, then (a, b)), not compared last
    assert [tuple(p["features"]) for p in r["interactions"]][:3] == [
        ("a", "c"), ("a", "d"), ("a", "b")]
    assert r["interactions"][-1]["verdict"] == "not compared"
    assert ("interaction more between `a` and `c` (pairs), less between `a` and `d` (pairs), "
            "more between `a` and `b` (pairs)") in r["summary"]
    md = rep.to_markdown()
    assert "| pairs | a × b | gained | 2.5 ± " in md and "| 10 ± 0 |" in md
    assert md.count("| pairs |") == 6


def test_state_and_settings_with_interactions():
    whole, _ = _hand_run()
    first, pairs = _hand_run(rows=6)
    assert first.reports == []
    state = first.state_dict()
    resumed = DriftReporter([_Importance()], window=4, settle=0, at=[4],
                            interactions=[pairs])
    resumed.load_state_dict(state)
    for row in range(6, 8):
        pairs.set({(0, 1): 10.0, (0, 2): -5.0, (0, 3): 0.0, (1, 2): 0.5, (1, 3): 0.0,
                   (2, 3): 0.0})
        X = torch.tensor([[float(row % 2), 1.0, 0.0, 0.0]])
        step(resumed, Batch(row, row, X, torch.zeros(1), torch.zeros(1), None))
    strip = lambda rs: json.loads(json.dumps([{k: v for k, v in r.items() if k != "build_ms"}
                                              for r in rs]))
    assert strip(resumed.reports) == strip(whole.reports)
    with pytest.raises(ValueError, match="interactions"):  # a reporter without the pairs
        DriftReporter([_Importance()], window=4, settle=0, at=[4]).load_state_dict(
            state)


def test_default_window_counts_the_interaction_explainers():
    pairs = _Pairs()
    pairs.alpha = 0.01
    importance = _Importance()
    importance.alpha = 0.02
    assert DriftReporter([importance], interactions=[pairs]).window == 200


# ------------------------------------------------------------------------ a concept change
@pytest.fixture(scope="module")
def moved() -> DriftReporter:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(T, 3))
    y = X[:, 0] * X[:, 1] + X[:, 2]
    y[N:] = X[N:, 0] + X[N:, 1] * X[N:, 2]
    stream = from_numpy(X, y, task="regression")
    learner = OnlineRegressor(lambda d, k: MLP(d, k, hidden=(32, 32)), lr=0.01, seed=0)
    inter = IncrementalInteraction(None, "mse", 3, alpha=0.005, feature_names=stream.schema,
                                   seed=0)
    reporter = DriftReporter([inter], window=WINDOW, at=[N], interactions=[inter])
    Prequential(learner, stream, batch_size=20, plugins=[inter, reporter]).run()
    return reporter


def test_the_interaction_moves_from_x0_x1_to_x1_x2(moved):
    (r,) = moved.reports
    assert (r["row"], r["rows_before"], r["rows_after"]) == (N, WINDOW, WINDOW)
    verdicts = {tuple(p["features"]): p["verdict"] for p in r["interactions"]}
    assert verdicts == {("x0", "x1"): "lost", ("x1", "x2"): "gained",
                        ("x0", "x2"): "unchanged"}
    by_pair = {tuple(p["features"]): p for p in r["interactions"]}
    # the single-draw game doubles SII: ~2 for the product pair, ~0 for the others
    assert by_pair[("x0", "x1")]["value_before"] > 1.0 > by_pair[("x0", "x1")]["value_after"]
    assert by_pair[("x1", "x2")]["value_after"] > 1.0 > by_pair[("x1", "x2")]["value_before"]
    assert "interaction" in r["summary"]
    assert "more between `x1` and `x2` (interactions)" in r["summary"]
    assert "less between `x0` and `x1` (interactions)" in r["summary"]
    md = moved.to_markdown()
    assert "| interactions | x1 × x2 | gained |" in md
    assert "| interactions | x0 × x1 | lost |" in md
    (back,) = from_json(moved.to_json())
    assert [p["verdict"] for p in back["interactions"]] == [
        p["verdict"] for p in r["interactions"]]
