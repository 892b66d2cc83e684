"""Simulated label delay: rows wait in a buffer until their label "arrives"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["LabelDelay"]


class LabelDelay:
    """Every row gets an arrival step ``t + U{min_delay, ..., max_delay - 1}`` (upper bound
    exclusive, as numpy's ``integers``) when it is tested at step ``t``; the rows whose arrival
    step is ``<= t`` are released for training at step ``t``. Testing always uses the fresh
    batch. Rows still waiting when the stream ends are **not** trained on (no final flush).

    >>> delay = LabelDelay(2, 3)  # always 2 steps
    >>> w = torch.ones(2, 1, dtype=torch.long)
    >>> for t in range(4):
    ...     X, y, _ = delay.push_and_release(t, torch.full((2, 1), float(t)), torch.zeros(2), w)
    ...     print(t, X.flatten().tolist())
    0 []
    1 []
    2 [0.0, 0.0]
    3 [1.0, 1.0]
    """

    def __init__(self, min_delay: int, max_delay: int, *, seed: int | None = 0) -> None:
        for arg, v in (("min_delay", min_delay), ("max_delay", max_delay)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{arg} must be a non-negative integer, got {v!r}")
        if max_delay <= min_delay:
            raise ValueError(
                f"label delay range ({min_delay}, {max_delay}) is empty: the upper bound is "
                "exclusive, so max_delay must exceed min_delay (e.g. (5, 6) for always 5)"
            )
        self.min_delay, self.max_delay = min_delay, max_delay
        self.generator = torch.Generator()
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)
        self._X: torch.Tensor | None = None
        self._y: torch.Tensor | None = None
        self._w: torch.Tensor | None = None
        self._arrival = torch.zeros(0, dtype=torch.long)

    @property
    def n_waiting(self) -> int:
        return int(self._arrival.numel())

    def push_and_release(
        self, step: int, X: torch.Tensor, y: torch.Tensor, weights: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Add the batch tested at ``step`` and return the rows (and their training weights)
        whose labels have arrived by ``step``."""
        delay = torch.randint(self.min_delay, self.max_delay, (X.shape[0],),
                              generator=self.generator)
        arrival = step + delay
        if self._X is None or self._y is None or self._w is None:
            self._X, self._y, self._w = X, y, weights
        else:
            self._X = torch.cat([self._X, X])
            self._y = torch.cat([self._y, y])
            self._w = torch.cat([self._w, weights])
        self._arrival = torch.cat([self._arrival, arrival])
        ready = self._arrival <= step
        out = (self._X[ready.to(self._X.device)], self._y[ready.to(self._y.device)],
               self._w[ready.to(self._w.device)])
        keep = ~ready
        self._X, self._y = self._X[keep.to(self._X.device)], self._y[keep.to(self._y.device)]
        self._w, self._arrival = self._w[keep.to(self._w.device)], self._arrival[keep]
        return out

    def state_dict(self) -> dict[str, object]:
        return {"X": self._X, "y": self._y, "w": self._w, "arrival": self._arrival,
                "generator": self.generator.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._X, self._y, self._w = state["X"], state["y"], state["w"]
        self._arrival = state["arrival"]
        self.generator.set_state(state["generator"])

    def __repr__(self) -> str:
        return f"LabelDelay({self.min_delay}, {self.max_delay})"
