"""What every ``compile=True`` path shares (the learner's step, the explainers' batches).

A compiled path runs one function through ``torch.compile(dynamic=False, fullgraph=True)``
[PT2]_, one graph per input shape, on a private copy of the function (:func:`compile_private`:
its own code object, so one object's graphs never count against another's recompile limit).
:class:`CompileSwitch` holds its state: whether it was asked for (``compile``), why it was
turned off (``compile_off_reason``, said once in a ``RuntimeWarning``; the eager path runs from
then on) and the one-off compile time (``compile_seconds``: the first call of each key). The
first call of a key runs with torch's recompile limit raising instead of falling back to eager
frames without a word, so that every failure to compile is said. The compiler stack
(``torch._dynamo``) is imported by torch at the first compile, not with this module.

.. [PT2] J. Ansel et al. (2024). PyTorch 2: faster machine learning through dynamic Python
   bytecode transformation and graph compilation. *ASPLOS '24*, 929-947.
"""

from __future__ import annotations

import time
import types
import warnings
from collections.abc import Callable, Hashable
from typing import TypeVar

import torch

__all__ = ["CompileSwitch", "compile_private"]

R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., object])


def compile_private(fn: F) -> F:
    """``fn`` compiled with ``torch.compile(dynamic=False, fullgraph=True)`` on a private copy
    of it (its own code object, the same globals, defaults and closure)."""
    copy = types.FunctionType(
        fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    compiled: F = torch.compile(copy, dynamic=False, fullgraph=True)  # type: ignore[assignment]
    return compiled


class CompileSwitch:
    """Mixin: the state of a ``compile=True`` path and its first calls."""

    # class-level defaults: an object pickled before ``compile`` existed loads as eager
    #: Whether the work runs as compiled graphs (the constructor's ``compile``).
    compile: bool = False
    #: Seconds spent compiling (the first call of each key); 0 before.
    compile_seconds: float = 0.0
    #: Why the compiled path is off (None: on, or not asked for).
    compile_off_reason: str | None = None

    def _init_compiled(self, compile: bool) -> None:
        if not isinstance(compile, bool):
            raise TypeError(f"compile must be True or False, got {compile!r}")
        self.compile = compile
        self.compile_seconds = 0.0
        self.compile_off_reason = None

    @property
    def _compiled_on(self) -> bool:
        return self.compile and self.compile_off_reason is None

    def _compile_off(self, reason: str, stacklevel: int = 4) -> None:
        """Turn the compiled path off for good, saying why (once)."""
        self.compile_off_reason = reason
        warnings.warn(
            f"{type(self).__name__}(compile=True): {reason}; the eager path runs instead",
            RuntimeWarning,
            stacklevel=stacklevel,
        )

    def _first_call(
        self, keys: set[Hashable], key: Hashable, fn: Callable[[], R], stacklevel: int = 5
    ) -> R | None:
        """``fn()`` at the first call of ``key`` (added to ``keys``): timed into
        :attr:`compile_seconds`; on any failure the path is turned off and None returned."""
        start = time.perf_counter()
        try:
            with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
                out = fn()
        except Exception as exc:  # no compiler, a graph break, an unsupported model
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            self._compile_off(f"torch.compile failed ({type(exc).__name__}: {first})",
                              stacklevel)
            return None
        keys.add(key)
        self.compile_seconds += time.perf_counter() - start
        return out
