"""The iPDP frequency storage: the last values of one feature that passed an entrance coin."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from torchstream.explain.storage._common import (
    _as_values,
    _check_int,
    _check_prob,
    _TensorStorage,
)

__all__ = ["FrequencyStorage"]


class FrequencyStorage(_TensorStorage):
    """The last ``size`` values that passed an entrance coin, oldest first (iPDP App. B.2,
    Alg. 3 [PDP]_); its empirical quantiles track the distribution of a feature.

    The first ``size`` values fill the storage. Afterwards each value enters with probability
    ``entrance_prob`` (``P(E)``) and then pushes out the *oldest* stored value (FIFO). The
    storage therefore covers about the last ``size / entrance_prob`` values. (The paper's
    pseudo-code lacks the ``else`` between the fill phase and the coin; here a value that fills
    the storage never also triggers a replacement.)

    Parameters
    ----------
    size
        Number of stored values ``L``.
    entrance_prob
        Probability in ``(0, 1]`` that a value arriving at a full storage enters.
    seed
        Seed of the storage's generator (``None``: drawn once from the operating system).
    dtype, device
        Of the stored values.

    Examples
    --------
    >>> fs = FrequencyStorage(size=4, entrance_prob=0.5, seed=42)
    >>> fs.update(torch.arange(10.0))
    >>> fs.values.tolist(), fs.times.tolist()
    ([5.0, 6.0, 7.0, 9.0], [5, 6, 7, 9])
    >>> fs.quantile(0.5).item()
    6.5

    References
    ----------
    .. [PDP] M. Muschalik, F. Fumagalli, R. Jagtani, B. Hammer, E. Hüllermeier (2023). iPDP: on
       partial dependence plots in dynamic modeling scenarios. *xAI 2023*, CCIS 1901, 177-194.
    """

    _data_key = "values"

    def __init__(
        self,
        size: int,
        *,
        entrance_prob: float = 1.0,
        seed: int | None = 0,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        self.size = _check_int(size, "size")
        self.entrance_prob = _check_prob(entrance_prob, "entrance_prob")
        self._init_random(seed)
        self._data = torch.zeros(0, dtype=dtype, device=device)
        self._times = torch.zeros(0, dtype=torch.long, device=device)

    @property
    def values(self) -> torch.Tensor:
        """The stored values ``[len]``, oldest first."""
        return self._data

    def __len__(self) -> int:
        return self._data.shape[0]

    def update(self, values: torch.Tensor) -> None:
        """Offer the values ``[B]`` (in time order)."""
        values = _as_values(values, self.dtype, self.device)
        b = values.shape[0]
        times = torch.arange(self.n_seen, self.n_seen + b, device=self.device)
        n_fill = min(self.size - len(self), b)
        m = b - n_fill
        if m > 0 and self.entrance_prob < 1.0:
            # one coin per value that meets a full storage, all drawn at once
            u = torch.rand(m, dtype=torch.float64, generator=self.generator)
            keep = torch.cat([torch.ones(n_fill, dtype=torch.bool), u < self.entrance_prob])
            keep = keep.to(self.device)
            values, times = values[keep], times[keep]
        values, times = values[-self.size :], times[-self.size :]  # only these can stay
        self._data = torch.cat([self._data, values])[-self.size :].clone()
        self._times = torch.cat([self._times, times])[-self.size :].clone()
        self.n_seen += b

    def quantile(self, q: float | torch.Tensor) -> torch.Tensor:
        """Empirical ``q``-quantile(s) of the stored values (linear interpolation); a 0-d tensor
        for a float ``q``, ``[k]`` for ``q`` of shape ``[k]``."""
        if len(self) == 0:
            raise ValueError("FrequencyStorage is empty: update it before asking for quantiles")
        q_t = torch.as_tensor(q, dtype=self.dtype, device=self.device)
        if q_t.dim() > 1 or not bool(((q_t >= 0) & (q_t <= 1)).all()):
            raise ValueError(f"q must be a float or a 1-D tensor of values in [0, 1], got {q!r}")
        return torch.quantile(self._data, q_t)

    def _config(self) -> dict[str, object]:
        return {"size": self.size, "entrance_prob": self.entrance_prob}

    def _load_content(self, state: Mapping[str, Any]) -> None:
        self._data = torch.as_tensor(state["values"]).to(self.device, self.dtype).clone()
        self._times = torch.as_tensor(state["times"]).to(self.device, torch.long).clone()

    def __repr__(self) -> str:
        return (
            f"FrequencyStorage(size={self.size}, entrance_prob={self.entrance_prob}, "
            f"len={len(self)}, n_seen={self.n_seen})"
        )
