"""Synthetic streams with known drift, built on river's generators.

Every stream here is restartable and deterministic: each pass builds a fresh river generator
with the same seed, so two passes over one stream yield the same rows. ``seed=None`` draws a
random seed once, when the stream is built (passes over that stream are still identical).
``n_samples=None`` makes a generator stream infinite.

:class:`ConceptDrift` joins two streams with an abrupt or gradual drift and nests, so
``ConceptDrift(ConceptDrift(a, b, ...), c, ...)`` gives a stream with several drifts.
:data:`SYNTHETIC` and :func:`make_synthetic` name a few ready-made benchmark streams.

Example
-------
>>> stream = make_synthetic("agrawal-drift", n_samples=1_000)
>>> len(stream), stream.drift_positions, stream.classes
(1000, (500,), [0, 1])
>>> X, y = next(stream.batches(4))
>>> X.shape, y.tolist()
(torch.Size([4, 9]), [1, 1, 1, 0])
"""

from __future__ import annotations

from torchstream.streams.synthetic._common import DEFAULT_N_SAMPLES as DEFAULT_N_SAMPLES
from torchstream.streams.synthetic.agrawal import Agrawal
from torchstream.streams.synthetic.concept_drift import ConceptDrift
from torchstream.streams.synthetic.friedman import Friedman
from torchstream.streams.synthetic.hyperplane import Hyperplane
from torchstream.streams.synthetic.registry import SYNTHETIC, agrawal_drift, make_synthetic
from torchstream.streams.synthetic.sea import SEA
from torchstream.streams.synthetic.stagger import STAGGER

__all__ = [
    "SEA",
    "STAGGER",
    "SYNTHETIC",
    "Agrawal",
    "ConceptDrift",
    "Friedman",
    "Hyperplane",
    "agrawal_drift",
    "make_synthetic",
]
