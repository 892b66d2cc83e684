"""Torch models for online learning, and the TOML model specs that configure them."""

from torchstream.models.autoencoder import Autoencoder
from torchstream.models.mlp import MLP
from torchstream.models.probit import Probit
from torchstream.models.soft_tree import SoftDecisionTree
from torchstream.models.specs import ModelSpec, available_specs, load_spec

__all__ = [
    "MLP",
    "Autoencoder",
    "ModelSpec",
    "Probit",
    "SoftDecisionTree",
    "available_specs",
    "load_spec",
]
