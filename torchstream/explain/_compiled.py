"""The bookkeeping every ``compile=True`` path shares (iPFI, iSAGE, iPDP).

:class:`CompiledPath` holds what an explainer needs around its own compiled step function:
whether the path is on (``compile``), why it was turned off (``compile_off_reason``, said once
in a warning), the one-off compile time (``compile_seconds``, counted on the first call of
each key, i.e. each batch shape), the torch module behind a model function, and a call that
restores the explainer's random generators when a batch has to be redone eagerly.
"""

from __future__ import annotations

import time
import types
import warnings
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

import torch
from torch import nn

from torchstream.typing import ModelFn

__all__ = ["CompiledPath", "compile_private"]

R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., object])
Saved = tuple[tuple[torch.Generator, torch.Tensor], ...]


def compile_private(fn: F) -> F:
    """``fn`` compiled with ``torch.compile(dynamic=False, fullgraph=True)``, on a private copy
    of it (its own code object: the compiled graphs of one explainer, one per batch shape, do
    not count against another's recompile limit)."""
    copy = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__,
                              fn.__defaults__)
    compiled: F = torch.compile(copy, dynamic=False, fullgraph=True)  # type: ignore[assignment]
    return compiled


class CompiledPath:
    """Mixin: the state and helpers of an explainer's compiled path."""

    #: Whether batches run as one compiled function (the explainer's ``compile``).
    compile: bool
    #: Seconds spent compiling (the first call of each batch shape); 0 before.
    compile_seconds: float
    #: Why the compiled path is off (None: on, or not asked for).
    compile_off_reason: str | None

    def _init_compiled(self, compile: bool) -> None:
        self.compile = bool(compile)
        self.compile_seconds = 0.0
        self.compile_off_reason = None
        self._compiled_keys: set[Hashable] = set()

    @property
    def _compiled_on(self) -> bool:
        return self.compile and self.compile_off_reason is None

    def _compile_off(self, reason: str) -> None:
        """Turn the compiled path off for good, saying why (once)."""
        self.compile_off_reason = reason
        warnings.warn(
            f"{type(self).__name__}(compile=True): {reason}; the eager path runs instead",
            RuntimeWarning,
            stacklevel=4,
        )

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

    def _call_compiled(
        self,
        key: Hashable,
        fn: Callable[[], R],
        saved: Saved = (),
    ) -> R | None:
        """``fn()`` under ``no_grad``, timed into :attr:`compile_seconds` the first time
        ``key`` is seen. Where it raises (no compiler, an unsupported model or platform) the
        generators ``saved`` before the batch's draws (:meth:`_save_generators`) are put
        back, the path is turned off for good and None returned."""
        start = time.perf_counter()
        try:
            with torch.no_grad():
                out = fn()
        except Exception as exc:
            self._restore_generators(saved)
            self._compile_off(f"torch.compile failed ({type(exc).__name__}: {exc})")
            return None
        if key not in self._compiled_keys:
            self._compiled_keys.add(key)
            self.compile_seconds += time.perf_counter() - start
        return out

    @staticmethod
    def _save_generators(generators: Iterable[torch.Generator]) -> Saved:
        """The states of ``generators``, to put back with :meth:`_restore_generators`."""
        return tuple((g, g.get_state()) for g in generators)

    @staticmethod
    def _restore_generators(saved: Saved) -> None:
        for g, state in saved:
            g.set_state(state)
