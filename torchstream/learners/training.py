"""Optimisers, training losses and input / output-layer growth for :class:`OnlineLearner`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import optimizer as torch_optimizer

__all__ = [
    "OPTIMIZERS",
    "StepGradients",
    "TrainLoss",
    "binary_link",
    "build_optimizer",
    "grow_input_layer",
    "grow_output_layer",
    "input_layer",
    "mode_sensitive",
    "pad_inputs",
    "reserve_inputs",
    "training_loss",
    "widened_state",
]

# Layers whose forward pass differs between train() and eval().
_MODE_LAYERS: tuple[type[nn.Module], ...] = (
    nn.modules.dropout._DropoutNd,
    nn.modules.batchnorm._NormBase,
    nn.AlphaDropout,
    nn.RNNBase,
    nn.MultiheadAttention,
    nn.TransformerEncoderLayer,
    nn.TransformerDecoderLayer,
)


@dataclass(frozen=True)
class StepGradients:
    """The first half of a learner's step, the gradients set as ``p.grad``: the step's scaled
    ``inputs``, training ``target``, mean ``loss`` (detached) and the module's ``out``."""

    inputs: torch.Tensor
    target: torch.Tensor
    loss: torch.Tensor
    out: torch.Tensor


def mode_sensitive(module: nn.Module) -> bool:
    """Whether any sub-module behaves differently in train() and eval() mode: dropout, batch
    / instance norm, recurrent and attention layers, or any module with a true
    ``mode_sensitive`` attribute (set it on custom modules that read ``self.training``)."""
    return any(
        isinstance(m, _MODE_LAYERS) or getattr(m, "mode_sensitive", False) for m in module.modules()
    )

TrainLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
    "rmsprop": torch.optim.RMSprop,
    "adagrad": torch.optim.Adagrad,
}

_FUSABLE = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD)


def build_optimizer(
    optimizer: str | type[torch.optim.Optimizer],
    params: Iterable[nn.Parameter],
    lr: float,
    kwargs: Mapping[str, Any],
) -> torch.optim.Optimizer:
    """The optimiser; Adam, AdamW and SGD use the fused kernel unless ``fused`` is given
    (one kernel for all parameters: the per-step overhead dominates at batch size 1)."""
    cls = OPTIMIZERS[optimizer] if isinstance(optimizer, str) else optimizer
    kw = dict(kwargs)
    params = list(params)
    if cls in _FUSABLE and "fused" not in kw and "foreach" not in kw:
        try:
            return cls(params, lr=lr, fused=True, **kw)
        except (RuntimeError, TypeError, ValueError):
            pass
    return cls(params, lr=lr, **kw)


def optimizer_step(opt: torch.optim.Optimizer) -> None:
    """``opt.step()``, without the profiler / hook wrapper torch puts around every optimiser's
    ``step`` when no step hook is registered (the wrapper costs about as much as a fused Adam
    step on a small network). With any hook registered, the plain ``opt.step()`` runs."""
    step = type(opt).step
    raw = getattr(step, "__wrapped__", None)
    if (
        raw is None
        or not getattr(step, "hooked", False)
        or opt._optimizer_step_pre_hooks
        or opt._optimizer_step_post_hooks
        or getattr(torch_optimizer, "_global_optimizer_pre_hooks", None)
        or getattr(torch_optimizer, "_global_optimizer_post_hooks", None)
    ):
        opt.step()
        return
    raw(opt)


def binary_link(module: nn.Module) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """For a module with one output unit: the link from its score to P(y = 1)
    (``module.link == "probit"`` -> the normal CDF, otherwise the logistic function)."""
    n_out = getattr(module, "n_outputs", None)
    layer = getattr(module, "output_layer", None)
    if n_out is None and isinstance(layer, nn.Linear):
        n_out = layer.out_features
    if n_out != 1:
        return None
    return torch.special.ndtr if getattr(module, "link", "logistic") == "probit" else torch.sigmoid


def _softmax_ce(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out, y, reduction="none")


def _binary_ce(link: str) -> TrainLoss:
    def loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s = out.reshape(-1)
        sign = y.to(s.dtype) * 2 - 1
        if link == "probit":
            return -torch.special.log_ndtr(sign * s)
        return F.softplus(-sign * s)

    return loss


class _RegressionLoss:
    """A per-sample regression loss on flattened outputs (a class, so learners pickle)."""

    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        self.fn = fn

    def __call__(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.fn(out.reshape(-1), y.reshape(-1).to(out.dtype), reduction="none")


_REGRESSION_LOSSES = {
    "mse": _RegressionLoss(F.mse_loss),
    "absolute": _RegressionLoss(F.l1_loss),
    "huber": _RegressionLoss(F.huber_loss),
}


def training_loss(loss: str | TrainLoss, task: str) -> Callable[..., torch.Tensor]:
    """The per-sample training loss on the module's raw outputs.

    Classification: ``"auto"`` / ``"cross_entropy"`` (softmax over the outputs; for a module
    with one output, the Bernoulli likelihood through its link). Regression: ``"auto"`` /
    ``"mse"``, ``"absolute"``, ``"huber"``. A callable ``(outputs, y) -> [B]`` is used as is.
    """
    if callable(loss):
        return loss
    if task == "classification":
        if loss in ("auto", "cross_entropy"):
            return _ClassificationLoss()
        raise ValueError(f"unknown classification loss {loss!r}; use 'cross_entropy' or a callable")
    name = "mse" if loss == "auto" else loss
    try:
        return _REGRESSION_LOSSES[name]
    except KeyError:
        raise ValueError(
            f"unknown regression loss {loss!r}; known: {sorted(_REGRESSION_LOSSES)} or a callable"
        ) from None


class _ClassificationLoss:
    """Softmax cross-entropy, or the binary likelihood when the module has one output."""

    link: str | None = None

    def __call__(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if out.dim() == 1 or out.shape[1] == 1:
            return _binary_ce(self.link or "logistic")(out, y)
        return _softmax_ce(out, y)

    def mean(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The batch mean, reduced inside the kernel for the softmax case."""
        if out.dim() == 1 or out.shape[1] == 1:
            return self(out, y).mean()
        return F.cross_entropy(out, y)


@torch.no_grad()
def grow_output_layer(module: nn.Module, n_outputs: int) -> bool:
    """Widen ``module.output_layer`` (an ``nn.Linear``) to ``n_outputs`` units, keeping the
    trained units; new units start at zero weight and a bias equal to the mean bias of the
    existing ones (so a new class starts as likely as an average old one). Returns whether the
    layer changed."""
    layer = getattr(module, "output_layer", None)
    if not isinstance(layer, nn.Linear):
        raise ValueError(
            f"{type(module).__name__} has no `output_layer` (nn.Linear) to grow for a new class; "
            f"declare all classes up front (classes=...)"
        )
    old = layer.out_features
    if n_outputs <= old:
        return False
    new = nn.Linear(layer.weight.shape[1], n_outputs, bias=layer.bias is not None).to(
        device=layer.weight.device, dtype=layer.weight.dtype
    )
    new.weight.zero_()
    new.weight[:old] = layer.weight
    _set_inputs(new, new, layer.in_features)  # an input layer too: its spare input columns
    if layer.bias is not None:
        new.bias.fill_(float(layer.bias.mean()))
        new.bias[:old] = layer.bias
    module.output_layer = new
    _replace_in_sequential(module, layer, new)
    if hasattr(module, "n_outputs"):
        module.n_outputs = n_outputs
    return True


def _replace_in_sequential(module: nn.Module, old: nn.Module, new: nn.Module) -> None:
    """If the old layer is also registered inside a child container, swap it there too."""
    for parent in module.modules():
        for name, child in parent.named_children():
            if child is old:
                setattr(parent, name, new)


def input_layer(module: nn.Module) -> nn.Linear:
    """The layer that reads the inputs: the module's first ``nn.Linear`` (registration order)."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            return m
    raise ValueError(
        f"{type(module).__name__} has no nn.Linear to read the inputs; feature_incremental=True "
        f"needs one as the module's first layer (it grows when a feature appears)"
    )


@torch.no_grad()
def grow_input_layer(
    module: nn.Module, n_features: int
) -> tuple[torch.Tensor, nn.Parameter] | None:
    """Widen the input layer (:func:`input_layer`) to read ``n_features`` inputs: the new input
    columns start at zero weight, so the module's outputs are unchanged for any input and a
    new feature starts without influence.

    The layer keeps spare columns: its weight has ``C >= n_features`` columns (its
    ``in_features`` is ``n_features``), a forward pre-hook pads the inputs with zeros to ``C``
    (:func:`pad_inputs`), and a spare column, whose input is always 0, keeps weight 0 and
    gets gradient 0. When ``n_features`` exceeds ``C`` the weight is reallocated with
    ``max(n_features, 2 * C)`` columns, so ``k`` features added one growth at a time cost
    amortised ``O(k)`` copied columns, not ``O(k * d)``. The bias and every other parameter stay
    the same objects; a plain ``n_features`` attribute of the module follows the layer.
    Returns the old and the new weight when the weight was reallocated, else None.

    >>> layer = nn.Linear(3, 2)
    >>> grow_input_layer(layer, 4) is not None, layer.in_features, layer.weight.shape[1]
    (True, 4, 6)
    >>> grow_input_layer(layer, 6) is None, layer(torch.ones(1, 6)).shape  # within the spare
    (True, torch.Size([1, 2]))
    """
    layer = input_layer(module)
    if n_features < layer.in_features:
        raise ValueError(f"cannot shrink the input layer from {layer.in_features} to {n_features}")
    capacity = layer.weight.shape[1]
    grown: tuple[torch.Tensor, nn.Parameter] | None = None
    if n_features > capacity:
        old = layer.weight
        grown = (old, _set_columns(layer, max(n_features, 2 * capacity)))
    _set_inputs(module, layer, n_features)
    return grown


def _set_columns(layer: nn.Linear, capacity: int) -> nn.Parameter:
    """Give ``layer`` a new weight of ``capacity`` columns: the old columns (as many as fit)
    followed by zeros."""
    old = layer.weight
    keep = min(capacity, old.shape[1])
    new = nn.Parameter(torch.cat([old.detach()[:, :keep],
                                  old.new_zeros(old.shape[0], capacity - keep)], 1))
    new.requires_grad_(old.requires_grad)
    layer.weight = new
    return new


def _set_inputs(module: nn.Module, layer: nn.Linear, n_features: int) -> None:
    """``n_features`` inputs for ``layer`` (padded to its weight's columns by :func:`pad_inputs`)
    and for a plain ``n_features`` attribute of ``module``."""
    layer.in_features = n_features
    if layer.weight.shape[1] > n_features and pad_inputs not in layer._forward_pre_hooks.values():
        layer.register_forward_pre_hook(pad_inputs)
    if isinstance(vars(module).get("n_features"), int):
        module.n_features = n_features


def pad_inputs(layer: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Forward pre-hook of an input layer with spare columns (:func:`grow_input_layer`): the
    inputs ``[..., d]`` padded with zeros to the weight's ``C`` columns."""
    x = args[0]
    spare = layer.get_parameter("weight").shape[1] - x.shape[-1]
    if spare <= 0:
        return None
    return (F.pad(x, (0, spare)), *args[1:])


@torch.no_grad()
def reserve_inputs(module: nn.Module, n_features: int, capacity: int) -> None:
    """Give the input layer ``n_features`` inputs and exactly ``capacity`` weight columns: the
    layout of a grown module whose state is about to be loaded (same shapes, and the same
    padded products, so that a resumed learner computes bit for bit as the one saved)."""
    layer = input_layer(module)
    if layer.weight.shape[1] != capacity:
        _set_columns(layer, capacity)
    _set_inputs(module, layer, n_features)


def widened_state(
    state: Mapping[str, Any], old: torch.Tensor, new: torch.Tensor, group: Mapping[str, Any]
) -> dict[str, object]:
    """An optimiser's per-parameter state for ``new``, a copy of ``old`` widened by zero input
    columns (:func:`grow_input_layer`): every state tensor shaped like ``old`` gets the new
    columns' state as it would be had their gradient been zero at every earlier step (the
    gradient of a weight whose input was always 0). That is 0 for moment and momentum buffers
    (Adam, AdamW, SGD, RMSprop) and the initial accumulator for Adagrad's sum of squares.
    Step counters and other entries are kept."""
    add = new.shape[1] - old.shape[1]
    out: dict[str, Any] = {}
    for key, v in state.items():
        if isinstance(v, torch.Tensor) and v.shape == old.shape:
            fill = float(group.get("initial_accumulator_value", 0.0)) if key == "sum" else 0.0
            v = torch.cat([v, v.new_full((v.shape[0], add), fill)], 1)
        out[key] = v
    return out
