"""One contract per role: learner, explainer, drift detector, feature selector, sink, plug-in.

Every role is a :class:`typing.Protocol` (runtime checkable, so ``isinstance`` tells whether
an object fits) with a base class beside it that supplies the shared parts:

* :class:`Base` stores the constructor's arguments verbatim (:meth:`Base._get_params`), makes
  an unfitted copy with the same arguments (:meth:`Base.clone`) and checks a state's settings
  on loading (:meth:`Base._check_settings`, with :func:`~torchstream.checkpoint.check_settings`);
* :class:`PluginBase` gives every optional hook of the runner a no-op default, so the runner
  calls hooks without asking whether they exist; :func:`as_plugin` / :func:`as_sink` wrap a
  foreign object once, at construction, into that shape.

One convention per verb:

=================  =====================================================================
role               verbs
=================  =====================================================================
Learner            ``__call__(X) -> Tensor``; ``learn(X, y) -> None`` (a loss, if any, in
                   ``last_loss``)
Explainer          ``explain(X, y) -> None``; ``importance``: a property, a tensor ``[d]``
DriftDetector      ``update(batch) -> None``; ``drift_detected: bool``; ``new_alerts`` (the
                   last update's) and ``alerts`` (all): stream rows; ``new_partial_alerts``
                   (features), ``new_regions`` (centres of changed regions)
FeatureSelector    ``learn(X, y) -> None``; ``weights`` ``[d]`` and ``mask`` ``[d]`` (bool)
Sink               ``log_config``, ``log_scalars``, ``close`` (+ ``log_step(record)``,
                   ``log_figure``, ``flush``)
Plugin             ``on_batch(batch) -> Mapping[str, float] | None`` (+ ``transform``,
                   ``on_record``, ``figures``, ``on_end``, ``state_dict`` /
                   ``load_state_dict``)
=================  =====================================================================

A drift detector's ``alerts`` are row indices: the last row of the update that raised the
alert, counted from the first row the detector saw (or, as a plug-in, the row's index in the
stream, ``Batch.start`` based). A detector fed batches of 10 rows that alarms at its third
batch reports a row in ``20..29``.

A minimal learner (predicts the running mean):

>>> import torch
>>> class Mean(LearnerBase):
...     def __init__(self, prior: float = 0.0) -> None:
...         self.prior, self.total, self.n = prior, 0.0, 0
...     def __call__(self, X: torch.Tensor) -> torch.Tensor:
...         value = self.total / self.n if self.n else self.prior
...         return torch.full((X.shape[0],), value)
...     def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
...         self.total += float(y.sum()); self.n += len(y)
...         self.last_loss = float(((self(X) - y) ** 2).mean())
...     def state_dict(self) -> dict[str, object]:
...         return {"settings": self._settings(), "total": self.total, "n": self.n}
...     def load_state_dict(self, state: Mapping[str, object]) -> None:
...         self._check_settings(state)
...         self.total, self.n = state["total"], state["n"]
>>> m = Mean(prior=1.0)
>>> m.learn(torch.zeros(2, 1), torch.tensor([2.0, 4.0])) is None, m(torch.zeros(1, 1)).tolist()
(True, [3.0])
>>> isinstance(m, Learner), m._get_params(), m.clone().n
(True, {'prior': 1.0}, 0)
>>> other = Mean(prior=1.0); other.load_state_dict(m.state_dict()); other.n
2
>>> Mean(prior=2.0).load_state_dict(m.state_dict())
Traceback (most recent call last):
...
ValueError: state has prior=1.0, this Mean has prior=2.0
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import torch
from typing_extensions import Self

from torchstream.checkpoint import check_settings
from torchstream.step import StepRecord
from torchstream.typing import BatchView

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "Base",
    "DriftDetector",
    "DriftDetectorBase",
    "Explainer",
    "ExplainerBase",
    "FeatureSelector",
    "FeatureSelectorBase",
    "Learner",
    "LearnerAdapter",
    "LearnerBase",
    "Plugin",
    "PluginAdapter",
    "PluginBase",
    "Sink",
    "SinkAdapter",
    "SinkBase",
    "as_learner",
    "as_plugin",
    "as_sink",
    "new_classes",
]

B = TypeVar("B", bound="Base")

#: Setting values :meth:`Base._settings` keeps (what a state can store and compare).
_PLAIN = (bool, int, float, str, type(None))


def _plain(value: object) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return isinstance(value, _PLAIN)


def _fresh(value: object) -> object:
    """A copy of a constructor argument for a new object: contracts are cloned, callables
    (model functions) shared, anything else deep-copied."""
    if isinstance(value, Base):
        return value.clone()
    if callable(value) and not isinstance(value, type):
        return value
    return copy.deepcopy(value)


class Base:
    """Hyper-parameters, cloning and settings checks, shared by every contract's base class.

    The constructor's arguments are recorded as they were passed, before ``__init__`` runs
    (arguments that are not callable are deep-copied then, so a head or detector that the
    object trains later does not change what :meth:`clone` builds from).

    >>> class Window(Base):
    ...     def __init__(self, size: int, *, name: str = "w") -> None:
    ...         self.size, self.name, self.seen = size, name, 0
    >>> w = Window(5); w.seen = 7
    >>> w._get_params(), w.clone().seen
    ({'size': 5, 'name': 'w'}, 0)
    """

    _params: dict[str, object]

    def __new__(cls, *args: object, **kwargs: object) -> Self:
        obj = super().__new__(cls)
        signature = inspect.signature(cls.__init__)
        try:
            bound = signature.bind(obj, *args, **kwargs)
        except TypeError:  # a copy or unpickling: the recorded arguments come with __dict__
            return obj
        bound.apply_defaults()
        params: dict[str, object] = {}
        for name, value in list(bound.arguments.items())[1:]:
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                extra: Mapping[str, object] = value
                params.update({k: _snapshot(v) for k, v in extra.items()})
            elif kind is not inspect.Parameter.VAR_POSITIONAL:
                params[name] = _snapshot(value)
        obj._params = params
        return obj

    def _get_params(self) -> dict[str, object]:
        """The constructor's arguments (defaults filled in), by name."""
        return dict(self.__dict__.get("_params", {}))

    def clone(self) -> Self:
        """A new, unfitted object built from the same arguments."""
        return type(self)(**{k: _fresh(v) for k, v in self._get_params().items()})

    def _settings(self) -> dict[str, object]:
        """The plain-valued arguments (numbers, strings, None and sequences of them): what a
        state stores and :meth:`_check_settings` compares."""
        return {k: v for k, v in self._get_params().items() if _plain(v)}

    def _check_settings(self, state: Mapping[str, object]) -> None:
        """``ValueError`` unless ``state["settings"]`` matches this object's settings."""
        stored = state.get("settings")
        if not isinstance(stored, Mapping):
            raise ValueError(f"state has no settings for a {type(self).__name__}")
        check_settings(stored, self._settings(), type(self).__name__)


def _snapshot(value: object) -> object:
    if callable(value) and not isinstance(value, type):
        return value
    try:
        return copy.deepcopy(value)
    except (TypeError, RuntimeError, copy.Error):  # e.g. a tensor that needs grad elsewhere
        return value


# ---------------------------------------------------------------------------- protocols
@runtime_checkable
class Learner(Protocol):
    """Predicts a batch and learns from it; ``learn`` returns None and leaves the step's loss in
    ``last_loss`` (NaN for learners without one). ``task`` is ``"classification"``,
    ``"regression"`` or None (any stream); batches are made on ``device`` (None: the CPU) in
    ``dtype``; ``register_classes`` takes the stream's class labels in code order;
    ``state_dict`` / ``load_state_dict`` checkpoint it. The one learner contract of the
    package (the registry's learners, the runner's and the explainers' all answer it; a
    learner may hold ``task``, ``device`` and ``dtype`` as plain attributes)."""

    @property
    def task(self) -> str | None: ...

    @property
    def device(self) -> torch.device | None: ...

    @property
    def dtype(self) -> torch.dtype: ...

    def __call__(self, X: torch.Tensor) -> torch.Tensor: ...

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None: ...

    @property
    def last_loss(self) -> float: ...

    def register_classes(self, classes: Sequence[Hashable]) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


@runtime_checkable
class Explainer(Protocol):
    """Explains batches; ``importance`` is a property, a tensor ``[d]``."""

    def explain(self, X: torch.Tensor, y: torch.Tensor) -> None: ...

    @property
    def importance(self) -> torch.Tensor: ...


@runtime_checkable
class DriftDetector(Protocol):
    """Updated with one batch at a time; ``drift_detected`` and ``new_alerts`` (rows) tell what
    the last update raised, ``alerts`` every alarm so far (rows)."""

    drift_detected: bool
    alerts: list[int]
    new_alerts: list[int]

    def update(self, batch: BatchView) -> None: ...


@runtime_checkable
class FeatureSelector(Protocol):
    """Learns per-feature weights; ``mask`` marks the selected features."""

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None: ...

    @property
    def weights(self) -> torch.Tensor | None: ...

    @property
    def mask(self) -> torch.Tensor | None: ...


@runtime_checkable
class Sink(Protocol):
    """Receives the configuration and the scalar streams of a run."""

    def log_config(self, config: Mapping[str, object]) -> None: ...

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Plugin(Protocol):
    """Called by the runner for every batch, after testing and before learning."""

    def on_batch(self, batch: BatchView) -> Mapping[str, float] | None: ...


# ---------------------------------------------------------------------------- base classes
class LearnerBase(Base):
    """Base of learners: ``last_loss`` (NaN until a learner sets it), ``task`` / ``device`` /
    ``dtype`` the runner reads, and :meth:`register_classes` for class-label alignment."""

    last_loss: float = float("nan")
    task: str | None = None
    device: torch.device | None = None
    dtype: torch.dtype = torch.float32

    def register_classes(self, classes: Sequence[Hashable]) -> None:
        """Know ``classes`` (the stream's labels, in code order); learners without classes
        ignore them."""

    def state_dict(self) -> dict[str, Any]:
        """The settings only: a learner with state overrides this (and ``load_state_dict``)."""
        return {"settings": self._settings()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._check_settings(state)


def new_classes(known: Sequence[Hashable], classes: Sequence[Hashable], owner: str
                ) -> list[Hashable]:
    """The stream's ``classes`` (in code order) that a learner knowing ``known`` still has to
    add: ``known`` must be their beginning, so that class indices mean the same in both.

    >>> new_classes(["a"], ["a", "b", "c"], "learner")
    ['b', 'c']
    >>> new_classes(["b"], ["a", "b"], "learner")
    Traceback (most recent call last):
    ...
    ValueError: the learner's classes ['b'] do not match the stream's ['a', 'b']
    """
    have = list(known)
    if have != list(classes[: len(have)]):
        raise ValueError(f"the {owner}'s classes {have!r} do not match the stream's "
                         f"{list(classes)!r}")
    return list(classes[len(have):])


class LearnerAdapter(LearnerBase):
    """A foreign learner (``__call__(X)`` and ``learn(X, y)``) in the :class:`Learner` shape,
    built once by :func:`as_learner`: what it has is used, the rest are :class:`LearnerBase`'s
    defaults; a value its ``learn`` returns (an older convention) becomes ``last_loss``.

    >>> class Old:
    ...     def __call__(self, X: torch.Tensor) -> torch.Tensor:
    ...         return X.sum(1)
    ...     def learn(self, X: torch.Tensor, y: torch.Tensor) -> float:
    ...         return 0.5
    >>> a = as_learner(Old())
    >>> a.learn(torch.ones(1, 2), torch.ones(1)), a.last_loss, a.task, a(torch.ones(1, 2)).tolist()
    (None, 0.5, None, [2.0])
    """

    def __init__(self, learner: object) -> None:
        if not callable(learner) or not callable(getattr(learner, "learn", None)):
            raise TypeError(f"a learner needs __call__(X) and learn(X, y); "
                            f"{type(learner).__name__} has not both")
        self.learner = learner
        for name in ("task", "device", "dtype"):
            if hasattr(learner, name):
                setattr(self, name, getattr(learner, name))
        register = getattr(learner, "register_classes", None)
        self._register = register if callable(register) else None
        self._loss: float = float("nan")

    def __getattr__(self, name: str) -> object:
        """Anything else is the wrapped learner's (the adapter is transparent to its users)."""
        learner = self.__dict__.get("learner")
        if learner is None:
            raise AttributeError(name)
        return getattr(learner, name)

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        return self.learner(X)

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        out = self.learner.learn(X, y)  # type: ignore[attr-defined]
        if out is None:  # the contract's form: the learner keeps its own last_loss, if any
            out = getattr(self.learner, "last_loss", None)
        self._loss = float("nan") if out is None else float(out)

    @property
    def last_loss(self) -> float:  # type: ignore[override]
        return self._loss

    def register_classes(self, classes: Sequence[Hashable]) -> None:
        if self._register is not None:
            self._register(classes)

    def state_dict(self) -> dict[str, object]:
        return self.learner.state_dict()  # type: ignore[attr-defined]

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        self.learner.load_state_dict(state)  # type: ignore[attr-defined]


def as_learner(learner: object) -> Learner:
    """``learner`` itself when it has the whole :class:`Learner` contract, else a
    :class:`LearnerAdapter` around it."""
    if isinstance(learner, Learner):
        return learner
    return LearnerAdapter(learner)


class ExplainerBase(Base):
    """Base of explainers: :meth:`importance_dict` from ``importance`` and ``feature_names``."""

    feature_names: list[str]

    @property
    def importance(self) -> torch.Tensor:
        raise NotImplementedError

    def importance_dict(self) -> dict[str, float]:
        """``{feature name: importance}``."""
        return dict(zip(self.feature_names, self.importance.tolist()))

    def step_importance(self) -> dict[str, float]:
        """What the runner records of this explainer at a logged step
        (:attr:`~torchstream.step.StepRecord.importance`, ``{name: value}``); default: nothing
        (an explainer that logs scalars of its own, e.g. an iPDP's score)."""
        return {}


class PluginBase(Base):
    """Base of plug-ins: every optional hook of the runner with a no-op default.

    >>> class Count(PluginBase):
    ...     def __init__(self) -> None:
    ...         self.rows = 0
    ...     def on_batch(self, batch: BatchView) -> dict[str, float]:
    ...         self.rows += batch.X.shape[0]
    ...         return {"rows": float(self.rows)}
    >>> p = Count()
    >>> X = torch.ones(2, 3)
    >>> p.transform(X, 0) is X, p.figures(), p.drift_detected, p.state_dict()
    (True, {}, False, {})
    """

    #: Whether the last batch raised a drift alert (read by the runner's ``reset_on_drift``).
    drift_detected: bool = False

    def on_batch(self, batch: BatchView) -> Mapping[str, float] | None:
        raise NotImplementedError

    def transform(self, X: torch.Tensor, step: int) -> torch.Tensor:
        """The batch's inputs as the learner should see them (default: unchanged)."""
        return X

    def figures(self) -> Mapping[str, Figure]:
        """Pictures of the plug-in's state (default: none)."""
        return {}

    def state_dict(self) -> dict[str, object]:
        """What a checkpoint stores (default: nothing)."""
        return {}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore :meth:`state_dict` (default: nothing to restore)."""

    def on_record(self, record: StepRecord) -> None:
        """Called each step after every plug-in's :meth:`on_batch` and before the learner
        learns the batch, with the step's record: its alarms, partial alarms, regions, known
        drifts and values (all but the training ``loss``, not known yet; default: nothing)."""

    def on_end(self) -> None:
        """Called once when the run reaches the end of its stream (default: nothing)."""


class DriftDetectorBase(PluginBase):
    """Base of drift detectors: one verb, ``update(batch)``, and the alarms it raised.

    The runner drives every detector through :meth:`update` (its :meth:`on_batch` is
    ``update`` plus the detector's own scalars, :meth:`_scalars`); each algorithm may keep its
    own entry point under its own name (e.g. ``ERICS.observe(mu, sigma)``). Every update ends
    by recording its outcome with :meth:`_alarm`: :attr:`new_alerts` the rows it alarmed at
    (empty when it did not), :attr:`alerts` all of them, :attr:`drift_detected` whether it
    alarmed; a detector that also tests single features (``partial = True``) names those that
    alarmed in :attr:`new_partial_alerts`, and one that locates a change in the input space
    gives the centres of the regions that changed in :attr:`new_regions`. :meth:`_advance`
    counts the rows an update covers, from the first row the detector saw (or the batch's
    ``start``, its row in the stream).

    A minimal detector that alarms when a batch's mean exceeds a threshold:

    >>> from torchstream.step import Batch
    >>> class Above(DriftDetectorBase):
    ...     def __init__(self, threshold: float = 1.0) -> None:
    ...         super().__init__()
    ...         self.threshold = threshold
    ...     def update(self, batch: BatchView) -> None:
    ...         first = self._advance(batch.size, batch.start)
    ...         hit = bool(batch.X.mean() > self.threshold)
    ...         self._alarm([first + batch.size - 1] if hit else [])
    >>> det = Above()
    >>> for step, level in enumerate((0.0, 0.0, 2.0, 0.0)):
    ...     det.update(Batch(step, 10 * step, torch.full((10, 1), level), None, None, None))
    ...     if det.new_alerts: print(step, det.new_alerts)
    2 [29]
    >>> det.alerts, det.drift_detected, isinstance(det, DriftDetector)
    ([29], False, True)
    """

    #: Whether the detector also tests single features (its :attr:`new_partial_alerts`).
    partial: bool = False

    def __init__(self) -> None:
        self.drift_detected = False
        #: Every alarm so far, as stream rows.
        self.alerts: list[int] = []
        #: The alarms of the last update (rows; empty when it raised none).
        self.new_alerts: list[int] = []
        #: The features (column indices or group names) that alarmed on their own in the
        #: last update (a detector with ``partial = True``).
        self.new_partial_alerts: list[int | str] = []
        #: The centres ``[r, d]`` (inputs' units) of the regions of the input space where the
        #: last update located a change (None: it located none).
        self.new_regions: torch.Tensor | None = None
        #: Rows seen by :meth:`update` so far.
        self.n_rows = 0

    def update(self, batch: BatchView) -> None:
        raise NotImplementedError

    def on_batch(self, batch: BatchView) -> Mapping[str, float] | None:
        self.update(batch)
        return self._scalars()

    def _scalars(self) -> Mapping[str, float] | None:
        """What the detector logs after an update (default: nothing; its alarms are logged by
        the runner at their rows)."""
        return None

    def _advance(self, n_rows: int, start: int | None = None) -> int:
        """Count an update of ``n_rows`` rows whose first is stream row ``start`` (default:
        the rows seen so far); returns that first row."""
        first = self.n_rows if start is None else int(start)
        self.n_rows = first + int(n_rows)
        return first

    def _alarm(self, rows: Sequence[int], *, features: Sequence[int | str] = (),
               regions: torch.Tensor | None = None) -> None:
        """Record the outcome of one update: its alarms at ``rows`` (empty: none), the
        ``features`` that alarmed on their own and the centres of the ``regions`` where it
        located the change."""
        self.new_alerts = [int(r) for r in rows]
        self.alerts.extend(self.new_alerts)
        self.drift_detected = bool(self.new_alerts)
        self.new_partial_alerts = list(features)
        self.new_regions = regions


class FeatureSelectorBase(Base):
    """Base of feature selectors (``learn``, ``weights``, ``mask``; see
    :class:`FeatureSelector`)."""

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        raise NotImplementedError


class SinkBase:
    """Base of sinks: :meth:`log_step` in scalars, ``log_figure`` and ``flush`` as no-ops.

    >>> from torchstream.step import StepRecord
    >>> class Printer(SinkBase):
    ...     def log_config(self, config: Mapping[str, object]) -> None: ...
    ...     def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    ...         print(step, dict(scalars))
    >>> Printer().log_step(StepRecord(0, 0, 10, True, {"metrics/accuracy/cumulative": 0.5},
    ...                               alerts={"adwin": (4,)}, alarm_counts={"adwin": 1}))
    4 {'alarms/adwin': 1.0}
    9 {'alarms/adwin': 1.0}
    10 {'metrics/accuracy/cumulative': 0.5}
    """

    def log_config(self, config: Mapping[str, object]) -> None:
        raise NotImplementedError

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        raise NotImplementedError

    def log_step(self, record: StepRecord) -> None:
        """What the runner calls after every step: the counting series of the alarms and the
        known drifts at their rows (:meth:`~torchstream.step.StepRecord.counts`) and, at a
        logged step, its values by tag at the rows seen
        (:meth:`~torchstream.step.StepRecord.scalars_by_tag`), each through
        :meth:`log_scalars`."""
        for tag, points in record.counts().items():
            for row, count in points.items():
                self.log_scalars(row, {tag: count})
        if record.logged:
            self.log_scalars(record.stop, record.scalars_by_tag())

    def log_figure(self, tag: str, figure: Figure, step: int) -> None:
        """Receive a picture (default: ignored)."""

    def flush(self) -> None:
        """Write what is buffered (default: nothing)."""

    def close(self) -> None:
        """Release resources (default: nothing)."""

    def state_dict(self) -> dict[str, object]:
        return {}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore :meth:`state_dict` (default: nothing to restore)."""


# ---------------------------------------------------------------------------- adapters
_PLUGIN_HOOKS = ("on_batch", "transform", "on_record", "figures", "state_dict",
                 "load_state_dict")


class _ForwardedState:
    """``state_dict`` / ``load_state_dict`` of an adapter: the wrapped object's hooks (in
    ``_hooks``) when it has them, else an empty state."""

    #: the wrapped object's own methods: what they return is the foreign object's business
    _hooks: dict[str, Callable[..., Any]]

    def state_dict(self) -> dict[str, object]:
        hook = self._hooks.get("state_dict")
        return {} if hook is None else hook()

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        hook = self._hooks.get("load_state_dict")
        if hook is not None:
            hook(state)


class PluginAdapter(_ForwardedState, PluginBase):
    """A foreign plug-in (an object with ``on_batch`` and / or ``transform``) in
    :class:`PluginBase`'s shape: the hooks it has are called, the others are the defaults.
    Built once, by :func:`as_plugin`.

    >>> class Double:
    ...     def transform(self, X: torch.Tensor, step: int) -> torch.Tensor:
    ...         return 2 * X
    >>> p = as_plugin(Double())
    >>> p.transform(torch.ones(1, 2), 0).tolist(), p.on_batch(None), p.state_dict()
    ([[2.0, 2.0]], None, {})
    """

    def __init__(self, plugin: object) -> None:
        self.plugin = plugin
        self.new_alerts: list[int] = []
        self._hooks = {h: getattr(plugin, h) for h in _PLUGIN_HOOKS
                       if callable(getattr(plugin, h, None))}
        if "on_batch" not in self._hooks and "transform" not in self._hooks:
            raise TypeError(f"a plug-in needs on_batch(batch) or transform(X, step); "
                            f"{type(plugin).__name__} has neither")

    @property
    def drift_detected(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.plugin, "drift_detected", False))

    @property
    def detects(self) -> bool:
        """Whether the foreign plug-in keeps ``alerts`` (stream rows): a drift detector."""
        return isinstance(getattr(self.plugin, "alerts", None), list)

    def on_batch(self, batch: BatchView) -> Mapping[str, float] | None:
        hook = self._hooks.get("on_batch")
        seen = len(self.plugin.alerts) if self.detects else 0  # type: ignore[attr-defined]
        out = None if hook is None else hook(batch)
        #: The foreign detector's alarms raised by this batch (rows).
        self.new_alerts = ([int(r) for r in self.plugin.alerts[seen:]]  # type: ignore[attr-defined]
                           if self.detects else [])
        return out

    def on_record(self, record: StepRecord) -> None:
        hook = self._hooks.get("on_record")
        if hook is not None:
            hook(record)

    def on_end(self) -> None:
        hook = getattr(self.plugin, "on_end", None)
        if callable(hook):
            hook()

    def transform(self, X: torch.Tensor, step: int) -> torch.Tensor:
        hook = self._hooks.get("transform")
        return X if hook is None else hook(X, step)

    def figures(self) -> Mapping[str, Figure]:
        hook = self._hooks.get("figures")
        return {} if hook is None else hook()


def as_plugin(plugin: object) -> PluginBase:
    """``plugin`` itself when it is a :class:`PluginBase`, else a :class:`PluginAdapter`."""
    return plugin if isinstance(plugin, PluginBase) else PluginAdapter(plugin)


class SinkAdapter(_ForwardedState, SinkBase):
    """A foreign sink in :class:`SinkBase`'s shape (built once, by :func:`as_sink`)."""

    def __init__(self, sink: object) -> None:
        if not isinstance(sink, Sink):
            raise TypeError(f"a sink needs log_config, log_scalars and close, got "
                            f"{type(sink).__name__}")
        self.sink = sink
        self._hooks = {h: getattr(sink, h) for h in
                       ("log_figure", "flush", "state_dict", "load_state_dict")
                       if callable(getattr(sink, h, None))}

    def log_config(self, config: Mapping[str, object]) -> None:
        self.sink.log_config(config)

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        self.sink.log_scalars(step, scalars)

    def log_figure(self, tag: str, figure: Figure, step: int) -> None:
        hook = self._hooks.get("log_figure")
        if hook is not None:
            hook(tag, figure, step)

    @property
    def logs_figures(self) -> bool:
        return "log_figure" in self._hooks

    def flush(self) -> None:
        hook = self._hooks.get("flush")
        if hook is not None:
            hook()

    def close(self) -> None:
        self.sink.close()


def as_sink(sink: object) -> SinkBase:
    """``sink`` itself when it is a :class:`SinkBase`, else a :class:`SinkAdapter`."""
    return sink if isinstance(sink, SinkBase) else SinkAdapter(sink)
