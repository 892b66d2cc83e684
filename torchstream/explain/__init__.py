"""Incremental explanations: iPFI, iSAGE, iPDP and their building blocks."""

from torchstream.explain.conditional import ConditionalTreeSampler
from torchstream.explain.imputers import MarginalImputer
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.explain.smoothing import ExponentialSmoother, alpha_for_window
from torchstream.explain.storage import (
    FrequencyStorage,
    FreshSampler,
    GeometricReservoir,
    RollingExtremes,
    UniformReservoir,
)

__all__ = [
    "ConditionalTreeSampler",
    "ExponentialSmoother",
    "FrequencyStorage",
    "FreshSampler",
    "GeometricReservoir",
    "IncrementalPDP",
    "IncrementalPFI",
    "IncrementalSAGE",
    "MarginalImputer",
    "RollingExtremes",
    "UniformReservoir",
    "alpha_for_window",
]
