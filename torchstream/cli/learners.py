"""Learners of the command line beyond the learners layer: importing this module registers the
Dynamic Model Tree (Haug et al., ICDE 2022) as ``"dmt"`` with
:func:`~torchstream.learners.registry.register_learner`, so ``run``, ``evaluate`` and ``sweep``
know it by name.

>>> from torchstream.learners.registry import available_learners
>>> "dmt" in available_learners()
True
"""

from __future__ import annotations

from torchstream.base import Learner
from torchstream.learners.online import resolve_device
from torchstream.learners.registry import LearnerOptions, register_learner
from torchstream.streams.base import Stream
from torchstream.trees import DynamicModelTree

__all__ = ["make_dmt"]


def make_dmt(stream: Stream, options: LearnerOptions) -> Learner:
    """A Dynamic Model Tree for a classification stream; ``options.lr`` is the node models'
    learning rate (default the paper's 0.05), ``options.device`` where they live (``"auto"``
    or none: the tree's default, the CPU, which is faster than a GPU for its small models)."""
    if stream.task != "classification":
        raise ValueError(f"the Dynamic Model Tree is a classifier; the stream is for {stream.task}")
    auto = options.device in (None, "auto")
    kwargs: dict[str, object] = {"device": "cpu" if auto else resolve_device(options.device)}
    if options.lr is not None:
        kwargs["learning_rate"] = options.lr
    return DynamicModelTree.for_stream(stream, **kwargs)


register_learner("dmt", make_dmt, kind="dynamic model tree", uses=("lr",))
