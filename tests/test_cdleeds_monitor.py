"""The CDLEEDS runner plug-in: stored attributions are recomputed only where the model changed,
the saved share is counted, it runs in the Evaluator, resumes exactly and draws its views."""

from __future__ import annotations

import copy
import itertools

import matplotlib
import torch

from torchstream.drift.cdleeds import CDLEEDS, LocalChangeMonitor
from torchstream.step import Batch
from torchstream.evaluate.runner import Evaluator
from torchstream.explain.baselines import ConstantBaseline
from torchstream.explain.local import LocalAttributor
from torchstream.viz.local import plot_attributions, plot_neighbourhoods
from torchstream.streams import from_numpy
from torchstream.viz.figures import plugin_figures

matplotlib.use("Agg")
F64 = torch.float64
T0 = 600  # the number of rows learned after which the model changes near (0.2, 0.2)


class ShiftingModel:
    """A hand-coded classifier: a logistic model whose score rises by 1.5 near (0.2, 0.2)
    once it has learned ``T0`` rows (it never fits anything)."""

    task = "classification"

    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        score = 2.0 * (X[:, 0] - X[:, 1])
        if self.seen >= T0:
            near_a = ((X - 0.2) ** 2).sum(1) < 0.25**2  # blob A only, far from the baseline
            score = score + 1.5 * near_a.to(X.dtype)
        p = torch.sigmoid(score)
        return torch.stack([1 - p, p], 1)

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        self.seen += X.shape[0]

    def state_dict(self) -> dict:
        return {"seen": self.seen}

    def load_state_dict(self, state: dict) -> None:
        self.seen = state["seen"]


def stream_rows(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    C = torch.tensor([[0.2, 0.2], [0.8, 0.8]], dtype=F64)
    return C[torch.arange(n) % 2] + 0.05 * torch.randn(n, 2, generator=g, dtype=F64)


def make_monitor(model: ShiftingModel) -> LocalChangeMonitor:
    # a constant baseline between the blobs (spec check 11): an EWMA of these inputs starts in
    # a blob and wanders with them, which moves every difference (a genuine change of the
    # attribution sums, but not the one this test isolates)
    middle = [0.5, 0.5]
    explainer = LocalAttributor(
        model,
        "shapley_value_sampling",
        ConstantBaseline(middle),
        target=1,
        method_kwargs={"n_samples": 2},
    )
    return LocalChangeMonitor(
        CDLEEDS(), explainer, monitored=20, baseline=ConstantBaseline(middle), log_attributions=2
    )


def test_recomputes_only_in_the_changed_region():
    X = stream_rows(T0 + 500)
    model = ShiftingModel()
    mon = make_monitor(model)
    # the first batch holds one row of each blob: the EWMA baseline starts between them
    bounds = [0] + list(range(2, X.shape[0] + 1))
    b_steps = 0  # steps at which monitored rows of blob B were recomputed
    for step, (a, b) in enumerate(itertools.pairwise(bounds)):
        x = X[a:b]
        before = None if mon.computed_at is None else mon.computed_at.clone()
        out = mon.on_batch(Batch(step, a, x, torch.zeros(b - a), model(x), model))
        model.learn(x, None)
        if before is not None:
            b_steps += int(bool((mon.computed_at != before)[mon.monitored[:, 0] > 0.5].any()))
    n_steps = len(bounds) - 1
    assert out["cdleeds/attribution/1/x0"] == mon.attributions[1, 0].item()
    rows = mon.monitored
    in_a = rows[:, 0] < 0.5
    assert int(in_a.sum()) == 10
    start = 18  # the 20th row (step 18) completes the monitored set: attributions computed then
    # B: recomputed only at the leaf's false alarms; the leaf test rejects a true null with
    # probability alpha = 0.01 (runs of rejections: overlapping windows), so allow 2 alpha
    assert b_steps <= 2 * 0.01 * (n_steps - start)
    assert bool((mon.computed_at[in_a] > T0).all())  # A: recomputed after the change
    # the naive scheme recomputes all 20 at each of the later steps
    assert mon.n_possible == 20 * (n_steps - start - 1)
    assert mon.saved_share == 1 - mon.n_recomputed / mon.n_possible
    assert mon.saved_share > 0.8
    # recomputed attributions explain the new model: completeness against the EWMA baseline
    fresh = mon.explainer.attribute(rows[in_a])
    assert torch.allclose(mon.attributions[in_a].sum(1), fresh.attributions.sum(1), atol=0.02)
    assert bool(
        (mon.attributions[in_a].sum(1) - fresh.output + fresh.baseline_output).abs().max() < 0.02
    )


def test_in_the_evaluator_with_exact_resume(tmp_path):
    X = stream_rows(T0 + 400, seed=1)
    y = (X[:, 0] > X[:, 1]).long()

    def run(split: int | None):
        model = ShiftingModel()
        mon = make_monitor(model)
        ev = Evaluator(model, from_numpy(X, y), plugins=[mon], batch_size=4, record_steps=False)
        if split is None:
            ev.run()
            return mon
        ev.run(steps=split)
        path = ev.save(tmp_path / "ckpt.pt")
        model2 = ShiftingModel()
        mon2 = make_monitor(model2)
        ev2 = Evaluator(model2, from_numpy(X, y), plugins=[mon2], batch_size=4, record_steps=False)
        ev2.resume(path)
        ev2.run()
        return mon2

    whole, resumed = run(None), run(T0 // 4 - 20)  # stop 20 steps before the change
    assert torch.equal(whole.attributions, resumed.attributions)
    assert torch.equal(whole.computed_at, resumed.computed_at)
    assert whole.n_recomputed == resumed.n_recomputed > 0
    assert whole.detector.alerts == resumed.detector.alerts


def test_views(tmp_path):
    X = stream_rows(400)
    model = ShiftingModel()
    mon = make_monitor(model)
    for step in range(0, 400, 4):
        x = X[step : step + 4]
        mon.on_batch(Batch(step // 4, step, x, torch.zeros(4), model(x), model))
    figs = plugin_figures(mon)
    assert set(figs) == {"cdleeds/neighbourhoods", "cdleeds/attributions"}
    ax = figs["cdleeds/neighbourhoods"].axes[0]
    assert len(ax.patches) == mon.detector.n_leaves == 2  # one gamma-ball per leaf
    path = tmp_path / "tree.png"
    plot_neighbourhoods(mon.detector, path=path)
    plot_attributions(mon.attributions, feature_names=["a", "b"], path=tmp_path / "a.png")
    assert path.stat().st_size > 0 and (tmp_path / "a.png").stat().st_size > 0
    state = copy.deepcopy(mon.state_dict())
    other = make_monitor(ShiftingModel())
    other.load_state_dict(state)
    assert torch.equal(other.attributions, mon.attributions)
