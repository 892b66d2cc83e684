"""Torch models for online learning, their parameter-distribution heads, and the TOML model
specs that configure them.

Each name is imported from its submodule on first use: naming the specs
(:func:`available_specs`) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchstream._lazy import lazy_names

if TYPE_CHECKING:
    from torchstream.models.autoencoder import Autoencoder
    from torchstream.models.distributional import (
        AutoencoderHead,
        MLPHead,
        ProbitHead,
        SoftTreeHead,
    )
    from torchstream.models.mlp import MLP
    from torchstream.models.probit import Probit
    from torchstream.models.soft_tree import SoftDecisionTree
    from torchstream.models.spec_files import available_specs
    from torchstream.models.specs import ModelSpec, load_spec

__all__ = [
    "MLP",
    "Autoencoder",
    "AutoencoderHead",
    "MLPHead",
    "ModelSpec",
    "Probit",
    "ProbitHead",
    "SoftDecisionTree",
    "SoftTreeHead",
    "available_specs",
    "load_spec",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "torchstream.models.autoencoder": ("Autoencoder",),
    "torchstream.models.distributional": ("AutoencoderHead", "MLPHead", "ProbitHead",
                                          "SoftTreeHead"),
    "torchstream.models.mlp": ("MLP",),
    "torchstream.models.probit": ("Probit",),
    "torchstream.models.soft_tree": ("SoftDecisionTree",),
    "torchstream.models.spec_files": ("available_specs",),
    "torchstream.models.specs": ("ModelSpec", "load_spec"),
})
