"""The explainers' side of a ``compile=True`` path (iPFI, iSAGE, iPDP).

:class:`CompiledPath` adds to :class:`~torchstream.compiling.CompileSwitch` what an explainer
needs around its own compiled step function: the torch module behind a model function, the
compiled call itself (under ``no_grad``; the first call of each batch shape timed) and the
explainer's random generators put back when a batch has to be redone eagerly.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

import torch
from torch import nn

from torchstream.compiling import CompileSwitch
from torchstream.explain.smoothing import ExponentialSmoother
from torchstream.typing import ModelFn

__all__ = ["CompiledPath"]

R = TypeVar("R")
Saved = tuple[tuple[torch.Generator, torch.Tensor], ...]
Plan = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


class CompiledPath(CompileSwitch):
    """Mixin: the helpers of an explainer's compiled path."""

    def _init_compiled(self, compile: bool) -> None:
        super()._init_compiled(compile)
        self._compiled_keys: set[Hashable] = set()
        self._rn: torch.Tensor | None = None  # (1 - alpha)^n, an input of the compiled steps

    def _ema_inputs(
        self, smoother: ExponentialSmoother, b: int, fold: bool
    ) -> tuple[torch.Tensor, Plan | None]:
        """The smoother's state a compiled step folds ``b`` rows into: ``(1 - alpha)^n`` as a
        0-d tensor beside its raw value (0 with ``init="first"``: no debiasing) and, where the
        step folds a batch of ``b > 1`` rows (``fold``), its prefix weights."""
        raw = smoother.raw
        rn = self._rn
        if rn is None or rn.device != raw.device or rn.dtype != raw.dtype:
            rn = self._rn = torch.zeros((), dtype=raw.dtype, device=raw.device)
        rn.fill_(0.0 if smoother.init == "first" else (1.0 - smoother.alpha) ** smoother.n)
        if not fold or b == 1:
            return rn, None
        m, ri, w, _, _ = smoother._plan(b)
        return rn, (m, ri, w)

    def _module_of(self, model_fn: ModelFn) -> nn.Module | None:
        """The torch module computing ``model_fn``: a learner's ``network`` (its whole
        prediction: input scaling, module, output; fetched every batch so that it follows the
        learner), or ``model_fn`` itself; None (and the compiled path off) for anything else."""
        if isinstance(getattr(type(model_fn), "network", None), property):
            try:
                network = model_fn.network  # type: ignore[attr-defined]
            except RuntimeError:  # no module built yet: this batch runs eagerly
                return None
            if isinstance(network, nn.Module):
                return network
        if isinstance(model_fn, nn.Module):
            return model_fn
        self._compile_off(
            f"the model ({type(model_fn).__name__}) is not a torch module and has no "
            f"'network' module"
        )
        return None

    def _compiled_batch(self, X: torch.Tensor, y: torch.Tensor, model_fn: ModelFn) -> bool:
        """A loss explainer's batch through :meth:`_fused_explain` where the path is on and
        ``model_fn`` has a torch module; False: the batch runs eagerly."""
        if not self._compiled_on:
            return False
        module = self._module_of(model_fn)
        return module is not None and self._fused_explain(X, y, module)

    def _fused_explain(self, X: torch.Tensor, y: torch.Tensor, module: nn.Module) -> bool:
        raise NotImplementedError  # pragma: no cover - per explainer

    def _call_compiled(self, key: Hashable, fn: Callable[[], R], saved: Saved = ()) -> R | None:
        """``fn()`` under ``no_grad``; its first call for ``key`` compiles (timed into
        :attr:`compile_seconds`). Where it raises (no compiler, an unsupported model or
        platform) the generators ``saved`` before the batch's draws
        (:meth:`_save_generators`) are put back, the path is turned off for good and None
        returned."""

        def run() -> R:
            with torch.no_grad():
                return fn()

        if key not in self._compiled_keys:
            out = self._first_call(self._compiled_keys, key, run, stacklevel=7)
        else:
            try:
                out = run()
            except Exception as exc:
                self._compile_off(f"torch.compile failed ({type(exc).__name__}: {exc})")
                out = None
        if out is None:
            self._restore_generators(saved)
        return out

    @staticmethod
    def _fold_step(
        smoother: ExponentialSmoother, folded: bool, raw: torch.Tensor, sq_dev: torch.Tensor,
        values: Callable[[], torch.Tensor], b: int,
    ) -> None:
        """Keep a compiled step's EMA: its new ``raw`` and ``sq_dev`` where it folded the ``b``
        rows itself (``folded``), else the smoother's own update with ``values()``."""
        if folded:
            smoother.raw, smoother.sq_dev = raw, sq_dev
            smoother.n += b
        else:
            smoother.update(values())

    def _passed(self, ok: torch.Tensor, saved: Saved) -> bool:
        """Whether a compiled step's flag ``ok`` passed; if not, the generators ``saved`` before
        its draws are put back, so that the batch is redone eagerly (raising the usual error
        naming the row)."""
        if bool(ok):
            return True
        self._restore_generators(saved)
        return False

    @staticmethod
    def _save_generators(generators: Iterable[torch.Generator]) -> Saved:
        """The states of ``generators``, to put back with :meth:`_restore_generators`."""
        return tuple((g, g.get_state()) for g in generators)

    @staticmethod
    def _restore_generators(saved: Saved) -> None:
        for g, state in saved:
            g.set_state(state)
