"""The figures a plug-in sends to the sinks during a run, drawn here from the plug-in's public
state (the algorithms draw nothing). :func:`plugin_figures` is the drawing strategy the runner
is given (``Evaluator(figures=plugin_figures)``)."""

from __future__ import annotations

from collections.abc import Mapping

from matplotlib.figure import Figure

from torchstream.drift.cdleeds.monitor import LocalChangeMonitor
from torchstream.drift.erics import ERICS
from torchstream.drift.pdp import PDPDriftDetector
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.select.plugin import FIRESSelector
from torchstream.viz.local import plot_attributions, plot_neighbourhoods
from torchstream.viz.pdp import plot_ipdp
from torchstream.viz.selection import plot_erics, plot_fires_weights, plot_selection_heatmap

__all__ = ["plugin_figures"]


def _erics(erics: ERICS) -> dict[str, Figure]:
    return {} if erics.n_updates == 0 else {"erics/ma": plot_erics(erics)}


def _fires(selector: FIRESSelector) -> dict[str, Figure]:
    if selector.fires.n_updates == 0:
        return {}
    history = selector.fires.history
    return {"fires/weights": plot_fires_weights(history),
            "fires/selection": plot_selection_heatmap(history)}


def _monitor(monitor: LocalChangeMonitor) -> dict[str, Figure]:
    figs: dict[str, Figure] = {}
    if monitor.detector.tree is not None:
        figs[f"{monitor.name}/neighbourhoods"] = plot_neighbourhoods(monitor.detector)
    if monitor.attributions is not None:
        figs[f"{monitor.name}/attributions"] = plot_attributions(
            monitor.attributions, feature_names=monitor.feature_names)
    return figs


def _ipdp(ipdp: IncrementalPDP) -> dict[str, Figure]:
    figure = plot_ipdp(ipdp).figure
    assert isinstance(figure, Figure)
    return {ipdp.name: figure}


def plugin_figures(plugin: object) -> Mapping[str, Figure]:
    """``{tag: figure}`` of a plug-in's current state:

    * :class:`~torchstream.drift.ERICS`: ``erics/ma``, the MA / D / threshold traces with the
      alerts;
    * :class:`~torchstream.select.FIRESSelector`: ``fires/weights`` and ``fires/selection``
      (the weights over time, the selection heat map);
    * :class:`~torchstream.drift.cdleeds.LocalChangeMonitor`: ``<name>/neighbourhoods`` and
      ``<name>/attributions``;
    * :class:`~torchstream.explain.ipdp.IncrementalPDP`: ``ipdp/<feature>``, the PD with its
      ICE curves; a :class:`~torchstream.drift.pdp.PDPDriftDetector`: its explainer's;
    * anything else: its own ``figures()`` when it has one (a user's plug-in), else none.

    Nothing is drawn before a plug-in has learnt anything (empty mapping).

    >>> plugin_figures(object())
    {}
    >>> class Own:
    ...     def figures(self) -> dict[str, Figure]:
    ...         return {"own": Figure()}
    >>> list(plugin_figures(Own()))
    ['own']
    """
    if isinstance(plugin, ERICS):
        return _erics(plugin)
    if isinstance(plugin, FIRESSelector):
        return _fires(plugin)
    if isinstance(plugin, LocalChangeMonitor):
        return _monitor(plugin)
    if isinstance(plugin, IncrementalPDP):
        return _ipdp(plugin)
    if isinstance(plugin, PDPDriftDetector):
        return _ipdp(plugin.explainer)
    own = getattr(plugin, "figures", None)
    return dict(own()) if callable(own) else {}
