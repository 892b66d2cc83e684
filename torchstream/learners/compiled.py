"""``compile=True`` of an online learner: its training step and prediction as compiled graphs.

At one row per step the time of a step goes mostly to launching its many small operations (each
linear layer, activation, the loss, their gradients), not to the arithmetic. Two functions are
compiled with ``torch.compile(dynamic=False, fullgraph=True)`` [PT2]_, one graph per batch shape:

* the training step: forward pass, mean loss and its gradients with respect to the trainable
  parameters, ``(params, X, target) -> (loss, outputs, grads)``, the backward pass taken inside
  the graph by ``torch.func.grad_and_value`` (AOTAutograd traces forward and backward into one
  graph). The graph runs without autograd: at one row the per-call cost of autograd's runtime
  around a compiled forward (its saved tensors, the compiled backward's own call) outweighs
  the kernels it runs. The gradients are then set as ``p.grad`` (as ``zero_grad(set_to_none)``
  and ``backward()`` would) and the optimiser steps. One difference from eager: a trainable
  parameter that takes no part in the loss gets a zero gradient (eager: none, and no step);
* the prediction, ``X -> outputs``: the module and its output (class probabilities through the
  softmax or the binary link; for regression the values, before the inverse target scaling).

Everything whose state changes from step to step stays eager around the graphs, so that no step
recompiles: the running input and target scaling, the frozen initial module that measures the
explosion rule's ``L_init`` (the first rows only), the optimiser step (still the fused Adam
kernel, :func:`~torchstream.learners.fused_adam.fused_adam_step`), the divergence check and the
snapshot of ``on_divergence="skip"``. A prediction that keeps autograd (``learner(X)`` with
gradients enabled, for gradient attributions) runs eagerly.

The graphs are built for the module as it is: its parameter list and, for a classifier, the
number of classes seen. When either changes (a new class widens the output layer, a new feature
the input layer, ``to(device)``, ``load_state_dict``) they are rebuilt on the next call, on a
private copy of the functions (their own code objects: one learner's graphs never count against
another's recompile limit). They are never pickled or copied: a copy rebuilds its own.

Where compiling fails (no C compiler, a module that cannot be captured as one graph, a loss that
reads values back to Python, the recompile limit), a ``RuntimeWarning`` says why, once, and the
eager path runs from then on; :attr:`~CompiledLearner.compile_off_reason` keeps the reason and
:attr:`~CompiledLearner.compile_seconds` the one-off compile time.

.. [PT2] J. Ansel et al. (2024). PyTorch 2: faster machine learning through dynamic Python
   bytecode transformation and graph compilation. *ASPLOS '24*, 929-947.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import torch
from torch import nn

from torchstream.compiling import CompileSwitch, compile_private

from torchstream.learners.network import RegressionOutput
from torchstream.learners.scaling import RunningStandardizer

__all__ = ["CompiledLearner"]

TrainFn = Callable[
    [list[torch.Tensor], torch.Tensor, torch.Tensor],
    tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]],
]
PredictFn = Callable[[torch.Tensor], torch.Tensor]


def _train_fn(module: nn.Module, loss: Callable[..., torch.Tensor], names: list[str]) -> TrainFn:
    mean = getattr(loss, "mean", None)  # a fused mean where the loss has one

    def train(
        params: list[torch.Tensor], X: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """The step's mean loss (the learner's eager step, op for op), the module's outputs
        and the loss's gradients with respect to ``params`` (the parameters ``names``)."""

        def objective(ps: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
            out = torch.func.functional_call(module, dict(zip(names, ps)), (X,))
            value = mean(out, target) if mean is not None else loss(out, target).mean()
            return value, out

        grads, (value, out) = torch.func.grad_and_value(objective, has_aux=True)(params)
        return value, out, grads

    return train


def _predict_fn(module: nn.Module, head: nn.Module) -> PredictFn:
    def predict(X: torch.Tensor) -> torch.Tensor:
        """The prediction's outputs (probabilities, or values before the inverse target
        scaling)."""
        return head(module(X))

    return predict


class _Graphs:
    """The compiled functions of one module state, and the call keys compiled so far."""

    def __init__(
        self, params: list[torch.Tensor], n_seen: int, module: nn.Module, head: nn.Module,
        loss: Callable[..., torch.Tensor],
    ) -> None:
        self.params = params  # the learner's parameter list they were built for
        self.n_seen = n_seen
        # the parameters a step differentiates (a frozen one gets no gradient, as in eager)
        self.trainable = [p for p in params if p.requires_grad]
        name_of = {id(p): n for n, p in module.named_parameters()}
        self.names = [name_of.get(id(p)) for p in self.trainable]
        names = [n for n in self.names if n is not None]
        self.train: TrainFn = compile_private(_train_fn(module, loss, names))
        self.predict: PredictFn = compile_private(_predict_fn(module, head))
        self.keys: set[Hashable] = set()


class CompiledLearner(CompileSwitch):
    """Mixin of :class:`~torchstream.learners.OnlineLearner`: its ``compile=True`` path (the
    state, :attr:`compile_off_reason` and :attr:`compile_seconds`, is
    :class:`~torchstream.compiling.CompileSwitch`'s)."""

    _graphs: _Graphs | None = None  # class-level: a learner pickled before loads as eager

    # set by the learner
    task: str
    classes_: list[Hashable]
    module: nn.Module | None
    input_scaler: RunningStandardizer | None
    target_scaler: RunningStandardizer | None
    _weights: list[torch.Tensor]
    _train_loss: Callable[..., torch.Tensor]

    def _init_compiled(self, compile: bool) -> None:
        super()._init_compiled(compile)
        self._graphs = None

    def _output_module(self) -> nn.Module:  # pragma: no cover - per task
        raise NotImplementedError

    def _compile_off(self, reason: str, stacklevel: int = 7) -> None:
        self._graphs = None
        super()._compile_off(reason, stacklevel)

    def _current_graphs(self) -> _Graphs | None:
        """The compiled functions for the module as it is now (built, or rebuilt, on demand);
        None when the compiled path is off."""
        if not self.compile or self.compile_off_reason is not None or self.module is None:
            return None
        n_seen = len(self.classes_) if self.task == "classification" else 0
        g = self._graphs
        if g is None or g.params is not self._weights or g.n_seen != n_seen:
            # regression: the inverse target scaling stays outside the graph (see the module)
            head = RegressionOutput(None) if self.task == "regression" else self._output_module()
            g = self._graphs = _Graphs(self._weights, n_seen, self.module, head, self._train_loss)
            if None in g.names:
                self._compile_off("the optimiser holds parameters that are not the module's")
                return None
        return g

    def _compiled_train(
        self, X: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Forward pass, mean loss and gradients of a step on the (scaled) inputs ``X``, the
        gradients set as ``p.grad`` (not accumulated); ``(loss, outputs)``, or None where the
        step must run eagerly (nothing changed then)."""
        g = self._current_graphs()
        if g is None:
            return None

        def run() -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
            with torch.no_grad():  # the graph takes its own gradients
                return g.train(g.trainable, X, target)

        key = ("train", X.shape, X.dtype, X.device, target.shape, target.dtype)
        res = run() if key in g.keys else self._first_call(g.keys, key, run, stacklevel=7)
        if res is None:
            return None
        loss, out, grads = res
        for p in self._weights:  # zero_grad(set_to_none=True), then the step's gradients
            p.grad = None
        for p, grad in zip(g.trainable, grads):
            p.grad = grad
        return loss, out

    def _compiled_predict(self, X: torch.Tensor) -> torch.Tensor | None:
        """The learner's outputs for the unscaled inputs ``X`` (without autograd), or None where
        the prediction must run eagerly."""
        g = self._current_graphs()
        if g is None:
            return None
        if self.input_scaler is not None:
            X = self.input_scaler.transform(X)
        inference = torch.is_inference_mode_enabled()
        key = ("predict", X.shape, X.dtype, X.device, inference)
        if key in g.keys:
            out = g.predict(X)
        else:
            res = self._first_call(g.keys, key, lambda: g.predict(X), stacklevel=7)
            if res is None:
                return None
            out = res
        if self.target_scaler is not None:
            out = self.target_scaler.inverse(out.view(-1, 1)).view(-1)
        return out
