"""Local feature attributions with captum and a streaming baseline.

:class:`LocalAttributor` gives each row of a batch its own attributions (a
:class:`LocalAttribution`); it is a runner plug-in (:class:`~torchstream.base.PluginBase`:
``on_batch`` logs the batch's mean attribution per feature) and stands outside the global
explainer contract (:class:`~torchstream.base.Explainer`): it has no ``explain(X, y)`` and no
running ``importance`` of the stream, because an attribution belongs to one row and one
baseline, not to the model over time. Global importance over time is what
:class:`~torchstream.explain.IncrementalPFI` and :class:`~torchstream.explain.IncrementalSAGE`
compute.

:class:`LocalAttributor` wraps a captum attribution method (Integrated Gradients, DeepLift,
KernelSHAP, Shapley value sampling, feature ablation, or any captum class whose ``attribute``
takes ``baselines=``) and a baseline of :mod:`torchstream.explain.baselines`. For a batch
``X`` ``[B, d]``:

1. the model's outputs ``f(X)`` are computed once and checked (finite; a target column for a
   multi-output model);
2. the baseline gives ``S`` draws ``[S, B, d]`` (``S = n_samples`` for a stochastic baseline,
   1 otherwise);
3. the inputs are repeated ``S`` times and captum runs **once** on the ``S * B`` rows with one
   baseline row each; the attributions are averaged over the draws.

For a method that promises completeness (local accuracy: ``sum_j phi_j = f(x) - f(b)``) the
gap ``delta = sum_j phi_j - (f(x) - mean_s f(b_s))`` is returned with the attributions; it is
exactly 0 up to float rounding for DeepLift (rescale rule, piecewise-linear networks), KernelSHAP
(captum enforces the constraint) and Shapley value sampling (every permutation's marginal
contributions telescope), and shrinks with ``n_steps`` for Integrated Gradients (a Riemann
sum). With ``completeness_tol`` a larger gap raises ``RuntimeError``. Feature ablation promises
nothing and gets ``delta = None``.

captum's sampling methods draw from torch's global generator; the explainer runs them inside
``torch.random.fork_rng`` seeded from its own generator, so results are reproducible, resume
exactly from ``state_dict()`` and leave the global generator untouched.

References
----------
.. [BL] J. Haug, S. Zürn, P. El-Jiz, G. Kasneci (2021). On baselines for local feature
   attributions. AAAI-21 Workshop on Explainable Agency in Artificial Intelligence.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import captum.attr as ca
import torch

from torchstream.base import PluginBase
from torchstream.explain._chain import deeplift_through_output
from torchstream.explain.baselines import Baseline, ConstantBaseline, _seeded
from torchstream.explain.groups import FeatureGroups, check_feature_groups
from torchstream.learners.network import ClassProbabilities, LearnerNetwork
from torchstream.schema import feature_names_for
from torchstream.typing import BatchView, ModelFn

__all__ = ["METHODS", "LocalAttribution", "LocalAttributor"]


class _Attribution(Protocol):
    """A captum attribution method: built on a forward function, ``attribute`` returns the
    attributions of ``inputs``."""

    def __init__(self, forward_func: ModelFn) -> None: ...

    def attribute(self, inputs: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor: ...


@dataclass(frozen=True)
class _Method:
    cls_name: str
    #: ``"exact"``: sum of attributions = f(x) - f(b) up to rounding; ``"approximate"``: up to
    #: a discretisation error; ``None``: no promise.
    completeness: str | None
    #: needs an ``nn.Module`` (hooks on its layers)
    needs_module: bool
    defaults: tuple[tuple[str, Any], ...] = ()


#: The methods known by name, with their completeness promise.
METHODS: dict[str, _Method] = {
    "integrated_gradients": _Method(
        "IntegratedGradients", "approximate", False, (("n_steps", 50),)
    ),
    "deeplift": _Method("DeepLift", "exact", True),
    "kernel_shap": _Method(
        "KernelShap", "exact", False, (("n_samples", 200), ("perturbations_per_eval", 50))
    ),
    "shapley_value_sampling": _Method(
        "ShapleyValueSampling", "exact", False, (("n_samples", 25), ("perturbations_per_eval", 16))
    ),
    "feature_ablation": _Method("FeatureAblation", None, False, (("perturbations_per_eval", 16),)),
}
_BY_CLASS = {m.cls_name: name for name, m in METHODS.items()}
#: captum's notices about its own routine behaviour (not about the user's input).
_CAPTUM_NOISE = (
    ".*multiple inputs for Lime.*",
    ".*did not already require gradients.*",
    ".*Setting forward, backward hooks and attributes on non-linear.*",
)


@dataclass
class LocalAttribution:
    """The attributions of a batch and what they explain.

    Attributes
    ----------
    attributions
        ``[B, d]``, averaged over the baseline draws; ``[B, G]`` with ``feature_groups`` (the
        sum over each group's columns).
    output
        ``f(x)`` of the explained output ``[B]``.
    baseline_output
        ``mean_s f(b_s)`` ``[B]``.
    delta
        ``sum_j phi_j - (output - baseline_output)`` ``[B]``; ``None`` for a method without a
        completeness promise.
    baselines
        The baseline draws ``[S, B, d]``.
    target
        The explained output column per row ``[B]`` (``None`` for a one-output model).
    column_attributions
        With ``feature_groups``: the per-column attributions ``[B, d]``; else ``None``.
    """

    attributions: torch.Tensor
    output: torch.Tensor
    baseline_output: torch.Tensor
    delta: torch.Tensor | None
    baselines: torch.Tensor
    target: torch.Tensor | None
    column_attributions: torch.Tensor | None = None


class LocalAttributor(PluginBase):
    """An attributor, not an explainer: it returns per-row attributions (a
    :class:`LocalAttribution`) of a model against a streaming baseline, with captum, and runs
    as a plug-in outside the global-explainer contract (no ``explain``, no ``importance``).

    Parameters
    ----------
    model
        The model: a ``ModelFn`` (rows ``[n, d]`` to outputs ``[n]`` or ``[n, k]``); an
        ``nn.Module`` for DeepLift; or a learner with a ``network`` (an
        :class:`~torchstream.learners.OnlineLearner`), whose whole prediction is then explained:
        input scaling, module and output layer (for DeepLift on class probabilities the output
        layer is taken exactly, :func:`~torchstream.explain._chain.deeplift_through_output`).
        ``None``: as a runner plug-in, explain ``batch.learner`` the same way. Gradient methods
        need the model to be differentiable.
    method
        A name of :data:`METHODS` or a captum attribution class whose ``attribute`` takes
        ``baselines``.
    baseline
        A :class:`~torchstream.explain.baselines.Baseline`, or a number / vector ``[d]``
        (a :class:`~torchstream.explain.baselines.ConstantBaseline`).
    n_samples
        Baseline draws per row for a stochastic baseline (the paper averages over 10).
    target
        Output column for a multi-output model: an int, ``"predicted"`` (each row's most
        probable class) or ``None`` (one-output models only).
    method_kwargs
        Extra arguments of the captum ``attribute`` call (e.g. ``n_steps`` for Integrated
        Gradients, ``n_samples`` for KernelSHAP).
    completeness_tol
        Raise ``RuntimeError`` when a completeness-promising method misses by more than this.
    update_baseline
        In :meth:`on_batch`: update the baseline with the batch *after* explaining it.
    feature_names
        Names used in the scalars of :meth:`on_batch` (default ``x0..``).
    seed
        Seed of the generator that seeds captum's sampling.
    feature_groups
        ``{feature name: encoded column indices}`` covering the ``d`` columns (e.g.
        :meth:`~torchstream.schema.Schema.feature_groups`): the attributions are then summed
        per group (``[B, G]``, named by the group names in :meth:`on_batch`); completeness is
        kept, the sum over the groups is the sum over the columns.

    Examples
    --------
    A linear model explained against the zero baseline: the attributions are ``w_j x_j``.

    >>> model = torch.nn.Linear(3, 1, bias=False)
    >>> _ = model.weight.data.copy_(torch.tensor([[1.0, -2.0, 0.5]]))
    >>> exp = LocalAttributor(lambda z: model(z).squeeze(1), "shapley_value_sampling", 0.0)
    >>> res = exp.attribute(torch.tensor([[1.0, 1.0, 2.0]]))
    >>> res.attributions.tolist(), res.delta.abs().item() < 1e-6
    ([[1.0, -2.0, 1.0]], True)
    """

    name = "local"

    def __init__(
        self,
        model: ModelFn | None,
        method: str | type = "integrated_gradients",
        baseline: Baseline | float | Sequence[float] | torch.Tensor = 0.0,
        *,
        n_samples: int = 10,
        target: int | str | None = None,
        method_kwargs: Mapping[str, Any] | None = None,
        completeness_tol: float | None = None,
        update_baseline: bool = True,
        feature_names: Sequence[str] | None = None,
        seed: int | None = 0,
        feature_groups: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        if model is not None and not callable(model):
            raise TypeError(f"model must be callable (rows -> outputs), got {type(model).__name__}")
        self.model = model
        self._fn: Any = None if model is None else _module_of(model)
        self.method_name, spec, cls = _resolve_method(method)
        self.completeness = None if spec is None else spec.completeness
        self._needs_module = spec is not None and spec.needs_module
        if model is not None:
            self._check_module(model)
        kwargs = dict(spec.defaults) if spec is not None else {}
        kwargs.update(method_kwargs or {})
        bad = {"inputs", "baselines", "target"} & set(kwargs)
        if bad:
            raise ValueError(f"method_kwargs must not set {sorted(bad)}; the explainer does")
        params = inspect.signature(cls.attribute).parameters
        unknown = [k for k in kwargs if k not in params]
        if unknown:
            raise ValueError(
                f"method_kwargs {unknown} are not arguments of {cls.__name__}.attribute"
            )
        self.method_kwargs = kwargs
        self._captum_cls = cls
        #: The captum object of a fixed model (a learner's network is rebuilt per batch).
        self._captum = cls(model) if model is not None and self._fn is model else None
        if not isinstance(baseline, Baseline):
            baseline = ConstantBaseline(baseline)
        self.baseline = baseline
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
            raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
        self.n_samples = n_samples
        if not (
            target is None
            or target == "predicted"
            or (isinstance(target, int) and not isinstance(target, bool) and target >= 0)
        ):
            raise ValueError(f"target must be None, 'predicted' or an int >= 0, got {target!r}")
        self.target = target
        if completeness_tol is not None and not completeness_tol >= 0:
            raise ValueError(f"completeness_tol must be >= 0, got {completeness_tol!r}")
        self.completeness_tol = completeness_tol
        self.update_baseline = bool(update_baseline)
        self.feature_names = feature_names
        self.seed, self.generator = _seeded(seed)
        self.n_explained = 0
        self.feature_groups = feature_groups
        self.groups: FeatureGroups | None = None
        if feature_groups is not None:  # checked now where the width is known by names
            width = (sum(len(c) for c in feature_groups.values())
                     if isinstance(feature_groups, Mapping) else 0)
            check_feature_groups(feature_groups, width)

    # ------------------------------------------------------------------ helpers
    def _check_module(self, model: ModelFn) -> None:
        if self._needs_module and not isinstance(_module_of(model), torch.nn.Module):
            raise TypeError(
                f"method {self.method_name!r} needs model to be a torch.nn.Module (it hooks its "
                f"layers) or a learner with a network, got {type(model).__name__}"
            )

    def _outputs(self, Z: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            out = self._fn(Z)
        if not isinstance(out, torch.Tensor):
            out = torch.as_tensor(out)
        if out.dim() not in (1, 2) or out.shape[0] != Z.shape[0]:
            raise ValueError(
                f"model must map [n, d] rows to outputs [n] or [n, k], got {list(out.shape)} "
                f"for {Z.shape[0]} rows"
            )
        return out

    def _targets(self, out: torch.Tensor, target: int | str | None) -> torch.Tensor | None:
        if out.dim() == 1:
            if target not in (None, 0):
                raise ValueError(f"target={target!r} given but the model has one output per row")
            return None
        if target is None:
            raise ValueError(
                f"the model has {out.shape[1]} outputs per row: pass target= (an output column "
                "or 'predicted')"
            )
        if target == "predicted":
            return out.argmax(1)
        assert isinstance(target, int)
        if target >= out.shape[1]:
            raise ValueError(f"target={target} but the model has {out.shape[1]} outputs")
        return torch.full((out.shape[0],), target, dtype=torch.long, device=out.device)

    @staticmethod
    def _select(out: torch.Tensor, targets: torch.Tensor | None) -> torch.Tensor:
        if targets is None:
            return out.reshape(-1)
        return out.gather(1, targets.view(-1, 1).to(out.device)).squeeze(1)

    @staticmethod
    def _check_finite(values: torch.Tensor, what: str) -> None:
        bad = ~torch.isfinite(values)
        if bool(bad.any()):
            row = int(bad.reshape(bad.shape[0], -1).any(1).nonzero()[0])
            raise ValueError(f"the model's output for {what} row {row} is not finite")

    def scalar_fn(self, target: int | None = None) -> ModelFn:
        """The model restricted to one output column (``[n, d] -> [n]``)."""

        def fn(Z: torch.Tensor) -> torch.Tensor:
            out = self._outputs(Z)
            return out.reshape(-1) if out.dim() == 1 else out[:, target or 0]

        return fn

    # ------------------------------------------------------------------ API
    def attribute(self, X: torch.Tensor, target: int | str | None = None) -> LocalAttribution:
        """Attributions of the rows ``X`` ``[B, d]`` (``target`` overrides the explainer's)."""
        if not isinstance(X, torch.Tensor) or X.dim() != 2:
            shape = list(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
            raise ValueError(f"X must be a tensor [B, d], got {shape}")
        if X.shape[0] == 0:
            raise ValueError("X has no rows")
        if self.model is None:
            raise ValueError("LocalAttributor(None, ...) explains batch.learner as a runner "
                             "plug-in; give a model to call attribute() directly")
        return self._attribute(X, self.model, target)

    def _attribute(self, X: torch.Tensor, model: ModelFn, target: int | str | None
                   ) -> LocalAttribution:
        self._fn = _module_of(model)
        self._check_finite_input(X)
        out = self._outputs(X)
        self._check_finite(out, "input")
        targets = self._targets(out, self.target if target is None else target)
        fx = self._select(out, targets)
        B, d = X.shape
        S = self.n_samples if self.baseline.stochastic else 1
        # the neutral baseline searches along the explained output (one column for all rows:
        # the first row's target)
        col = None if targets is None else int(targets[0])
        bases = self.baseline.sample(
            X, S, self.scalar_fn(col) if self.baseline.needs_model else None
        )
        if bases.shape != (S, B, d):
            raise ValueError(
                f"the baseline gave shape {list(bases.shape)}, expected [{S}, {B}, {d}] for "
                f"inputs [{B}, {d}]"
            )
        Xe = X.detach().unsqueeze(0).expand(S, B, d).reshape(S * B, d)
        Be = bases.reshape(S * B, d)
        te = None if targets is None else targets.repeat(S)
        fb_all = self._outputs(Be)
        self._check_finite(fb_all, "baseline")
        fb = self._select(fb_all, te).reshape(S, B).mean(0)
        seed = int(torch.randint(0, 2**62, (1,), generator=self.generator))
        devices = [X.device] if X.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), warnings.catch_warnings():
            for message in _CAPTUM_NOISE:
                warnings.filterwarnings("ignore", message=message)
            torch.manual_seed(seed)
            net = self._fn
            if (self.method_name == "deeplift" and isinstance(net, LearnerNetwork)
                    and isinstance(net.output, ClassProbabilities)):
                # a class probability: DeepLift on the logits, the output layer exactly
                cast = net.dtype or Xe.dtype
                attr = deeplift_through_output(torch.nn.Sequential(net.scale, net.body),
                                               net.output, Xe.to(cast), Be.to(cast), te)
            else:
                captum = (self._captum if net is self.model and self._captum is not None
                          else self._captum_cls(net))
                attr = captum.attribute(Xe, baselines=Be, target=te, **self.method_kwargs)
        attr = attr.detach().to(X.dtype).reshape(S, B, d).mean(0)
        self._check_finite(attr, "attribution")
        delta = None
        if self.completeness is not None:
            delta = attr.sum(1) - (fx.detach().to(attr.dtype) - fb.to(attr.dtype))
            if self.completeness_tol is not None:
                worst = float(delta.abs().max())
                if worst > self.completeness_tol:
                    raise RuntimeError(
                        f"{self.method_name}: attributions miss completeness by {worst:.3g} "
                        f"> completeness_tol={self.completeness_tol}"
                    )
        self.n_explained += B
        groups = self._groups_for(d)
        if groups is None:
            return LocalAttribution(attr, fx.detach(), fb.detach(), delta, bases, targets)
        return LocalAttribution(groups.sum_columns(attr), fx.detach(), fb.detach(), delta,
                                bases, targets, column_attributions=attr)

    def _groups_for(self, d: int) -> FeatureGroups | None:
        """The validated ``feature_groups`` for rows of width ``d`` (None without groups)."""
        if self.feature_groups is None:
            return None
        if self.groups is None or self.groups.column_group.numel() != d:
            self.groups = check_feature_groups(self.feature_groups, d)
        return self.groups

    def _check_finite_input(self, X: torch.Tensor) -> None:
        bad = ~torch.isfinite(X)
        if bool(bad.any()):
            raise ValueError(f"X row {int(bad.any(1).nonzero()[0])} has a non-finite value")

    def __call__(self, X: torch.Tensor, target: int | str | None = None) -> torch.Tensor:
        """The attributions ``[B, d]`` only."""
        return self.attribute(X, target).attributions

    def update(self, X: torch.Tensor) -> None:
        """Let the baseline learn from the rows ``X``."""
        self.baseline.update(X)

    # ------------------------------------------------------------------ plug-in
    def on_batch(self, batch: BatchView) -> dict[str, float]:
        """Runner hook: explain the batch (the learner as it was before learning it), return
        the mean attribution of each feature as ``<name>/<feature>`` and the mean completeness
        gap; then update the baseline with the batch (``update_baseline``)."""
        groups = self._groups_for(batch.X.shape[1])
        names = (feature_names_for(self.feature_names, batch.X.shape[1]) if groups is None
                 else list(groups.names))
        out: dict[str, float] = {}
        model = self.model if self.model is not None else batch.learner
        if self.baseline.n_seen > 0 or not _needs_data(self.baseline):
            self._check_module(model)
            res = self._attribute(batch.X, model, self.target)
            for j, v in enumerate(res.attributions.mean(0).tolist()):
                out[f"{self.name}/{names[j]}"] = v
            if res.delta is not None:
                out[f"{self.name}_delta/mean_abs"] = float(res.delta.abs().mean())
        if self.update_baseline:
            self.baseline.update(batch.X)
        return out

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, object]:
        return {
            "method": self.method_name,
            "baseline": self.baseline.state_dict(),
            "generator": self.generator.get_state(),
            "seed": self.seed,
            "n_explained": self.n_explained,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state["method"] != self.method_name:
            raise ValueError(
                f"state is for method {state['method']!r}, this explainer uses {self.method_name!r}"
            )
        self.baseline.load_state_dict(state["baseline"])
        self.generator.set_state(torch.as_tensor(state["generator"]).cpu().clone())
        self.seed = int(state["seed"])
        self.n_explained = int(state["n_explained"])

    def __repr__(self) -> str:
        return (
            f"LocalAttributor(method={self.method_name!r}, baseline={self.baseline!r}, "
            f"n_samples={self.n_samples})"
        )


def _module_of(model: ModelFn) -> ModelFn:
    """What the attributions explain: a learner's whole prediction (its ``network``: input
    scaling, module, output layer) when it has one, else the model itself."""
    network = getattr(model, "network", None)
    return network if isinstance(network, torch.nn.Module) else model


def _needs_data(baseline: Baseline) -> bool:
    """Whether the baseline can only answer after an update."""
    return not isinstance(baseline, ConstantBaseline) and type(baseline).__name__ != (
        "BlurredBaseline"
    )


def _resolve_method(method: str | type) -> tuple[str, _Method | None, type[_Attribution]]:
    if isinstance(method, str):
        spec = METHODS.get(method)
        if spec is None:
            raise ValueError(
                f"method must be one of {sorted(METHODS)} or a captum class, got {method!r}"
            )
        return method, spec, getattr(ca, spec.cls_name)
    if not isinstance(method, type) or not hasattr(method, "attribute"):
        raise TypeError(f"method must be a name or a captum attribution class, got {method!r}")
    if "baselines" not in inspect.signature(method.attribute).parameters:
        raise TypeError(
            f"method {method.__name__} takes no baselines=; it cannot use a baseline "
            f"(choose one of {sorted(METHODS)})"
        )
    name = _BY_CLASS.get(method.__name__, method.__name__)
    return name, METHODS.get(name), cast("type[_Attribution]", method)
