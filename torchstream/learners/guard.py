"""The divergence check of :class:`~torchstream.learners.OnlineLearner`, run after every
optimiser step: one fused read-back of the loss and of every parameter tensor's largest
magnitude, the explosion rule of :mod:`~torchstream.learners.divergence`, and what
``on_divergence`` asks for (raise, warn, or undo the step)."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from torchstream.learners.divergence import (
    EXPLODING_LOSS,
    NON_FINITE_LOSS,
    NON_FINITE_PARAMETERS,
    WORSE_THAN_CONSTANT,
    DivergenceError,
    DivergenceWarning,
    LossMonitor,
)
from torchstream.learners.scaling import RunningStandardizer

__all__ = ["DivergenceGuard", "frozen_copy", "read_scalars"]

Snapshot = tuple[list[torch.Tensor], dict[Any, dict[str, Any]], list[Any]]


def read_scalars(tensors: list[torch.Tensor], *, one_transfer: bool) -> list[float]:
    """The values of 0-d tensors: stacked and read back in one transfer (one host sync, for
    tensors on an accelerator), or read one by one (on the CPU, where a read costs no sync and
    the stack would cost more than the reads)."""
    if one_transfer:
        dtype = tensors[0].dtype
        return torch.stack([t.to(dtype) for t in tensors]).tolist()
    return [t.item() for t in tensors]


def frozen_copy(module: nn.Module) -> nn.Module | None:
    """A copy of ``module`` as it is now, in eval mode and without gradients; ``None`` for a
    module that refuses ``deepcopy`` (the explosion rule then takes ``L_init`` from the first
    steps' own losses)."""
    try:
        frozen = copy.deepcopy(module)
    except Exception:  # noqa: BLE001 - whatever a custom module raises
        return None
    frozen.eval()
    for p in frozen.parameters():
        p.requires_grad_(False)
    return frozen


def _aliases(views: list[torch.Tensor], params: list[torch.Tensor]) -> bool:
    """Whether each flat view still reads its parameter's memory (a parameter whose ``.data``
    was replaced, or a non-contiguous one whose flattening copied, does not)."""
    return all(v.data_ptr() == p.data_ptr() for v, p in zip(views, params))


class DivergenceGuard:
    """Mixin of :class:`~torchstream.learners.OnlineLearner`: checks each step."""

    # set by the learner
    task: str
    loss: str | Callable[..., torch.Tensor]
    lr: float
    scale_inputs: bool
    scale_targets: bool
    on_divergence: str
    divergence_factor: float
    divergences: dict[str, int]
    optimizer: torch.optim.Optimizer | None
    input_scaler: RunningStandardizer | None
    target_scaler: RunningStandardizer | None
    _monitor: LossMonitor
    _initial: nn.Module | None
    _weights: list[torch.Tensor]
    # flat views of the parameters (see `_parameter_sum`), for the list `_weights` they alias
    _flat_params: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None
    _train_loss: Callable[..., torch.Tensor]

    def _check_step(
        self,
        loss: torch.Tensor,
        initial_loss: torch.Tensor | None,
        out: torch.Tensor,
        target: torch.Tensor,
        first: int,
        saved: Snapshot | None,
    ) -> None:
        """After the step: the loss, the sum of all parameters (:meth:`_parameter_sum`) and,
        while ``L_init`` is measured, the initial model's loss, read back together: one stacked
        transfer (a single host sync) on an accelerator, plain scalar reads on the CPU (where a
        read costs no sync and the stack would cost more)."""
        monitor = self._monitor
        tensors = [loss, self._parameter_sum()]
        if initial_loss is not None:
            tensors.append(initial_loss)
        constant = self._constant_loss(out, target) if monitor.warming_up else None
        if constant is not None:
            tensors.append(constant)
        vals = read_scalars(tensors, one_transfer=not loss.is_cpu)
        value = vals[0]
        const = None if constant is None else vals[-1]
        warming_up = monitor.warming_up
        if initial_loss is not None:
            monitor.add_initial(vals[2], int(target.shape[0]), constant=const)
            if not monitor.warming_up:
                self._initial = None
        elif self._initial is None and monitor.warming_up:  # no copy of the initial model
            monitor.add_initial(value, int(target.shape[0]), constant=const)
        if warming_up and not monitor.warming_up:
            self._say_poor_start(first + int(target.shape[0]))
        kind: str | None
        if not math.isfinite(value):
            kind = NON_FINITE_LOSS
        elif not math.isfinite(vals[1]) and not self._parameters_finite():
            kind = NON_FINITE_PARAMETERS
        else:
            kind = monitor.observe(value)
            if kind is None:
                return
        self._diverged(kind, value, out, target, first, saved)

    def _say_poor_start(self, n_rows: int) -> None:
        """At the end of the warm-up (``n_rows`` rows seen): a warning when the untrained
        model's loss was over ``ceiling`` times a constant prediction's."""
        monitor = self._monitor
        ratio = monitor.poor_start()
        if ratio is None:
            return
        warnings.warn(
            f"the untrained model's mean loss on rows 0-{n_rows - 1:,}, "
            f"{monitor.initial_loss:.4g}, is {ratio:.3g} times a constant prediction's "
            f"({monitor.constant_loss:.4g}: {self._constant_name()}); "
            f"until it learns, its predictions are that far off, and a metric averaged over the "
            f"run shows it. Fix: {' or '.join(self._fixes(learning_rate=False))}",
            DivergenceWarning,
            stacklevel=5,  # the caller of learn / learn_one / learn_many
        )

    def _constant_loss(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor | None:
        """The batch's mean loss of a constant prediction, raw outputs 0: uniform class
        probabilities, or the running mean of standardised regression targets. None where no
        constant is known to be trivial: a callable loss, regression targets in the caller's
        own unit (``scale_targets=False``)."""
        if not isinstance(self.loss, str) or (self.task == "regression" and not self.scale_targets):
            return None
        with torch.no_grad():
            return self._train_loss(torch.zeros_like(out.detach()), target).mean()

    def _parameter_sum(self) -> torch.Tensor:
        """The sum of every parameter entry, one concatenation and one reduction: NaN or inf
        whenever an entry is (NaN propagates, ``inf - inf`` is NaN). A finite sum therefore
        proves every parameter finite; a non-finite one (or a finite sum that overflowed) is
        settled exactly by :meth:`_parameters_finite`."""
        params = self._weights
        flat = self._flat_params
        if flat is None or flat[0] is not params or not _aliases(flat[1], params):
            flat = self._flat_params = (params, [p.detach().reshape(-1) for p in params])
        return torch.cat(flat[1]).sum()

    def _parameters_finite(self) -> bool:
        """Whether every parameter entry is finite (the exact check, run when the sum is not)."""
        norms = list(torch._foreach_norm(self._weights, math.inf))
        return all(map(math.isfinite, read_scalars(norms, one_transfer=not norms[0].is_cpu)))

    def _diverged(
        self,
        kind: str,
        value: float,
        out: torch.Tensor,
        target: torch.Tensor,
        first: int,
        saved: Snapshot | None,
    ) -> None:
        count = self.divergences.get(kind, 0)
        self.divergences[kind] = count + 1
        if self.on_divergence == "raise":
            msg = self._divergence_message(kind, value, out, target, first)
            raise DivergenceError(f"{msg}; on_divergence='warn' or 'skip' goes on instead")
        note = self._divergence_message(kind, value, out, target, first) if count == 0 else None
        if saved is not None:  # skip
            self._restore(saved)
            if kind == WORSE_THAN_CONSTANT:  # the loss had joined the history
                self._monitor.retract()
        elif kind == EXPLODING_LOSS:  # warn: the loss joins the history
            self._monitor.accept(value)
        if note is not None:
            done = "the step was undone" if saved is not None else "training goes on"
            warnings.warn(
                f"{note}; {done} (warned once per kind; `divergences` counts them)",
                DivergenceWarning,
                stacklevel=5,  # the caller of learn / learn_one / learn_many
            )

    def _divergence_message(
        self, kind: str, value: float, out: torch.Tensor, target: torch.Tensor, first: int
    ) -> str:
        """Where (the row: the first non-finite or the largest per-row loss of the batch), what
        (the loss, the ratio), and what to change."""
        n = int(target.shape[0])
        with torch.no_grad():
            per_row = self._train_loss(out.detach(), target).reshape(-1)
        if per_row.numel() == n:
            bad = ~torch.isfinite(per_row)
            i = int(bad.nonzero()[0, 0]) if bool(bad.any()) else int(per_row.argmax())
            where = f"row {first + i:,}"
            if n > 1:
                which = "its first non-finite loss" if bool(bad.any()) else "its largest loss"
                where += f" ({which} in the batch of rows {first:,}-{first + n - 1:,})"
        else:
            where = f"the batch of rows {first:,}-{first + n - 1:,}"
        if kind == NON_FINITE_LOSS:
            what = f"the loss is {value}"
        elif kind == NON_FINITE_PARAMETERS:
            what = f"the step made parameters non-finite (loss {value:.4g})"
        elif kind == WORSE_THAN_CONSTANT:
            monitor = self._monitor
            median, const = monitor.median() or math.nan, monitor.constant_loss or math.nan
            lowest = monitor.lowest_median
            what = (
                f"the median loss of the last {monitor.window} steps, {median:.4g}, is "
                f"{median / const:.3g} times a constant prediction's ({const:.4g}: "
                f"{self._constant_name()}) and {median / lowest:.3g} times its "
                f"lowest earlier median {lowest:.4g} (the limits are divergence_factor="
                f"{self.divergence_factor:g} and {monitor.ceiling:g})"
            )
        else:
            ref = self._monitor.reference() or math.nan
            what = (
                f"the loss {value:.4g} is {value / ref:.3g} times its running reference "
                f"{ref:.4g} (the limit is divergence_factor={self.divergence_factor:g})"
            )
        fixes = " or ".join(self._fixes())
        return f"training diverged at {where}: {what} [{kind}]. Fix: {fixes}"

    def _constant_name(self) -> str:
        """The constant prediction of :meth:`_constant_loss`, in words."""
        if self.task == "classification":
            return "uniform class probabilities"
        return "the targets' running mean"

    def _fixes(self, *, learning_rate: bool = True) -> list[str]:
        """What to change against a divergence, or (``learning_rate=False``: the untrained
        model is not the learning rate's doing) a poor start."""
        fixes = []
        if not self.scale_inputs:
            fixes.append("scale the inputs (scale_inputs=True)")
        if self.task == "regression" and not self.scale_targets:
            fixes.append("scale the targets (scale_targets=True)")
        if learning_rate:
            fixes.append(f"lower the learning rate (lr={self.lr:g})")
        elif not fixes:
            fixes.append("check the module's initial outputs on these inputs")
        return fixes

    @torch.no_grad()
    def _snapshot(self) -> Snapshot:
        """Parameters, optimiser state and scalers before a step (``on_divergence="skip"``),
        the tensors copied with one fused clone each."""
        assert self.optimizer is not None
        params = list(torch._foreach_clone(self._weights))
        entries = [(p, k, v) for p, s in self.optimizer.state.items() for k, v in s.items()]
        tensors = [v for _, _, v in entries if isinstance(v, torch.Tensor)]
        copies = iter(torch._foreach_clone(tensors) if tensors else [])
        state: dict[Any, dict[str, Any]] = {}
        for p, k, v in entries:
            state.setdefault(p, {})[k] = next(copies) if isinstance(v, torch.Tensor) else v
        scalers = [
            None if s is None else s.snapshot() for s in (self.input_scaler, self.target_scaler)
        ]
        return params, state, scalers

    @torch.no_grad()
    def _restore(self, saved: Snapshot) -> None:
        params, state, scalers = saved
        assert self.optimizer is not None
        torch._foreach_copy_(self._weights, params)
        self.optimizer.state.clear()
        self.optimizer.state.update(state)
        for scaler, snap in zip((self.input_scaler, self.target_scaler), scalers):
            if scaler is not None and snap is not None:
                scaler.restore(snap)
