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

The comparison with a constant. ``L_const`` is the mean loss of a constant prediction on the
same first rows: raw outputs 0, that is uniform class probabilities (``log k`` for ``k``
outputs) or, for standardised regression targets, their running mean (about 1 for the squared
error). It is measured for the built-in losses on classification and on standardised
regression targets; with a callable loss or ``scale_targets=False`` the targets' unit is the
caller's, no constant is known to be trivial, and neither rule below applies.

* A poor start is said: when ``L_init > ceiling * L_const`` (the untrained model a hundred times
  worse than a constant: unscaled inputs of large magnitude), a warning at the end of the
  warm-up gives the ratio and the fix. A model that starts so far off may still learn (river's
  TrumpApproval, unscaled: ``6e7`` times a constant at first, below it after 200 rows), so
  this is not a divergence; but until it learns its errors dominate any metric averaged over
  the run (inputs of magnitude ``1.6e9`` made a run's mean squared error ``1e13`` times the
  targets' variance).
* A model far worse than a constant and getting worse diverges: once ``window`` losses are
  accepted after the warm-up, step ``t`` is ``worse than a constant`` when

      m_t > factor * L_const    and    m_t > ceiling * b_t

  with ``b_t`` the lowest running median of the earlier steps: a typical step ten thousand
  times worse than a constant, and a hundred times worse than the model once was. A reference
  taken from ``L_init`` alone never stops such a run when ``L_init`` itself is huge (the
  explosion rule then waits for ``1e6 * L_init``). Healthy runs keep ``m_t`` below
  ``310 * L_const`` (the synthetic streams and the shared real data sets, 10,000 rows, at
  learning rates 0.005 and 0.05, batch sizes 1 and 4; the most: California housing at 0.05,
  batch size 1, a median 306 times ``L_const`` at step 1,082; most runs stay below 3 times).

Measured with ``scripts/bench_divergence_check.py ratios`` (test-then-train, default MLP spec):
healthy runs on the built-in streams at learning rates 0.001 to 0.05 (0.2x to 10x the default)
stay at or below ``850 * r_t`` at batch size 1 and below ``100 * r_t`` at 4, and the shared real
data sets at the default below ``3900 * r_t`` (adult at batch size 1, row 20,363: a rare category,
seen in 6 earlier rows, standardised to 54). Learning rate 10 on Friedman and 1 or 10 on
California housing pass ``1e4 * r_t`` within 7 to 140 steps; Friedman at learning rate 1, which
blows up slowly and partly recovers, only after 1,078 (batch size 1) or 3,788 (4) steps.
California housing on unscaled inputs at the default learning rate (a run's mean squared error
465 times the targets' variance) is a poor start, said: ``L_init`` is 527 times ``L_const``;
its median stays below ``1.2e3 * L_const``, so it is not stopped.
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
    "WORSE_THAN_CONSTANT",
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
WORSE_THAN_CONSTANT = "worse than a constant"


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

    A model far worse than a constant prediction, and getting worse (``window`` losses
    accepted, the median 100 times its lowest and above ``factor * L_const``):

    >>> m = LossMonitor(factor=10.0, window=2, warmup_rows=1)
    >>> m.add_initial(500.0, 1, constant=1.0)  # L_init = 500, L_const = 1: a poor start
    >>> m.poor_start()
    500.0
    >>> [m.observe(loss) for loss in (1.0, 1.0, 300.0)]  # medians 1, 1, then 150.5
    [None, None, 'worse than a constant']
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
        self._const_sum = 0.0  # the constant prediction's losses on the same rows
        self._const_rows = 0
        self._best = math.inf  # the lowest running median of a full window after the warm-up
        self._evicted: float | None = None  # the loss the last accept() pushed out (retract)
        self._safe = math.inf  # losses up to factor * L_init never explode: no median needed

    def _set_safe(self) -> None:
        if not self.warming_up:
            self._safe = self.factor * (self._init_sum / self._init_rows)

    @property
    def initial_loss(self) -> float | None:
        """``L_init``: the untrained model's mean loss on the warm-up rows (None before)."""
        return None if self.warming_up else self._init_sum / self._init_rows

    @property
    def constant_loss(self) -> float | None:
        """``L_const``: a constant prediction's mean loss on the warm-up rows (None before, or
        where none was measured)."""
        if self.warming_up or not self._const_rows:
            return None
        return self._const_sum / self._const_rows

    def poor_start(self) -> float | None:
        """``L_init / L_const`` where it exceeds ``ceiling`` (the untrained model far worse than
        a constant prediction); None otherwise, while warming up or without ``L_const``."""
        init, const = self.initial_loss, self.constant_loss
        if init is None or const is None or not const > 0 or not init > self.ceiling * const:
            return None
        return init / const

    def median(self) -> float | None:
        """The median of the last ``window`` accepted losses (None before there are that many)."""
        s, n = self._sorted, len(self._sorted)
        if n < self.window:
            return None
        return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])

    @property
    def lowest_median(self) -> float:
        """``b_t``: the lowest running median of the earlier steps (inf before any)."""
        return self._best

    @property
    def warming_up(self) -> bool:
        """Whether ``L_init`` still wants rows (:meth:`add_initial`)."""
        return self._init_rows < self.warmup_rows

    def add_initial(
        self, mean_loss: float, n_rows: int, *, constant: float | None = None
    ) -> None:
        """The initial model's mean loss on the next ``n_rows`` rows (non-finite: ignored),
        and a constant prediction's (``constant``; None where no constant is trivial)."""
        if self.warming_up and math.isfinite(mean_loss) and n_rows > 0:
            self._init_sum += mean_loss * n_rows
            self._init_rows += n_rows
            if constant is not None and math.isfinite(constant):
                self._const_sum += constant * n_rows
                self._const_rows += n_rows
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

    def observe(self, loss: float) -> str | None:
        """The rule the finite ``loss`` breaks (:data:`EXPLODING_LOSS`, which leaves it out of
        the history, or :data:`WORSE_THAN_CONSTANT`, which keeps it: :meth:`retract` takes it
        back), or None; an unbroken loss joins the history."""
        if loss > self._safe and self.exploded(loss):
            return EXPLODING_LOSS
        self.accept(loss)
        const = self.constant_loss
        if const is None or not const > 0:  # unknown, or targets constant so far
            return None
        median = self.median()
        if median is None:
            return None
        if median > self.factor * const and median > self.ceiling * self._best:
            return WORSE_THAN_CONSTANT
        self._best = min(self._best, median)
        return None

    def accept(self, loss: float) -> None:
        """Add a finite step loss to the recent history."""
        self._recent.append(loss)
        bisect.insort(self._sorted, loss)
        self._evicted = None
        if len(self._recent) > self.window:
            old = self._evicted = self._recent.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, old)]

    def retract(self) -> None:
        """Undo the last :meth:`accept` (a step undone after it joined the history)."""
        loss = self._recent.pop()
        del self._sorted[bisect.bisect_left(self._sorted, loss)]
        if self._evicted is not None:
            self._recent.appendleft(self._evicted)
            bisect.insort(self._sorted, self._evicted)
        self._evicted = None

    def state_dict(self) -> dict[str, object]:
        return {
            "recent": list(self._recent),
            "init_sum": self._init_sum,
            "init_rows": self._init_rows,
            "constant_sum": self._const_sum,
            "constant_rows": self._const_rows,
            "lowest_median": self._best,
        }

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        self.reset()
        recent = [float(v) for v in state["recent"]]  # type: ignore[attr-defined]
        self._recent.extend(recent[-self.window :])
        self._sorted = sorted(self._recent)
        self._init_sum = float(state["init_sum"])  # type: ignore[arg-type]
        self._init_rows = int(state["init_rows"])  # type: ignore[call-overload]
        self._const_sum = float(state["constant_sum"])  # type: ignore[arg-type]
        self._const_rows = int(state["constant_rows"])  # type: ignore[call-overload]
        self._best = float(state["lowest_median"])  # type: ignore[arg-type]
        self._set_safe()
