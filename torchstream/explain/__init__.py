"""Incremental explanations: iPFI, iSAGE, iPDP and their building blocks."""

from torchstream.explain.imputers import MarginalImputer
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.explain.smoothing import ExponentialSmoother, alpha_for_window
from torchstream.explain.storage import (
    FreshSampler,
    FrequencyStorage,
    GeometricReservoir,
    RollingExtremes,
    UniformReservoir,
)

__all__ = [
    "IncrementalPFI",
    "IncrementalSAGE",
    "IncrementalPDP",
    "ExponentialSmoother",
    "alpha_for_window",
    "GeometricReservoir",
    "UniformReservoir",
    "FrequencyStorage",
    "RollingExtremes",
    "FreshSampler",
    "MarginalImputer",
]
