"""Torch models for online learning, their parameter-distribution heads, and the TOML model
specs that configure them."""

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
from torchstream.models.specs import ModelSpec, available_specs, load_spec

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
