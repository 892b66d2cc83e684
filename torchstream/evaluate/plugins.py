"""The plug-in contract of the prequential loop.

A plug-in has ``on_batch(batch) -> Mapping[str, float] | None``
(:class:`~torchstream.base.Plugin`). The runner calls it for every batch after the learner's
prediction and before it learns (test -> explain -> learn); what it returns is logged to the
sinks (a tag without ``"/"`` is prefixed with the plug-in's ``name``). The other hooks have
no-op defaults on :class:`~torchstream.base.PluginBase`:

* ``transform(X, step) -> Tensor``: replaces the batch's inputs before the learner sees them
  (for prediction and learning), e.g. feature selection that masks columns (default: ``X``);
* ``state_dict()`` / ``load_state_dict(state)``: saved in the run's checkpoints (default:
  ``{}``);
* ``figures() -> Mapping[str, matplotlib Figure]``: pictures of the plug-in's state, sent
  every ``figure_every`` steps to the sinks (default: ``{}``). The runner may be given a
  drawing strategy instead (``Evaluator(figures=...)``): the package's own plug-ins draw
  nothing, :func:`torchstream.viz.figures.plugin_figures` draws them (e.g. a PDP with its ICE
  curves) and falls back on this hook for other plug-ins;
* ``on_end()``: called once when the run reaches the end of its stream (default: nothing;
  the drift report builds its last reports there);
* ``drift_detected``: whether the last batch raised a drift alert (default: False).

What a step produced reaches the sinks as one :class:`~torchstream.step.StepRecord`: an
explainer's importance by feature (:meth:`~torchstream.base.ExplainerBase.step_importance`,
read at logged steps), a drift detector's new alarms (its ``new_alerts`` after ``update``), the
other plug-ins' returned scalars.

An object that only has ``on_batch`` (and some of the hooks) is wrapped once, when the runner
is built, by :func:`~torchstream.base.as_plugin`. Explainers, drift detectors and feature
selectors are plug-ins; each can equally be used on its own in a user's loop.
"""

from __future__ import annotations

from torchstream.base import Plugin

__all__ = ["Plugin", "plugin_name"]


def plugin_name(plugin: object, index: int) -> str:
    """The plug-in's ``name`` attribute, else its class name in snake case plus its index."""
    name = getattr(plugin, "name", None)
    if isinstance(name, str) and name:
        return name
    cls = type(plugin).__name__
    snake = "".join("_" + c.lower() if c.isupper() else c for c in cls).lstrip("_")
    return f"{snake}{index}" if index else snake
