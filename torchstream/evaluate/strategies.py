"""Evaluation strategies: which rows each predictor is tested and trained on at a step.

A strategy is a small object that the runner (:class:`~torchstream.evaluate.Evaluator`) asks,
once per step, for a :class:`StepPlan`: the rows to test on (the fresh batch, or a holdout set),
which of the ``k`` instances of every predictor test, and with which integer weight each row of
the batch trains each instance (0: not at all; 3: three times, i.e. sampling with
replacement). Three strategies of Haug's float paper [^1] (§4):

* :class:`TestThenTrain` — prequential: test every instance on the batch, then train on it;
* :class:`PeriodicHoldout` — test every ``test_interval`` steps on a holdout set that never
  reaches training, optionally refreshed with every ``replace_every``-th row of the stream;
* :class:`DistributedKFold` — ``k`` instances of every predictor; per step one tests and the
  others train (``"cross"``), the reverse (``"split"``), or Poisson(1) weights
  (``"bootstrap"``: instances with weight 0 test) [^2].

References
----------
[^1]: J. Haug, E. Tramountani, G. Kasneci (2022). Standardized evaluation of machine learning
    methods for evolving data streams. arXiv:2204.13625.
[^2]: A. Bifet, G. de Francisci Morales, J. Read, G. Holmes, B. Pfahringer (2015). Efficient
    online evaluation of big data stream classifiers. *KDD 2015*, 59-68.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch

__all__ = ["DistributedKFold", "PeriodicHoldout", "StepPlan", "Strategy", "TestThenTrain",
           "derived_seed", "get_strategy"]


@dataclass
class StepPlan:
    """What happens at one step.

    Attributes
    ----------
    test_X, test_y
        Rows to test on (None: no test at this step).
    testers
        ``[k]`` bool: which instances test at this step.
    train_weights
        ``[B, k]`` integer weights of the batch's rows for the ``k`` instances (0: not trained).
    """

    test_X: torch.Tensor | None
    test_y: torch.Tensor | None
    testers: torch.Tensor
    train_weights: torch.Tensor


class Strategy:
    """Base class: ``n_instances`` copies of each predictor, a plan per step, a state."""

    name = "strategy"
    n_instances = 1

    def plan(self, step: int, X: torch.Tensor, y: torch.Tensor, *, last: bool) -> StepPlan:
        raise NotImplementedError

    def state_dict(self) -> dict[str, object]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _ones(n: int, k: int, device: torch.device) -> torch.Tensor:
    return torch.ones(n, k, dtype=torch.long, device=device)


class TestThenTrain(Strategy):
    """Prequential evaluation: every step tests on the fresh batch, then trains on it.

    >>> s = TestThenTrain()
    >>> p = s.plan(0, torch.zeros(3, 2), torch.zeros(3), last=False)
    >>> p.testers.tolist(), p.train_weights.squeeze(1).tolist()
    ([True], [1, 1, 1])
    """

    __test__ = False  # not a pytest class
    name = "prequential"

    def plan(self, step: int, X: torch.Tensor, y: torch.Tensor, *, last: bool) -> StepPlan:
        return StepPlan(X, y, torch.ones(1, dtype=torch.bool), _ones(X.shape[0], 1, X.device))


class PeriodicHoldout(Strategy):
    """Periodic holdout: test on a fixed-size holdout set every ``test_interval`` steps.

    The first ``holdout_size`` rows of the evaluation (after pre-training; default: the first
    batch) form the holdout set and are never trained on. Steps with
    ``step % test_interval == 0``, and the last step, test; the others record NaN. With
    ``replace_every = r``, every ``r``-th row of the evaluation (global index ``i`` with
    ``(i + 1) % r == 0``) is appended to the holdout set, the oldest rows are dropped so its size
    stays fixed, and that row is *not* trained on either (no leak into training). With
    ``replace_every=None`` the holdout set never changes: valid only when the concept is stable.

    >>> s = PeriodicHoldout(test_interval=2, holdout_size=2)
    >>> X, y = torch.arange(8.0).reshape(4, 2), torch.tensor([0, 1, 0, 1])
    >>> p = s.plan(0, X, y, last=False)
    >>> p.test_X.tolist(), p.train_weights.squeeze(1).tolist()
    ([[0.0, 1.0], [2.0, 3.0]], [0, 0, 1, 1])
    >>> s.plan(1, X, y, last=False).test_X is None
    True
    """

    name = "holdout"

    def __init__(
        self, test_interval: int = 10, *, holdout_size: int | None = None,
        replace_every: int | None = None,
    ) -> None:
        for arg, v in (("test_interval", test_interval), ("holdout_size", holdout_size),
                       ("replace_every", replace_every)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ValueError(f"{arg} must be a positive integer, got {v!r}")
        self.test_interval = test_interval
        self.holdout_size = holdout_size
        self.replace_every = replace_every
        self.holdout_X: torch.Tensor | None = None
        self.holdout_y: torch.Tensor | None = None
        self.n_seen = 0

    def plan(self, step: int, X: torch.Tensor, y: torch.Tensor, *, last: bool) -> StepPlan:
        n = X.shape[0]
        weights = _ones(n, 1, X.device)
        size = self.holdout_size or n
        have = 0 if self.holdout_X is None else self.holdout_X.shape[0]
        if have < size:  # still filling the holdout set
            take = min(size - have, n)
            self._append(X[:take], y[:take])
            weights[:take] = 0
        if self.replace_every is not None:
            idx = torch.arange(self.n_seen, self.n_seen + n, device=X.device)
            chosen = ((idx + 1) % self.replace_every == 0).nonzero().flatten()
            chosen = chosen[weights[chosen, 0] == 1]  # rows not already taken to fill the set
            if chosen.numel():
                self._append(X[chosen], y[chosen])
                weights[chosen] = 0
                assert self.holdout_X is not None and self.holdout_y is not None
                self.holdout_X = self.holdout_X[-size:]
                self.holdout_y = self.holdout_y[-size:]
        self.n_seen += n
        if step % self.test_interval == 0 or last:
            return StepPlan(self.holdout_X, self.holdout_y, torch.ones(1, dtype=torch.bool),
                            weights)
        return StepPlan(None, None, torch.zeros(1, dtype=torch.bool), weights)

    def _append(self, X: torch.Tensor, y: torch.Tensor) -> None:
        if self.holdout_X is None or self.holdout_y is None:
            self.holdout_X, self.holdout_y = X.clone(), y.clone()
        else:
            self.holdout_X = torch.cat([self.holdout_X, X])
            self.holdout_y = torch.cat([self.holdout_y, y])

    def state_dict(self) -> dict[str, object]:
        return {"holdout_X": self.holdout_X, "holdout_y": self.holdout_y, "n_seen": self.n_seen}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.holdout_X, self.holdout_y = state["holdout_X"], state["holdout_y"]
        self.n_seen = state["n_seen"]

    def __repr__(self) -> str:
        return (f"PeriodicHoldout(test_interval={self.test_interval}, "
                f"holdout_size={self.holdout_size}, replace_every={self.replace_every})")


class DistributedKFold(Strategy):
    """Distributed k-fold evaluation [^2]: ``k`` instances of every predictor side by side.

    Per step (one draw per batch, as in float):

    * ``"cross"``: one instance, uniformly at random, tests; the other ``k - 1`` train;
    * ``"split"``: one instance trains; the other ``k - 1`` test;
    * ``"bootstrap"``: every instance draws ``w_i ~ Poisson(1)``; instances with ``w_i = 0``
      test, the others train on the batch repeated ``w_i`` times (sampling with replacement).

    The draws come from the strategy's own generator, seeded with ``seed``; ``seed=None`` draws
    a seed from the operating system and records it in :attr:`seed` (and the ``repr``), so the
    run can be repeated. The generator's state is part of :meth:`state_dict`.

    >>> s = DistributedKFold(k=4, mode="cross", seed=0)
    >>> p = s.plan(0, torch.zeros(2, 3), torch.zeros(2), last=False)
    >>> int(p.testers.sum()), p.train_weights[0].tolist()
    (1, [0, 1, 1, 1])
    """

    name = "kfold"

    def __init__(
        self, k: int = 10, *, mode: Literal["cross", "split", "bootstrap"] = "cross",
        seed: int | None = 0,
    ) -> None:
        if not isinstance(k, int) or isinstance(k, bool) or k < 2:
            raise ValueError(f"k (the number of folds) must be an integer >= 2, got {k!r}")
        if mode not in ("cross", "split", "bootstrap"):
            raise ValueError(f"mode must be 'cross', 'split' or 'bootstrap', got {mode!r}")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise ValueError(f"seed must be None or an integer, got {seed!r}")
        self.k = k
        self.mode = mode
        self.generator = torch.Generator()
        #: The seed of the draws (drawn from the operating system when none was given).
        self.seed: int = self.generator.seed() if seed is None else seed
        self.generator.manual_seed(self.seed)
        self._seed_given = seed is not None

    @property
    def n_instances(self) -> int:  # type: ignore[override]
        return self.k

    def plan(self, step: int, X: torch.Tensor, y: torch.Tensor, *, last: bool) -> StepPlan:
        n, k = X.shape[0], self.k
        if self.mode == "bootstrap":
            w = torch.poisson(torch.ones(k, dtype=torch.float64), generator=self.generator).long()
            testers = w == 0
        else:
            pick = int(torch.randint(k, (1,), generator=self.generator))
            chosen = torch.zeros(k, dtype=torch.bool)
            chosen[pick] = True
            testers = chosen if self.mode == "cross" else ~chosen
            w = (~testers).long()
        weights = w.to(X.device).expand(n, k).clone()
        return StepPlan(X, y, testers, weights)

    def state_dict(self) -> dict[str, object]:
        return {"generator": self.generator.get_state(), "k": self.k, "mode": self.mode,
                "seed": self.seed}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the generator. A state of another ``k`` or ``mode``, or of another ``seed``
        than the one given to this strategy, is refused; an unseeded strategy takes the
        state's seed."""
        keys = ("k", "mode", "seed") if self._seed_given else ("k", "mode")
        differ = [f"{key}: state {state[key]!r}, this strategy {getattr(self, key)!r}"
                  for key in keys if key in state and state[key] != getattr(self, key)]
        if differ:
            raise ValueError("the k-fold state is of another strategy (" + "; ".join(differ)
                             + ")")
        self.generator.set_state(state["generator"])
        if "seed" in state:
            self.seed = int(state["seed"])

    def __repr__(self) -> str:
        return f"DistributedKFold(k={self.k}, mode={self.mode!r}, seed={self.seed})"


def derived_seed(seed: int, purpose: str) -> int:
    """A seed in ``[0, 2**63)`` for ``purpose`` derived from a run's ``seed`` (the first 8 bytes
    of SHA-256 of ``"<purpose>/<seed>"``), so that generators of one run seeded from the same
    number draw independent sequences.

    >>> derived_seed(0, "kfold") == derived_seed(0, "kfold") != derived_seed(1, "kfold")
    True
    """
    digest = hashlib.sha256(f"{purpose}/{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def get_strategy(strategy: str | Strategy | None, *, run_seed: int | None = None,
                 **kwargs: Any) -> Strategy:
    """A strategy object from a name (``"prequential"``, ``"holdout"``, ``"kfold"``) and its
    keyword arguments, or the object itself.

    ``run_seed``: the seed of the run. A named ``"kfold"`` without its own ``seed`` argument
    draws with :func:`derived_seed` ``(run_seed, "kfold")``; ``None`` leaves it unseeded (a seed
    drawn from the operating system, recorded in the strategy)."""
    if strategy is None:
        strategy = "prequential"
    if isinstance(strategy, Strategy):
        if kwargs:
            raise ValueError(f"strategy arguments {sorted(kwargs)} given with a strategy object")
        return strategy
    kinds = {"prequential": TestThenTrain, "holdout": PeriodicHoldout, "kfold": DistributedKFold}
    if strategy not in kinds:
        raise ValueError(f"unknown strategy {strategy!r}; known: {sorted(kinds)}")
    if strategy == "kfold" and "seed" not in kwargs:
        kwargs["seed"] = None if run_seed is None else derived_seed(run_seed, "kfold")
    return kinds[strategy](**kwargs)
