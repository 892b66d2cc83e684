"""Noise variability (float paper, A.6 Eq. 1) as a plug-in of the evaluation loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from torchstream.evaluate.measures.predictor import noise_variability
from torchstream.typing import BatchView

__all__ = ["NoiseVariability"]


class NoiseVariability:
    """At every step, ``NV_t = mean_n [L(y, f(X + z_n)) - L(y, f(X))]`` of the first predictor
    *before* it learns the batch (:func:`~torchstream.evaluate.measures.noise_variability`).

    Parameters
    ----------
    loss
        The reference measure ``L`` (a loss name, a ``MetricSpec`` or a callable).
    n_samples
        Noise draws ``N`` per step (one batched model call of ``N * B`` rows).
    noise_scale, noise_loc
        The additive Gaussian noise of the continuous columns (``noise_scale`` is a standard
        deviation).
    cat_features
        Columns replaced by a random value of the column instead.
    seed
        Seed of the noise generator.

    :attr:`values` keeps ``NV_t`` of the last ``max_values`` steps (in order; default 10,000),
    :attr:`n_dropped` counts the older ones dropped (each step's value also goes to the sinks).
    """

    name = "noise_variability"

    def __init__(
        self, loss: Any = "zero_one", *, n_samples: int = 15, noise_scale: float = 0.1,
        noise_loc: float = 0.0, cat_features: Sequence[int] = (), seed: int = 0,
        max_values: int = 10_000,
    ) -> None:
        if not isinstance(n_samples, int) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
        if not isinstance(max_values, int) or isinstance(max_values, bool) or max_values < 1:
            raise ValueError(f"max_values must be a positive integer, got {max_values!r}")
        self.max_values, self.n_dropped = max_values, 0
        self.loss, self.n_samples = loss, n_samples
        self.noise_scale, self.noise_loc = noise_scale, noise_loc
        self.cat_features = tuple(cat_features)
        self.generator = torch.Generator().manual_seed(seed)
        self.values: list[float] = []

    def on_batch(self, batch: BatchView) -> dict[str, float]:
        with torch.no_grad():
            nv = noise_variability(
                batch.learner, batch.X, batch.y, self.loss, generator=self.generator,
                n_samples=self.n_samples, noise_loc=self.noise_loc,
                noise_scale=self.noise_scale, cat_features=self.cat_features,
                y_pred=batch.y_pred,
            )
        self.values.append(float(nv))
        if len(self.values) > self.max_values:
            del self.values[0]
            self.n_dropped += 1
        return {"value": float(nv)}

    def state_dict(self) -> dict[str, object]:
        return {"generator": self.generator.get_state(), "values": list(self.values),
                "n_dropped": self.n_dropped}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        values = list(state["values"])
        cut = max(len(values) - self.max_values, 0)
        self.values = values[cut:]
        self.n_dropped = int(state.get("n_dropped", 0)) + cut
