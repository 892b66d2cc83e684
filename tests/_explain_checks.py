"""Checks shared by the explainer tests."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

import torch


def resumed_and_whole(
    make: Callable[[int], Any], batches: Sequence[tuple[torch.Tensor, torch.Tensor]], split: int
) -> tuple[Any, Any]:
    """Explain all batches with one explainer, and the same batches with a second one that is
    checkpointed after ``split`` batches (through ``torch.save``) and resumed in a third,
    differently seeded explainer; return ``(resumed, whole)`` and assert their estimates agree
    bit for bit."""
    whole = make(0)
    for X, y in batches:
        whole.explain(X, y)
    first = make(0)
    for X, y in batches[:split]:
        first.explain(X, y)
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    resumed = make(123)
    resumed.load_state_dict(torch.load(buf, weights_only=True))
    for X, y in batches[split:]:
        resumed.explain(X, y)
    assert torch.equal(resumed.importance, whole.importance)
    assert torch.equal(resumed.importance_raw, whole.importance_raw)
    assert torch.equal(resumed.half_width(), whole.half_width())
    assert resumed.n_explained == whole.n_explained
    return resumed, whole


def river_linear_fn(weights: dict[str, float], intercept: float) -> tuple[Any, Any]:
    """A river ``LinearRegression`` with hand-set weights, as a ModelFn through the adapters;
    returns ``(schema, model_fn)``."""
    from river import linear_model
    from river import utils as river_utils

    from torchstream.learners.adapters import as_model_fn
    from torchstream.schema import Schema

    schema = Schema(list(weights))
    model = linear_model.LinearRegression()
    model._weights = river_utils.VectorDict(dict(weights))
    model.intercept = intercept
    return schema, as_model_fn(model, schema=schema)
