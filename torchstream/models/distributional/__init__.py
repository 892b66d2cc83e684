"""Models whose weights are independent Gaussians ``N(mu, sigma)`` learned by gradient ascent on
the log marginal likelihood: the base models of FIRES (feature selection) and ERICS (drift
detection), plus a label-free autoencoder (an extension).

:func:`check_positive` checks their positive settings (learning rates, noise) and those of the
detectors built on a head; :func:`~torchstream.models.distributional.placement.to_head` puts a
batch where a head computes."""

from torchstream.models.distributional._base import (
    GaussianHead,
    ParameterDistribution,
    check_positive,
)
from torchstream.models.distributional._monte_carlo import LIKELIHOODS, MonteCarloHead
from torchstream.models.distributional.autoencoder import AutoencoderHead
from torchstream.models.distributional.mlp import MLPHead, mlp_feature_aggregation
from torchstream.models.distributional.probit import (
    ProbitHead,
    inverse_mills_ratio,
    probit_log_likelihood,
    probit_log_likelihood_grad,
)
from torchstream.models.distributional.soft_tree import SoftTreeHead, tree_feature_aggregation

__all__ = [
    "LIKELIHOODS",
    "AutoencoderHead",
    "GaussianHead",
    "MLPHead",
    "MonteCarloHead",
    "ParameterDistribution",
    "ProbitHead",
    "SoftTreeHead",
    "check_positive",
    "inverse_mills_ratio",
    "mlp_feature_aggregation",
    "probit_log_likelihood",
    "probit_log_likelihood_grad",
    "tree_feature_aggregation",
]
