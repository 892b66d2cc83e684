"""``torchstream list``: the built-in streams, model specs, other learners and reproductions.

The stream and learner names are written here rather than read from their registries, whose
modules import torch and river (seconds) for what is a list of names;
``tests/test_cli_startup.py`` checks them against the registries. The model specs (the
built-ins and the files of ``TORCHSTREAM_MODELS``) and the reproductions are found as they are
at each call.
"""

from __future__ import annotations

import argparse

from torchstream.models.spec_files import available_specs
from torchstream.reproductions import available

__all__ = ["LEARNERS", "STREAMS", "list_command"]

#: The synthetic streams' names (``torchstream.streams.SYNTHETIC``), sorted.
STREAMS = ("agrawal", "agrawal-drift", "friedman", "hyperplane", "sea", "sea-drift", "stagger",
           "stagger-drift")
#: The registered learners of the command line
#: (``torchstream.learners.registry.registered_learners()``), in registration order.
LEARNERS = ("hoeffding_tree", "hoeffding_adaptive_tree", "naive_bayes", "logistic_regression",
            "perceptron", "dmt")


def list_command(args: argparse.Namespace) -> int:
    """Print the names, one kind a line."""
    print("streams:", ", ".join(STREAMS), "| a CSV path | river:<Dataset>")
    print("models: ", ", ".join(available_specs()), "| a model spec TOML path")
    print("other learners:", ", ".join(LEARNERS))
    print("reproductions:", ", ".join(available()), "| all (`torchstream reproduce`)")
    return 0
