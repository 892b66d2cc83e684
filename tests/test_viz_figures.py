"""The drawing of plug-in figures by the viz layer, and the runner's drawing strategy."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

from torchstream.drift import ERICS, PDPDriftDetector
from torchstream.evaluate.runner import Evaluator
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.models.distributional import ProbitHead
from torchstream.select import FIRES, FIRESSelector
from torchstream.streams import from_numpy
from torchstream.viz.figures import plugin_figures

F64 = torch.float64


def test_pdp_detector_draws_its_explainer():
    X = torch.rand(400, 2, generator=torch.Generator().manual_seed(0), dtype=F64)
    ipdp = IncrementalPDP(lambda Z: 2 * Z[:, 0] + Z[:, 1], 0, alpha=0.05, n_ice=5,
                          history_every=100, feature_names=["a", "b"])
    detector = PDPDriftDetector(ipdp)
    for start in range(0, 400, 20):
        detector.explain(X[start:start + 20])
    figs = plugin_figures(detector)
    assert list(figs) == ["ipdp/a"] == list(plugin_figures(ipdp))
    (ax,) = figs["ipdp/a"].axes
    # the PD, the 5 kept ICE curves and one line per history snapshot
    assert len(ax.lines) == 1 + 5 + len(ipdp.history) and len(ipdp.history) >= 3
    assert ax.lines[-1].get_ydata().tolist() == ipdp.pd.tolist()


def test_nothing_is_drawn_before_learning():
    assert plugin_figures(ERICS()) == {}
    assert plugin_figures(FIRESSelector(FIRES(ProbitHead(3), n_selected=1))) == {}


def test_other_plugins_use_their_own_hook():
    fig = Figure()

    class Own:
        def figures(self) -> dict[str, Figure]:
            return {"own/fig": fig}

    assert plugin_figures(Own()) == {"own/fig": fig}
    assert plugin_figures(object()) == {}


class _Foreign:
    """A plug-in that is not a PluginBase (the runner wraps it)."""

    name = "foreign"

    def on_batch(self, batch: object) -> None:
        return None


class _Figures:
    """A sink that keeps the (tag, step) of every figure it receives."""

    def __init__(self) -> None:
        self.received: list[tuple[str, int]] = []

    def log_config(self, config: object) -> None:
        pass

    def log_scalars(self, step: int, scalars: object) -> None:
        pass

    def log_figure(self, tag: str, figure: Figure, step: int) -> None:
        self.received.append((tag, step))

    def close(self) -> None:
        pass


def test_runner_draws_with_the_given_strategy():
    X = torch.rand(24, 2, generator=torch.Generator().manual_seed(1))
    y = (X[:, 0] > 0.5).long()
    plugin, sink = _Foreign(), _Figures()
    seen: list[object] = []

    def draw(p: object) -> dict[str, Figure]:
        seen.append(p)
        return {"drawn/fig": plt.figure()}

    class Half:
        def __call__(self, X: torch.Tensor) -> torch.Tensor:
            return torch.full((X.shape[0], 2), 0.5)

        def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
            pass

    stream = from_numpy(X.numpy(), y.numpy(), task="classification")
    ev = Evaluator(Half(), stream, batch_size=4, plugins=[plugin], sinks=[sink],
                   figure_every=8, figures=draw)
    ev.run()
    assert seen == [plugin] * 3  # the plug-in as given, not its wrapper; every 8 rows
    assert sink.received == [("drawn/fig", 8), ("drawn/fig", 16), ("drawn/fig", 24)]  # rows seen
    assert plt.get_fignums() == []  # the runner closed them
    with pytest.raises(TypeError, match="figures must be a function"):
        Evaluator(Half(), stream, figures="plugin_figures")  # type: ignore[arg-type]
