"""Argument and input checks shared by the models in :mod:`torchstream.models`."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import torch
from torch import nn

__all__ = ["ACTIVATIONS", "check_hidden", "check_input", "check_int", "make_activation"]

ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "gelu": nn.GELU,
    "leaky_relu": nn.LeakyReLU,
}


def make_activation(name: str, argument: str = "activation") -> nn.Module:
    """A fresh activation module from its name (one of :data:`ACTIVATIONS`)."""
    try:
        factory = ACTIVATIONS[name]
    except (KeyError, TypeError):
        known = ", ".join(repr(k) for k in ACTIVATIONS)
        raise ValueError(f"{argument} must be one of {known}, got {name!r}") from None
    return factory()


def check_int(value: object, argument: str, minimum: int = 1) -> int:
    """``value`` as an ``int`` that is at least ``minimum``; the error names ``argument``."""
    if isinstance(value, bool):
        raise TypeError(f"{argument} must be an integer, got {value!r}")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{argument} must be an integer, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{argument} must be >= {minimum}, got {number}")
    return number


def check_hidden(hidden: int | Sequence[int], argument: str = "hidden") -> tuple[int, ...]:
    """Hidden layer widths as a tuple of positive ints (a single int means one layer)."""
    if isinstance(hidden, (str, bytes)):
        raise TypeError(f"{argument} must be a sequence of layer widths, got {hidden!r}")
    if not isinstance(hidden, Sequence):
        return (check_int(hidden, argument),)
    return tuple(check_int(h, f"{argument}[{i}]") for i, h in enumerate(hidden))


def check_input(x: torch.Tensor, width: int, owner: str, argument: str = "x") -> None:
    """Raise ``ValueError`` unless ``x`` is a 2-D tensor ``[B, width]``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: {argument} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(
            f"{owner}: expected {argument} of shape [B, {width}] (2-D), got shape {tuple(x.shape)}"
        )
    if x.shape[1] != width:
        raise ValueError(
            f"{owner}: expected {argument} of width {width} ([B, {width}]), got width {x.shape[1]}"
        )


class OutputLayerWidth:
    """Mixin for models with an ``output_layer`` (``nn.Linear``): ``n_outputs`` is its width.

    Assigning ``n_outputs`` is allowed only with the width the layer already has (replace the
    layer to change the width, as the learner does when a new class appears)."""

    output_layer: nn.Linear

    @property
    def n_outputs(self) -> int:
        return self.output_layer.out_features

    @n_outputs.setter
    def n_outputs(self, value: int) -> None:
        if value != self.output_layer.out_features:
            raise ValueError(
                f"n_outputs={value!r} does not match output_layer.out_features="
                f"{self.output_layer.out_features}; replace output_layer to change the width"
            )
