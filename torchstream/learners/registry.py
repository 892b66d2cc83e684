"""Learners by name: the one factory behind ``torchstream run``, ``evaluate`` and ``sweep``.

A name is either a *registered* learner or a model spec (a spec name such as ``"mlp"``, or a
TOML path) built as an :class:`~torchstream.learners.OnlineLearner` of the stream's task. This
module registers the river models it wraps (:data:`RIVER_MODELS`); learners of higher layers
register themselves with :func:`register_learner` (the command line registers the Dynamic
Model Tree, ``"dmt"``), so this module imports nothing above the learners layer.

Every learner is a ``ModelFn`` (``learner(X) -> [n, k]`` probabilities or ``[n]`` values), so
explainers can explain it directly.

>>> from torchstream.streams import SEA
>>> built = make_learner("naive_bayes", SEA(seed=0, n_samples=100))
>>> built.name, built.identity["kind"], built.identity["class"]
('naive_bayes', 'river model', 'river.naive_bayes.gaussian.GaussianNB')
>>> make_learner("naive_bayes", SEA(seed=0, n_samples=100), LearnerOptions(lr=0.1))
Traceback (most recent call last):
...
ValueError: 'naive_bayes' (a river model) does not use the option lr; it uses: seed, device
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from river import linear_model, naive_bayes, preprocessing, tree
from river.base import Estimator

from torchstream.base import Learner, LearnerAdapter, as_learner
from torchstream.learners.tasks import online_learner
from torchstream.learners.river_learner import RiverLearner
from torchstream.models import available_specs, load_spec
from torchstream.streams.base import Stream

__all__ = ["RIVER_MODELS", "BuiltLearner", "LearnerOptions", "available_learners",
           "make_learner", "register_learner", "registered_learners"]

Plain = str | int | float | bool | None


@dataclass(frozen=True)
class LearnerOptions:
    """Settings given to a learner by name; ``None``: not given (the learner's own default;
    a model spec standardises its inputs unless ``scale_inputs=False``).

    ``seed`` applies to every learner, ``device`` says where torch learners run (river
    models always run on the CPU) and ``compile`` whether a torch learner (a model spec)
    compiles its step (an online learner's ``compile=True``; other learners have no torch module to
    compile and run as they are); ``lr``, ``scale_inputs`` and ``on_divergence`` apply only
    to the learners that use them, and a learner refuses one of them that it would ignore.
    """

    seed: int = 0
    device: str | None = None
    lr: float | None = None
    scale_inputs: bool | None = None
    on_divergence: str | None = None
    compile: bool = False

    def given(self) -> list[str]:
        """The options given that a learner may not use (``seed`` and ``device`` aside)."""
        return [k for k in ("lr", "scale_inputs", "on_divergence") if getattr(self, k) is not None]


@dataclass(frozen=True)
class BuiltLearner:
    """A learner made by :func:`make_learner`, with what identifies it.

    ``identity`` holds plain values only (name, kind, class; a spec's file and tables) and
    goes into checkpoints, so that a run is resumed only with the same model.
    """

    learner: Learner
    name: str
    identity: dict[str, object] = field(default_factory=dict)


Build = Callable[[Stream, LearnerOptions], Learner]


@dataclass(frozen=True)
class _Entry:
    build: Build
    kind: str
    uses: frozenset[str]


_REGISTRY: dict[str, _Entry] = {}


def register_learner(name: str, build: Build, *, kind: str, uses: Iterable[str] = ()) -> None:
    """Make ``name`` a learner :func:`make_learner` knows: ``build(stream, options)`` returns
    it; ``kind`` describes it (``"river model"``), ``uses`` names the options of
    :class:`LearnerOptions` it takes besides ``seed`` and ``device``. Registering a name again
    replaces it."""
    bad = sorted(set(uses) - {"lr", "scale_inputs", "on_divergence"})
    if bad:
        raise ValueError(f"unknown learner options {bad}")
    _REGISTRY[name] = _Entry(build, kind, frozenset(uses))


def registered_learners() -> list[str]:
    """The registered names, in registration order (model specs not included)."""
    return list(_REGISTRY)


def available_learners() -> list[str]:
    """Every name :func:`make_learner` accepts: the model specs, then the registered learners."""
    return [*available_specs(), *(n for n in _REGISTRY if n not in available_specs())]


def _class_name(obj: object) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def make_learner(name: str, stream: Stream, options: LearnerOptions | None = None) -> BuiltLearner:
    """The learner called ``name`` for ``stream``: a registered learner, else a model spec
    (name or TOML path). Unknown names raise a ``ValueError`` listing the known ones; an
    option the learner does not use raises a ``ValueError`` naming it. A registered build that
    returns a foreign learner (``__call__`` and ``learn`` only) gets it in the
    :class:`~torchstream.base.Learner` shape (:func:`~torchstream.base.as_learner`)."""
    options = options or LearnerOptions()
    entry = _REGISTRY.get(name)
    if entry is None:
        return _from_spec(name, stream, options)
    unused = [k for k in options.given() if k not in entry.uses]
    if unused:
        takes = ", ".join(["seed", "device", *sorted(entry.uses)])
        raise ValueError(f"{name!r} (a {entry.kind}) does not use the option"
                         f"{'s' if len(unused) > 1 else ''} {', '.join(unused)}; it uses: {takes}")
    try:
        learner = as_learner(entry.build(stream, options))
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    inner = learner.learner if isinstance(learner, LearnerAdapter) else learner
    inner = inner.model if isinstance(inner, RiverLearner) else inner
    return BuiltLearner(learner, name,
                        {"name": name, "kind": entry.kind, "class": _class_name(inner)})


def _from_spec(name: str, stream: Stream, options: LearnerOptions) -> BuiltLearner:
    try:
        spec = load_spec(name)
    except FileNotFoundError:
        raise ValueError(f"unknown learner {name!r}; known: {', '.join(available_learners())} "
                         "or a model spec TOML path") from None
    if spec.type == "autoencoder":
        raise ValueError(f"{name!r} is an autoencoder spec (unsupervised), not a predictor")
    overrides: dict[str, object] = {
        "seed": options.seed, "schema": stream.schema, "device": options.device or "auto",
        "scale_inputs": True if options.scale_inputs is None else options.scale_inputs,
        "compile": options.compile}
    for key in ("lr", "on_divergence"):
        if getattr(options, key) is not None:
            overrides[key] = getattr(options, key)
    learner = online_learner(spec, task=stream.task, **overrides)
    identity: dict[str, object] = {"name": spec.name, "source": str(spec.source), **spec.model,
                                   "learner": dict(spec.learner)}
    return BuiltLearner(learner, spec.name, identity)


def _river(classifier: Callable[[], Estimator],
           regressor: Callable[[], Estimator] | None) -> Build:
    """A build of a river model: ``classifier()`` or ``regressor()`` for the stream's task."""
    def build(stream: Stream, options: LearnerOptions) -> Learner:
        if stream.task == "classification":
            return RiverLearner.for_stream(classifier(), stream)
        if regressor is None:
            raise ValueError(f"this river model is a classifier only; the stream is for "
                             f"{stream.task}")
        return RiverLearner.for_stream(regressor(), stream)
    return build


def _scaled(model: Callable[[], Estimator]) -> Callable[[], Estimator]:
    return lambda: preprocessing.StandardScaler() | model()


_RIVER: dict[str, Build] = {
    "hoeffding_tree": _river(tree.HoeffdingTreeClassifier, tree.HoeffdingTreeRegressor),
    "hoeffding_adaptive_tree": _river(tree.HoeffdingAdaptiveTreeClassifier,
                                      tree.HoeffdingAdaptiveTreeRegressor),
    "naive_bayes": _river(naive_bayes.GaussianNB, None),
    "logistic_regression": _river(_scaled(linear_model.LogisticRegression),
                                  _scaled(linear_model.LinearRegression)),
    "perceptron": _river(_scaled(linear_model.Perceptron), None),
}
#: Names of the river models registered here.
RIVER_MODELS = tuple(_RIVER)
for _name, _build in _RIVER.items():
    register_learner(_name, _build, kind="river model")
