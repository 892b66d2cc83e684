"""Detection of divergent training: a non-finite loss, non-finite parameters after a step, or a
loss that explodes against its own reference.

The explosion rule. Let ``L_t`` be the mean training loss of step ``t``, ``m_t`` the median of
the last ``window`` (64) accepted step losses, and ``L_init`` the mean loss of the model *as
initialised* on the first ``warmup_rows`` (32) rows, measured with a frozen copy of the initial
module. Once ``L_init`` is known, step ``t`` explodes when

    L_t > factor * r_t,    r_t = min(max(m_t, L_init), ceiling * L_init)

with ``factor = 1e4`` and ``ceiling = 100``: the running median, kept between the untrained
model's loss and 100 times that loss.

* The floor ``L_init`` (about ``log k`` for ``k`` classes, about the variance of a standardised
  target) keeps the reference away from zero once a classifier becomes certain: float32
  cross-entropy then rounds to exactly 0, and a plain median would make any wrong row an
  explosion.
* The median lets the reference follow a loss level that rises (after a drift), but a median
  above ``100 * L_init`` (a model a hundred times worse than an untrained one on its typical
  step) is itself a blow-up; following it would hide one that starts in the first steps.
* The copy of the initial module keeps ``L_init`` clean of a learning rate that blows up in
  the very first steps.

Measured with ``scripts/bench_divergence_check.py ratios`` (test-then-train, default MLP spec):
healthy runs on the built-in streams at learning rates 0.001 to 0.05 (0.2x to 10x the default)
stay at or below ``850 * r_t`` at batch size 1 and below ``100 * r_t`` at 4, and the shared real
data sets at the default below ``3900 * r_t`` (adult at batch size 1, row 20,363: a rare category,
seen in 6 earlier rows, standardised to 54). Learning rate 10 on Friedman and 1 or 10 on
California housing pass ``1e4 * r_t`` within 7 to 140 steps; Friedman at learning rate 1, which
blows up slowly and partly recovers, only after 1,078 (batch size 1) or 3,788 (4) steps.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Mapping
from typing import Literal

__all__ = [
    "DIVERGENCE_ACTIONS",
    "EXPLODING_LOSS",
    "NON_FINITE_LOSS",
    "NON_FINITE_PARAMETERS",
    "DivergenceError",
    "DivergenceWarning",
    "LossMonitor",
    "OnDivergence",
]

OnDivergence = Literal["raise", "warn", "skip"]
DIVERGENCE_ACTIONS: tuple[str, ...] = ("raise", "warn", "skip")

NON_FINITE_LOSS = "non-finite loss"
NON_FINITE_PARAMETERS = "non-finite parameters"
EXPLODING_LOSS = "exploding loss"


class DivergenceError(ValueError):
    """Training diverged at a step: the message names the row, the loss and what to change."""


class DivergenceWarning(RuntimeWarning):
    """A divergent step that ``on_divergence="warn"`` or ``"skip"`` let pass."""


class LossMonitor:
    """The reference of the explosion rule (see the module docstring) and its state.

    >>> m = LossMonitor(factor=10.0, window=4, warmup_rows=2)
    >>> m.add_initial(0.5, 2)  # the initial model's mean loss on the first 2 rows
    >>> for loss in (1.0, 3.0, 2.0):
    ...     m.accept(loss)
    >>> m.reference()  # median of [1, 3, 2], within [0.5, 100 * 0.5]
    2.0
    >>> m.exploded(19.0), m.exploded(21.0)
    (False, True)
    """

    def __init__(
        self,
        factor: float = 1e4,
        *,
        window: int = 64,
        warmup_rows: int = 32,
        ceiling: float = 100.0,
    ) -> None:
        if not factor > 1:
            raise ValueError(
                f"divergence_factor must be > 1 (inf turns the rule off), got {factor!r}"
            )
        if window < 1 or warmup_rows < 1:
            raise ValueError(f"window and warmup_rows must be >= 1, got {window}, {warmup_rows}")
        self.factor = float(factor)
        self.ceiling = float(ceiling)
        self.window = window
        self.warmup_rows = warmup_rows
        self.reset()

    def reset(self) -> None:
        self._recent: deque[float] = deque()
        self._sorted: list[float] = []
        self._init_sum = 0.0
        self._init_rows = 0
        self._safe = math.inf  # losses up to factor * L_init never explode: no median needed

    def _set_safe(self) -> None:
        if not self.warming_up:
            self._safe = self.factor * (self._init_sum / self._init_rows)

    @property
    def warming_up(self) -> bool:
        """Whether ``L_init`` still wants rows (:meth:`add_initial`)."""
        return self._init_rows < self.warmup_rows

    def add_initial(self, mean_loss: float, n_rows: int) -> None:
        """The initial model's mean loss on the next ``n_rows`` rows (non-finite: ignored)."""
        if self.warming_up and math.isfinite(mean_loss) and n_rows > 0:
            self._init_sum += mean_loss * n_rows
            self._init_rows += n_rows
            self._set_safe()

    def reference(self) -> float | None:
        """The median of the recent losses, kept between ``L_init`` and ``ceiling * L_init``;
        ``None`` while warming up."""
        if self.warming_up:
            return None
        level = self._init_sum / self._init_rows
        s, n = self._sorted, len(self._sorted)
        if not n:
            return level
        median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
        return min(max(median, level), self.ceiling * level)

    def exploded(self, loss: float) -> bool:
        """Whether the finite ``loss`` breaks the rule (never while warming up or while the
        reference is 0)."""
        ref = self.reference()
        return ref is not None and ref > 0 and loss > self.factor * ref

    def observe(self, loss: float) -> bool:
        """Whether the finite ``loss`` explodes; if it does not, it joins the history."""
        if loss > self._safe and self.exploded(loss):
            return True
        self.accept(loss)
        return False

    def accept(self, loss: float) -> None:
        """Add a finite step loss to the recent history."""
        self._recent.append(loss)
        bisect.insort(self._sorted, loss)
        if len(self._recent) > self.window:
            old = self._recent.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, old)]

    def state_dict(self) -> dict[str, object]:
        return {
            "recent": list(self._recent),
            "init_sum": self._init_sum,
            "init_rows": self._init_rows,
        }

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        self.reset()
        recent = [float(v) for v in state["recent"]]  # type: ignore[attr-defined]
        self._recent.extend(recent[-self.window :])
        self._sorted = sorted(self._recent)
        self._init_sum = float(state["init_sum"])  # type: ignore[arg-type]
        self._init_rows = int(state["init_rows"])  # type: ignore[call-overload]
        self._set_safe()
