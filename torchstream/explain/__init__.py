"""Explanations on streams: incremental global explainers (iPFI, iSAGE, iPDP, pairwise SAGE
interactions, two-feature iPDP with Friedman's H²) and their building blocks; local
attributions through captum with streaming baselines, and the ablation test."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchstream._lazy import lazy_names

if TYPE_CHECKING:
    from torchstream.explain.ablation import AblationResult, ablation_test, compare_attributions
    from torchstream.explain.baselines import (
        BASELINES,
        Baseline,
        BlurredBaseline,
        ConstantBaseline,
        EWMABaseline,
        ExpectationBaseline,
        GaussianBaseline,
        MaxDistanceBaseline,
        NeutralBaseline,
        UniformBaseline,
        make_baseline,
    )
    from torchstream.explain.conditional import ConditionalTreeSampler
    from torchstream.explain.imputers import MarginalImputer
    from torchstream.explain.interaction import IncrementalInteraction
    from torchstream.explain.ipdp import IncrementalPDP
    from torchstream.explain.ipdp2d import IncrementalPDP2D, h_squared
    from torchstream.explain.ipfi import IncrementalPFI
    from torchstream.explain.isage import IncrementalSAGE
    from torchstream.explain.local import METHODS, LocalAttribution, LocalAttributor
    from torchstream.explain.smoothing import ExponentialSmoother, alpha_for_window
    from torchstream.explain.storage import (
        FrequencyStorage,
        FreshSampler,
        GeometricReservoir,
        RollingExtremes,
        UniformReservoir,
    )

__all__ = [
    "BASELINES",
    "METHODS",
    "AblationResult",
    "Baseline",
    "BlurredBaseline",
    "ConditionalTreeSampler",
    "ConstantBaseline",
    "EWMABaseline",
    "ExpectationBaseline",
    "ExponentialSmoother",
    "FrequencyStorage",
    "FreshSampler",
    "GaussianBaseline",
    "GeometricReservoir",
    "IncrementalInteraction",
    "IncrementalPDP",
    "IncrementalPDP2D",
    "IncrementalPFI",
    "IncrementalSAGE",
    "LocalAttribution",
    "LocalAttributor",
    "MarginalImputer",
    "MaxDistanceBaseline",
    "NeutralBaseline",
    "RollingExtremes",
    "UniformBaseline",
    "UniformReservoir",
    "ablation_test",
    "alpha_for_window",
    "compare_attributions",
    "h_squared",
    "make_baseline",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "torchstream.explain.ablation": ("AblationResult", "ablation_test", "compare_attributions"),
    "torchstream.explain.baselines": (
        "BASELINES", "Baseline", "BlurredBaseline", "ConstantBaseline", "EWMABaseline",
        "ExpectationBaseline", "GaussianBaseline", "MaxDistanceBaseline", "NeutralBaseline",
        "UniformBaseline", "make_baseline",
    ),
    "torchstream.explain.conditional": ("ConditionalTreeSampler",),
    "torchstream.explain.imputers": ("MarginalImputer",),
    "torchstream.explain.interaction": ("IncrementalInteraction",),
    "torchstream.explain.ipdp": ("IncrementalPDP",),
    "torchstream.explain.ipdp2d": ("IncrementalPDP2D", "h_squared"),
    "torchstream.explain.ipfi": ("IncrementalPFI",),
    "torchstream.explain.isage": ("IncrementalSAGE",),
    "torchstream.explain.local": ("METHODS", "LocalAttribution", "LocalAttributor"),
    "torchstream.explain.smoothing": ("ExponentialSmoother", "alpha_for_window"),
    "torchstream.explain.storage": (
        "FrequencyStorage", "FreshSampler", "GeometricReservoir", "RollingExtremes",
        "UniformReservoir",
    ),
})
