"""`OnlineLearner`: a torch module, an optimiser and a loss that learn from a stream; the base
of the two task classes, :class:`~torchstream.learners.tasks.OnlineClassifier` and
:class:`~torchstream.learners.tasks.OnlineRegressor` (``online_learner(..., task=...)`` picks
one by name)."""

from __future__ import annotations

import copy
import math
import pickle
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, SupportsIndex

import torch
from river import base as river_base
from torch import nn

from torchstream.base import LearnerBase
from torchstream.devices import as_device
from torchstream.learners.compiled import CompiledLearner
from torchstream.learners.divergence import (
    DIVERGENCE_ACTIONS,
    DivergenceError,
    LossMonitor,
    OnDivergence,
)
from torchstream.learners.fused_adam import fused_adam_step
from torchstream.learners.guard import DivergenceGuard, Snapshot, frozen_copy
from torchstream.learners.network import LearnerNetwork, Standardize
from torchstream.learners.river_api import RiverAPI
from torchstream.learners.scaling import RunningStandardizer
from torchstream.learners.threads import use_threads
from torchstream.learners.training import (
    OPTIMIZERS,
    StepGradients,
    TrainLoss,
    binary_link,
    build_optimizer,
    grow_input_layer,
    grow_output_layer,
    input_layer,
    mode_sensitive,
    optimizer_step,
    reserve_inputs,
    training_loss,
    widened_state,
)
from torchstream.models.mlp import MLP
from torchstream.models.specs import ModelSpec, load_spec
from torchstream.schema import Schema, match_key

__all__ = [
    "INCREMENTAL_CHECK_SKIPS",
    "RIVER_CHECK_SKIPS",
    "DivergenceError",
    "OnlineLearner",
    "resolve_device",
]

ModuleFactory = Callable[[int, int], nn.Module]
Task = Literal["classification", "regression"]


# river's `check_estimator` checks this learner does not pass, and why (read by
# `_unit_test_skips`): with a fixed input width (the default) ...
RIVER_CHECK_SKIPS: dict[str, str] = {
    "check_emerging_features": (
        "the network's input width is fixed by the schema: a row missing a feature, or with a "
        "feature the schema lacks, is an error naming the row and the features (never imputed "
        "or dropped); feature_incremental=True passes this check"
    ),
    "check_disappearing_features": "as check_emerging_features: a missing feature is an error",
    "check_radically_disappearing_features": (
        "as check_emerging_features: a missing feature is an error"
    ),
    "check_shuffle_features_no_impact": (
        "an inferred schema takes its column order from the first row, so two learners that "
        "first see differently ordered rows wire the features to different input units; pass "
        "schema=... for an order-free learner"
    ),
    "check_learn_many_matches_learn_one": (
        "the check changes the feature set between batches (an error, as above), and "
        "learn_many takes one optimiser step on the batch's mean loss where learn_one takes one "
        "per row: different trajectories by design"
    ),
}

# ... and with ``feature_incremental=True``.
INCREMENTAL_CHECK_SKIPS: dict[str, str] = {
    "check_learn_many_matches_learn_one": (
        "learn_many takes one optimiser step on the batch's mean loss where learn_one takes one "
        "per row: different trajectories by design"
    ),
}


class _SpecFactory:
    """The module factory of :meth:`OnlineLearner.from_spec` (a class, so learners pickle).
    A ``probit`` spec on a binary classification task gets one output unit."""

    def __init__(self, spec: ModelSpec, task: Task) -> None:
        self.spec = spec
        self.task = task

    def __call__(self, n_features: int, n_outputs: int) -> nn.Module:
        one_unit = self.spec.type == "probit" and self.task == "classification"
        k = 1 if one_unit and n_outputs <= 2 else n_outputs
        return self.spec.build(n_features, k, task=self.task)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``"auto"`` (or ``None``) picks CUDA when present, else the CPU; a CUDA device gets its
    index (:func:`~torchstream.devices.as_device`)."""
    if device is None or device == "auto":
        return as_device("cuda" if torch.cuda.is_available() else "cpu")
    return as_device(device)


class OnlineLearner(RiverAPI, DivergenceGuard, CompiledLearner, river_base.Estimator,
                    LearnerBase):
    """A torch module trained online, one batch (or one row) at a time: the base of
    :class:`~torchstream.learners.tasks.OnlineClassifier` and
    :class:`~torchstream.learners.tasks.OnlineRegressor`, which are the classes to build
    (:func:`~torchstream.learners.tasks.online_learner` picks one by ``task``). Both have the
    same two APIs:

    * tensors: ``learn(X, y)``, ``predict(X)``, ``predict_proba(X)`` and ``learner(X)`` (the
      :data:`ModelFn` explainers call: class probabilities ``[B, k]`` or values ``[B]``). ``y``
      holds class indices (into ``classes_``) or values.
    * river: ``learn_one``, ``predict_one``, ``predict_proba_one``, ``learn_many``,
      ``predict_many``, ``predict_proba_many`` on dict rows / pandas frames; labels may be any
      hashable (strings included) and a label never seen before adds a class (the output layer
      grows by one unit).

    Parameters
    ----------
    module
        An ``nn.Module`` mapping ``[B, d]`` to ``[B, n_outputs]`` (or ``[B]``), or a factory
        ``(n_features, n_outputs) -> nn.Module`` called when the width is first known: a class
        (``MLP``), ``functools.partial(MLP, hidden=(64,))`` or a module-level function, which
        pickle (a lambda works too, but its learner cannot be pickled).
    task
        The class's task (``"classification"`` or ``"regression"``); given, it must match
        (it is a constructor argument so that ``clone()`` and river's checks see it).
    loss
        ``"auto"`` (cross-entropy / MSE), ``"cross_entropy"``, ``"mse"``, ``"absolute"``,
        ``"huber"``, or a callable ``(outputs, y) -> Tensor[B]`` on the module's raw outputs.
    optimizer, lr, optimizer_kwargs
        A name in ``OPTIMIZERS`` (or a ``torch.optim.Optimizer`` class) and its settings.
    classes
        Known class labels up front (their order fixes the class indices).
    schema
        How dict rows become tensors; inferred from the first dict row (numeric features only)
        when omitted.
    scale_inputs
        Standardise the inputs with running means / deviations (updated before each step).
    scale_targets
        Regression only: learn on standardised targets and predict in the original unit
        (default ``True`` for regression).
    feature_incremental
        Dict rows only. ``False`` (default): the input width is fixed and a row must hold
        exactly the schema's features (anything else is an error naming the row and the
        features). ``True`` (for river pipelines whose rows change keys, such as
        ``preprocessing.OneHotEncoder() | learner``): a feature absent from a row is read as
        0, never an error; a key never seen before, in a row being *learned*, appends a numeric
        feature to the schema and an input column to the module's input layer (its first
        ``nn.Linear``) whose weights start at 0, so every prediction is unchanged at the moment
        of growth; the optimiser keeps its state, with the new columns' state set to what it
        would be had the feature been 0 in every earlier row (zero moments / momentum, see
        :func:`~torchstream.learners.training.widened_state`), and so do the input scaler's
        statistics. The input layer keeps spare zero columns (its weight doubles when
        outgrown, :func:`~torchstream.learners.training.grow_input_layer`), so growth costs
        amortised O(new columns), not a copy of every weight per new key. At prediction, a
        key not yet learned is ignored (its weights would be 0). An inferred schema then
        orders the first row's keys, and each batch of new keys, by name, so the key order of
        a dict never matters. A declared schema must be numeric without nullable features.
        ``feature_names`` lists the columns, grown ones included.
    device, dtype
        Where the module lives (``"auto"``: CUDA when present) and its float type
        (``None``: ``torch.float32`` for classification, ``torch.float64`` for regression,
        whose predictions are values: river's rows and regressors are float64, and in
        float32 a row predicted alone and in a batch differ by more than river's 1e-6 when
        the inputs are large and unscaled).
    seed
        Seeds the module's initialisation.
    on_divergence
        What a divergent step does (checked after every step, see
        :mod:`~torchstream.learners.divergence`: a non-finite loss, non-finite parameters, a
        loss above ``divergence_factor`` times its running reference, or a typical loss that
        factor times a constant prediction's and rising): ``"raise"`` a
        :class:`DivergenceError` naming the row, the loss and a remedy (the learner keeps the
        state the step left); ``"warn"`` once per kind and go on; ``"skip"``: undo the step
        (parameters, optimiser state, scalers; the rows still count in ``n_samples_seen``) and
        warn once per kind. ``divergences`` counts the divergent steps by kind. An untrained
        model over 100 times worse than a constant prediction is said, with a warning, at the
        end of the warm-up (the first 32 rows).
    divergence_factor
        The factor of the explosion rule and of the comparison with a constant (``inf`` turns
        both off; the non-finite checks stay).
    compile
        Run the training step's forward pass, loss and backward pass, and the prediction's
        forward pass and outputs, as graphs compiled with ``torch.compile(dynamic=False)`` (one
        per batch shape; see :mod:`~torchstream.learners.compiled`); the optimiser step stays
        the fused Adam kernel. The results are the eager path's within float rounding (fused
        kernels sum in another order). Where compiling fails, a warning says why, once, and
        the eager path runs (:attr:`compile_off_reason`); :attr:`compile_seconds` is the
        one-off compile time.

    The constructor's arguments are kept as given (``_get_params``); ``clone()`` builds an
    untrained learner from them (a module passed as an instance is copied at construction, so
    a clone starts from its untrained weights). ``copy.deepcopy`` and ``pickle`` keep the
    trained state; pickling needs a factory that pickles (above), and a lambda's learner
    raises an error saying so.

    Building (or unpickling) a learner applies the package's CPU thread policy
    (:func:`~torchstream.learners.use_threads`): torch runs on one thread unless the process
    has chosen a count, stated once when it changes torch's count. One thread is the fast
    choice for per-row steps of small models; ``use_threads(n)`` before building chooses ``n``.

    >>> from functools import partial
    >>> import pickle
    >>> from torchstream.learners import OnlineClassifier
    >>> from torchstream.models import MLP
    >>> learner = OnlineClassifier(partial(MLP, hidden=(8,)), n_features=3, seed=0)
    >>> learner.learn(torch.zeros(4, 3), torch.tensor([0, 1, 0, 1]))
    >>> copied = pickle.loads(pickle.dumps(learner))
    >>> bool(torch.equal(copied(torch.ones(2, 3)), learner(torch.ones(2, 3))))
    True
    """

    task: Task = "classification"
    # river reads these flags on its estimators
    _supervised = True
    _multiclass = True

    def __init__(
        self,
        module: nn.Module | ModuleFactory,
        *,
        task: Task | None = None,
        loss: str | TrainLoss = "auto",
        optimizer: str | type[torch.optim.Optimizer] = "adam",
        lr: float = 1e-3,
        optimizer_kwargs: Mapping[str, Any] | None = None,
        classes: Sequence[Hashable] | None = None,
        schema: Schema | None = None,
        n_features: int | None = None,
        feature_incremental: bool = False,
        scale_inputs: bool = False,
        scale_targets: bool | None = None,
        device: str | torch.device | None = "cpu",
        dtype: torch.dtype | None = None,
        seed: int | None = 0,
        on_divergence: OnDivergence = "raise",
        divergence_factor: float = 1e4,
        compile: bool = False,
    ) -> None:
        if type(self) is OnlineLearner:
            raise TypeError(
                "OnlineLearner is the base of the task classes: build an OnlineClassifier or an "
                "OnlineRegressor, or online_learner(module, task=...) for a task given by name "
                "(all three from torchstream.learners)"
            )
        # the arguments as given (recorded by the base), the module as constructed
        self._params["module"] = _pristine(module)
        if dtype is None:
            dtype = torch.float64 if self.task == "regression" else torch.float32
        use_threads()  # one CPU thread unless the process chose a count (learners.threads)
        if task is not None and task != self.task:
            raise ValueError(f"{type(self).__name__} has task {self.task!r}, got task={task!r}")
        if isinstance(optimizer, str) and optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {optimizer!r}; known: {sorted(OPTIMIZERS)}")
        if not (lr > 0 and math.isfinite(lr)):
            raise ValueError(f"lr must be a positive number, got {lr!r}")
        if not (isinstance(module, nn.Module) or callable(module)):
            raise TypeError("module must be an nn.Module or a factory (n_features, n_outputs)")
        if on_divergence not in DIVERGENCE_ACTIONS:
            known = ", ".join(DIVERGENCE_ACTIONS)
            raise ValueError(f"on_divergence must be one of {known}, got {on_divergence!r}")
        self.on_divergence = on_divergence
        self.divergence_factor = divergence_factor
        self._init_compiled(compile)
        self._monitor = LossMonitor(divergence_factor)
        self.divergences: dict[str, int] = {}
        self.device = resolve_device(device)
        self.dtype = dtype
        self._max_value = torch.finfo(dtype).max
        self.seed = seed
        self.loss = loss
        self.optimizer_name = optimizer
        self.lr = lr
        self.optimizer_kwargs = dict(optimizer_kwargs or {})
        self.scale_inputs = scale_inputs
        self.scale_targets = (self.task == "regression") if scale_targets is None else scale_targets
        if self.scale_targets and self.task != "regression":
            raise ValueError("scale_targets applies to regression only")
        self.schema = schema
        if schema is not None and n_features is not None and n_features != schema.n_columns:
            raise ValueError(
                f"n_features={n_features} but the schema has {schema.n_columns} columns"
            )
        self.n_features = schema.n_columns if schema is not None else n_features
        if not isinstance(feature_incremental, bool):
            raise TypeError(
                f"feature_incremental must be True or False, got {feature_incremental!r}"
            )
        if feature_incremental and schema is not None and not schema._plain_numeric:
            raise ValueError(
                "feature_incremental=True reads an absent feature as 0, which needs a numeric "
                "schema without nullable features; one-hot encode categorical features upstream"
            )
        self.feature_incremental = feature_incremental
        self.classes_: list[Hashable] = []
        self._codes: dict[tuple[bool, Hashable], int] = {}
        self._fixed_classes = classes is not None
        for c in classes or ():
            self._add_class(c)
        self._factory = None if isinstance(module, nn.Module) else module
        self.module: nn.Module | None = None
        self._initial: nn.Module | None = None  # the module as built, while L_init is measured
        self.optimizer: torch.optim.Optimizer | None = None
        self.input_scaler: RunningStandardizer | None = None
        self.target_scaler: RunningStandardizer | None = None
        self.link: Callable[[torch.Tensor], torch.Tensor] | None = None
        self._last_forward: tuple[torch.Tensor, int, torch.Tensor] | None = None
        self._last_loss: torch.Tensor | None = None
        # the last batch whose values were checked finite (and its version): a prediction and
        # the learning step of the same batch check it once
        self._checked_X: torch.Tensor | None = None
        self._checked_version = -1
        self._last_encoded: tuple[list[Any], torch.Tensor] | None = None  # never mutated
        self._mode_sensitive = False
        self.n_samples_seen = 0
        self._training_mode: bool | None = None
        self._train_loss = training_loss(loss, self.task)
        if isinstance(module, nn.Module):
            self._setup(module)
        elif self.n_features is not None:
            self._build()

    @classmethod
    def from_spec(
        cls,
        spec: ModelSpec | str | Path,
        **overrides: Any,  # OnlineLearner's keywords, each with its own type
    ) -> OnlineLearner:
        """A learner of this class's task from a model spec (a
        :class:`~torchstream.models.ModelSpec`, a spec name such as ``"mlp"`` or a TOML path):
        the ``[model]`` table builds the module, the ``[learner]`` table gives optimiser,
        learning rate, loss and seed; ``overrides`` win.

        A ``probit`` spec on a binary task gets one output unit (a true probit classifier).
        """
        if not isinstance(spec, ModelSpec):
            spec = load_spec(spec)
        opts = dict(spec.learner)
        own = ("optimizer", "lr", "loss", "seed", "on_divergence", "divergence_factor")
        kwargs: dict[str, Any] = {k: opts.pop(k) for k in own if k in opts}
        if opts:  # weight_decay, momentum, ...
            kwargs["optimizer_kwargs"] = opts
        kwargs.update(overrides)
        return cls(_SpecFactory(spec, cls.task), **kwargs)

    # ------------------------------------------------------------------ river estimator
    _get_params = LearnerBase._get_params  # the arguments as given, not river's reading of them

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        yield {"module": MLP}

    def _unit_test_skips(self) -> set[str]:
        return set(INCREMENTAL_CHECK_SKIPS if self.feature_incremental else RIVER_CHECK_SKIPS)

    @property
    def feature_names(self) -> list[str] | None:
        """The input columns in order (grown ones included); ``None`` before the schema is
        known (declared, or inferred from the first dict row)."""
        return None if self.schema is None else list(self.schema.columns)

    def __getstate__(self) -> dict[str, object]:
        """Pickle / deepcopy state, without the per-step caches (an autograd graph, views that
        a copy would no longer share with its parameters)."""
        state = self.__dict__.copy()
        state["_last_forward"] = state["_last_encoded"] = None
        state["_checked_X"], state["_checked_version"] = None, -1
        state.pop("_flat_params", None)  # views of the parameters: a copy rebuilds its own
        state["_graphs"] = None  # compiled for these parameters: a copy compiles its own
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        use_threads()  # a learner unpickled in a new process follows the thread policy too

    def __reduce_ex__(self, protocol: SupportsIndex) -> str | tuple[object, ...]:
        """Pickle's reduction, after checking that the module factory pickles (a lambda or a
        function defined inside another function does not): an error that says what to pass
        instead, rather than pickle's own about an attribute lookup."""
        _check_picklable(self._params["module"])  # type: ignore[arg-type]
        return super().__reduce_ex__(protocol)

    def __deepcopy__(self, memo: dict[int, object]) -> OnlineLearner:
        """A deep copy of :meth:`__getstate__`'s state (not through pickle's reduction: a
        factory that does not pickle, such as a lambda, is shared by the copy)."""
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return new

    # ------------------------------------------------------------------ construction
    def _n_outputs_wanted(self) -> int:
        return max(len(self.classes_), 2) if self.task == "classification" else 1

    def _build(self) -> None:
        assert self._factory is not None and self.n_features is not None
        # built outside inference mode even when the first call is a prediction
        with torch.inference_mode(False), torch.random.fork_rng(devices=[]):
            if self.seed is not None:
                torch.manual_seed(self.seed)
            module = self._factory(self.n_features, self._n_outputs_wanted())
            self._setup(module)

    def _setup(self, module: nn.Module) -> None:
        self.module = module.to(device=self.device, dtype=self.dtype)
        self._initial = frozen_copy(self.module) if self._monitor.warming_up else None
        self.link = binary_link(module) if self.task == "classification" else None
        if self.scale_inputs:
            if self.n_features is None:
                first = next((p for p in module.parameters() if p.dim() == 2), None)
                if first is None:
                    raise ValueError("pass n_features (or a schema) when scale_inputs=True")
                self.n_features = first.shape[1]
            self.input_scaler = RunningStandardizer(self.n_features).to(self.device)
        if self.scale_targets:
            self.target_scaler = RunningStandardizer(1).to(self.device)
        self._make_optimizer()

    def _make_optimizer(self) -> None:
        assert self.module is not None
        self._last_forward = None  # parameters may have been replaced
        self._mode_sensitive = mode_sensitive(self.module)
        self.optimizer = build_optimizer(
            self.optimizer_name, self.module.parameters(), self.lr, self.optimizer_kwargs
        )
        self._weights = [p for g in self.optimizer.param_groups for p in g["params"]]

    def _add_features(self, names: Sequence[Hashable]) -> None:
        """``feature_incremental``: append numeric features ``names`` to the schema and grow the
        module's input layer, its optimiser state and the input scaler (zero columns)."""
        assert self.schema is not None
        if self.module is not None:
            input_layer(self.module)  # a module that cannot grow fails before any change
        self.schema = self.schema.with_numeric(names)  # no per-feature loop over the old ones
        self.n_features = self.schema.n_columns
        self._widen(keep_optimizer_state=True)

    def _widen(self, *, keep_optimizer_state: bool) -> None:
        """Grow the module (and the divergence reference copy, the input scaler) to
        ``n_features`` inputs, when it is narrower. Within the input layer's spare columns
        (:func:`~torchstream.learners.training.grow_input_layer`) no parameter changes; when
        its weight is reallocated (doubled), a new optimiser follows the new weight."""
        if self.module is None:
            return
        assert self.n_features is not None
        if input_layer(self.module).in_features >= self.n_features:
            return
        self._last_forward = self._last_encoded = None
        old_opt = self.optimizer
        grown = grow_input_layer(self.module, self.n_features)
        if self._initial is not None:
            grow_input_layer(self._initial, self.n_features)
        if self.input_scaler is not None:
            self.input_scaler.grow(self.n_features)
        if grown is None:  # spare columns: the same parameters, the same optimiser
            return
        old_w, new_w = grown
        self._make_optimizer()
        if not keep_optimizer_state or old_opt is None:
            return
        assert self.optimizer is not None
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                if p is new_w and old_w in old_opt.state:
                    self.optimizer.state[p] = widened_state(old_opt.state[old_w], old_w, p, group)
                elif p in old_opt.state:
                    self.optimizer.state[p] = old_opt.state[p]

    def _reserve_inputs(self, module_state: Mapping[str, torch.Tensor]) -> None:
        """``feature_incremental``: the input layer as in ``module_state`` (``n_features``
        inputs and the saved weight's spare columns), the input scaler as wide, and a new
        optimiser for the new weight."""
        assert self.module is not None and self.n_features is not None
        layer = input_layer(self.module)
        name = next(n for n, m in self.module.named_modules() if m is layer)
        saved = module_state.get(f"{name}.weight" if name else "weight")
        capacity = self.n_features if saved is None else int(saved.shape[1])
        reserve_inputs(self.module, self.n_features, capacity)
        if self.input_scaler is not None and self.input_scaler.mean.shape[0] < self.n_features:
            self.input_scaler.grow(self.n_features)
        self._last_forward = self._last_encoded = None
        self._make_optimizer()

    def _ensure_module(self, X: torch.Tensor) -> nn.Module:
        if self.module is None:
            self.n_features = X.shape[1]
            self._build()
        assert self.module is not None
        return self.module

    # ------------------------------------------------------------------ validation
    def _check_X(self, X: torch.Tensor) -> torch.Tensor:
        if not isinstance(X, torch.Tensor):
            raise TypeError(f"X must be a torch.Tensor [B, d], got {type(X).__name__}")
        if X.dim() == 1:
            X = X.unsqueeze(0)
        if X.dim() != 2:
            raise ValueError(f"X must have shape [B, d], got {list(X.shape)}")
        if X.is_complex():  # the conversion to a real dtype would drop the imaginary parts
            raise TypeError(
                f"X must hold real numbers, got dtype {X.dtype}: the learner would train on the "
                f"real parts only; pass the parts as columns (torch.view_as_real(X).flatten(1))"
            )
        if self.n_features is not None and X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} columns, the learner expects {self.n_features}")
        raw, X = X, X.to(device=self.device, dtype=self.dtype)
        if raw is self._checked_X and raw._version == self._checked_version:
            return X  # the batch the prediction just checked, unchanged: no second host read
        if not bool(torch.isfinite(X).all()):
            r, c = (~torch.isfinite(X)).nonzero()[0].tolist()
            self._raise_bad_value(float(raw[r, c]), f"X row {r}", c)
        self._checked_X, self._checked_version = raw, raw._version
        return X

    def _check_range(self, X: torch.Tensor, first_row: int) -> None:
        """Every value of the float64 rows ``X`` is finite and fits the learner's dtype."""
        bad = ~(X.abs() <= self._max_value)
        if bool(bad.any()):
            r, c = bad.nonzero()[0].tolist()
            self._raise_bad_value(float(X[r, c]), f"row {first_row + r}", c)

    def _raise_bad_value(self, value: float, row: str, column: int) -> None:
        names = self.schema.columns if self.schema is not None else None
        col = f"column {names[column]!r}" if names and column < len(names) else f"column {column}"
        kind = str(self.dtype).removeprefix("torch.")
        if math.isfinite(value):
            raise ValueError(
                f"{row}, {col}: {value:g} overflows the model's {kind} (largest magnitude "
                f"{self._max_value:.4g}); rescale the column or use dtype=torch.float64"
            )
        hint = "" if math.isnan(value) else (
            f" (a value beyond {kind}'s range becomes inf on conversion: rescale the column)")
        raise ValueError(f"{row}, {col}: non-finite value {value}{hint}")

    # ------------------------------------------------------------------ core (tensors)
    def _set_mode(self, training: bool) -> None:
        """train() / eval(), only for modules whose output depends on the mode (each switch
        walks the whole module tree: a real cost at one row per step)."""
        if self._training_mode is not training and self.module is not None:
            if self._mode_sensitive or self._training_mode is None:
                self.module.train(training or not self._mode_sensitive)
            self._training_mode = training

    def _forward_raw(self, X: torch.Tensor) -> torch.Tensor:
        module = self._ensure_module(X)
        if self.input_scaler is not None:
            X = self.input_scaler.transform(X)
        return module(X)

    def _outputs(self, out: torch.Tensor) -> torch.Tensor:  # pragma: no cover - per task
        raise NotImplementedError

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        """The :data:`ModelFn`: probabilities ``[B, k]`` or values ``[B]``. Never learns;
        keeps autograd (for gradient attributions) — wrap in ``torch.no_grad()`` otherwise."""
        X = self._check_X(X)
        self._ensure_module(X)
        self._set_mode(False)
        return self._prediction(X)

    def _prediction(self, X: torch.Tensor) -> torch.Tensor:
        """The outputs for the checked inputs ``X`` (module built, mode set): compiled without
        autograd where ``compile=True`` applies, eager otherwise."""
        if self.compile and not torch.is_grad_enabled():
            out = self._compiled_predict(X)
            if out is not None:
                return out
        return self._outputs(self._forward_raw(X))

    forward = __call__

    @property
    def network(self) -> LearnerNetwork:
        """The learner's whole prediction as an ``nn.Module`` (input scaling, the module, the
        output probabilities or values) for captum and other module-based tools: its output is
        ``learner(X)``; it shares the learner's parameters and statistics. Needs a built module
        (after the first batch, or with ``n_features`` given)."""
        if self.module is None:
            if self.n_features is None:
                raise RuntimeError("the learner has no module yet: learn or predict a batch first")
            self._ensure_module(torch.zeros(1, self.n_features, dtype=self.dtype,
                                            device=self.device))
        assert self.module is not None
        self._set_mode(False)
        return LearnerNetwork(Standardize(self.input_scaler), self.module, self._output_module(),
                              self.dtype)

    def _output_module(self) -> torch.nn.Module:  # pragma: no cover - per task
        raise NotImplementedError

    def register_classes(self, classes: Sequence[Hashable]) -> None:
        """A regressor has no classes: only an empty list is accepted."""
        if len(classes):
            raise ValueError(f"a regression learner has no classes, got {list(classes)!r}")

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        """One optimiser step on the batch ``(X [B, d], y [B])``. The batch's mean loss is
        :attr:`last_loss` (read on demand, so that learning forces no extra device sync)."""
        X = self._check_X(X)
        y = self._check_y(y, X.shape[0])
        self._last_loss = self._step(X, y)

    @property  # the base's attribute, read on demand here
    def last_loss(self) -> float:  # type: ignore[override]
        """The mean training loss of the last step (NaN before the first one)."""
        return float("nan") if self._last_loss is None else float(self._last_loss)

    def _step(
        self, X: torch.Tensor, y: torch.Tensor, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """One optimiser step. ``out`` is the module's output for ``X`` when it is already known
        (computed with autograd by the prediction of the same row, same parameters)."""
        if not X.shape[0]:
            raise ValueError(f"X has no rows (shape {list(X.shape)}): a step learns at least one")
        self._ensure_module(X)
        self._last_forward = None
        saved = self._snapshot() if self.on_divergence == "skip" else None
        gradients = self._gradients(X, y, out)
        return self._descend(gradients, X.shape[0], saved)

    def _gradients(self, X: torch.Tensor, y: torch.Tensor,
                   out: torch.Tensor | None = None) -> StepGradients:
        """The first half of a step: the gradients of the batch's mean loss, set as ``p.grad``
        (not accumulated), with the input scaler updated by ``X`` first (unless ``out`` is
        given: the module's output for ``X``, computed with autograd)."""
        Xs = X
        if out is None:
            if self.input_scaler is not None:
                self.input_scaler.update(X)
                Xs = self.input_scaler.transform(X)
            self._set_mode(True)
        target = self._train_target(y)
        mean_loss = getattr(self._train_loss, "mean", None)  # a fused mean where available
        # compiled: forward, loss and backward as graphs (None where it does not apply)
        compiled = self._compiled_train(Xs, target) if out is None and self.compile else None
        if compiled is not None:
            loss, out = compiled
        else:
            if out is None:
                assert self.module is not None
                out = self.module(Xs)
            loss = mean_loss(out, target) if mean_loss else self._train_loss(out, target).mean()
            for p in self._weights:  # zero_grad(set_to_none=True) without its per-call overhead
                p.grad = None
            loss.backward()
        return StepGradients(Xs, target, loss.detach(), out)

    def _descend(self, step: StepGradients, rows: int, saved: Snapshot | None) -> torch.Tensor:
        """The second half of a step: the optimiser's step with the parameters' ``p.grad``, the
        ``rows`` counted as seen, the step checked (:meth:`_check_step`); the loss."""
        initial_loss = None
        if self._initial is not None:  # the untrained model's loss: the explosion rule's floor
            mean_loss = getattr(self._train_loss, "mean", None)
            with torch.no_grad():
                out0 = self._initial(step.inputs)
                initial_loss = (mean_loss(out0, step.target) if mean_loss
                                else self._train_loss(out0, step.target).mean())
        opt = self.optimizer
        assert opt is not None
        if not fused_adam_step(opt):  # the same kernel, called directly where it applies
            optimizer_step(opt)
        first = self.n_samples_seen
        self.n_samples_seen += rows
        self._check_step(step.loss, initial_loss, step.out, step.target, first, saved)
        return step.loss

    def _train_target(self, y: torch.Tensor) -> torch.Tensor:
        return y

    def _check_y(self, y: Any, n: int) -> torch.Tensor:  # pragma: no cover - per task
        raise NotImplementedError

    # ------------------------------------------------------------------ classes
    def _add_class(self, label: Hashable) -> int:
        code = len(self.classes_)
        self.classes_.append(label)
        self._codes[match_key(label)] = code  # True and 1 are different labels
        return code

    # ------------------------------------------------------------------ state
    def to(self, device: str | torch.device) -> OnlineLearner:
        """Move the module, its optimiser state and the scalers to ``device``."""
        self.device = resolve_device(device)
        self._last_encoded = self._last_forward = None
        if self.module is not None:
            state = self.state_dict()
            self.module.to(self.device)
            if self._initial is not None:
                self._initial.to(self.device)
            for s in (self.input_scaler, self.target_scaler):
                if s is not None:
                    s.to(self.device)
            self._make_optimizer()
            self.optimizer.load_state_dict(state["optimizer"])  # type: ignore[union-attr, arg-type]
            self._training_mode = None
        return self

    def state_dict(self) -> dict[str, object]:
        """Everything needed to resume exactly: module, optimiser, scalers, classes, counters."""
        return {
            "module": None if self.module is None else self.module.state_dict(),
            "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
            "input_scaler": None if self.input_scaler is None else self.input_scaler.state_dict(),
            "target_scaler": (
                None if self.target_scaler is None else self.target_scaler.state_dict()
            ),
            "classes": list(self.classes_),
            "n_features": self.n_features,
            "n_samples_seen": self.n_samples_seen,
            "schema": None if self.schema is None else self.schema.to_dict(),
            "divergence": {
                "monitor": self._monitor.state_dict(),
                "counts": dict(self.divergences),
                "initial_module": None if self._initial is None else self._initial.state_dict(),
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._last_forward = None
        self.classes_, self._codes = [], {}
        for c in state["classes"]:
            self._add_class(c)
        if state["schema"] is not None:
            self.schema = Schema.from_dict(state["schema"])
        self.n_features = state["n_features"]
        self.n_samples_seen = state["n_samples_seen"]
        divergence = state.get("divergence")
        if divergence is None:
            self._monitor.reset()
            self.divergences = {}
        else:
            self._monitor.load_state_dict(divergence["monitor"])
            self.divergences = {str(k): int(v) for k, v in divergence["counts"].items()}
        if state["module"] is None:
            return
        if self.module is None:
            self._build()
        assert self.module is not None
        if self.feature_incremental:  # a learner that grew after this one was built
            self._reserve_inputs(state["module"])
        n_out = _output_width(state["module"])
        if n_out is not None and self.task == "classification":
            grow_output_layer(self.module, n_out)
            self._make_optimizer()
        self.module.load_state_dict(state["module"])
        self.optimizer.load_state_dict(state["optimizer"])  # type: ignore[union-attr]
        initial = None if divergence is None else divergence.get("initial_module")
        self._initial = None
        if initial is not None and self._monitor.warming_up:
            self._initial = frozen_copy(self.module)
            if self._initial is not None:
                self._initial.load_state_dict(initial)
        for name in ("input_scaler", "target_scaler"):
            scaler = getattr(self, name)
            if scaler is not None and state[name] is not None:
                scaler.load_state_dict(state[name])

    def __repr__(self) -> str:
        mod = type(self.module).__name__ if self.module is not None else "<not built>"
        return (
            f"{type(self).__name__}({mod}, optimizer={self.optimizer_name!r}, lr={self.lr}, "
            f"device={str(self.device)!r}, n_samples_seen={self.n_samples_seen})"
        )


def _pristine(module: nn.Module | ModuleFactory) -> nn.Module | ModuleFactory:
    """A module instance as constructed (a copy: the learner trains the instance in place), so
    that ``clone()`` starts untrained. A module that refuses ``deepcopy`` is kept as is, and
    ``clone()`` then raises that module's own error rather than sharing trained weights."""
    if not isinstance(module, nn.Module):
        return module
    try:
        return copy.deepcopy(module)
    except Exception:  # noqa: BLE001 - whatever a custom module raises
        return module


def _check_picklable(module: nn.Module | ModuleFactory) -> None:
    """Raise ``pickle.PicklingError`` saying what to do when the module factory does not
    pickle (a module instance is checked by pickle itself)."""
    if isinstance(module, nn.Module):
        return
    try:
        pickle.dumps(module)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        name = getattr(module, "__qualname__", None) or type(module).__name__
        raise pickle.PicklingError(
            f"the learner cannot be pickled: its module factory {name!r} does not pickle ({e}). "
            f"Build the learner with a factory that pickles: a module-level function, a class "
            f"such as MLP, or functools.partial(MLP, hidden=(64,)) (MLP from torchstream.models)"
        ) from e


def _output_width(module_state: Mapping[str, torch.Tensor]) -> int | None:
    w = module_state.get("output_layer.weight")
    return None if w is None else int(w.shape[0])
