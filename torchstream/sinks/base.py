"""The :class:`Sink` contract (:mod:`torchstream.base`) and the tag convention shared by all
sinks.

A sink receives the run configuration once (``log_config``), then scalar values keyed by tag
at every logged step (``log_scalars``), and is closed at the end of the run (``close``);
``log_figure`` and ``flush`` are optional, no-ops on :class:`SinkBase`.

Tags are slash-separated and grouped into charts:

* ``"category/chart/series"`` is the series ``series`` of chart ``chart`` in ``category``, so
  ``"metrics/accuracy/cumulative"`` and ``"metrics/accuracy/window"`` share the chart
  ``"accuracy"`` of category ``"metrics"`` (further parts stay in the series name);
* ``"category/name"`` is the series ``name`` of the chart ``category`` in ``category``, so an
  explainer's per-feature series (``"ipfi/age"``, ``"ipfi/salary"``) share one chart;
* a one-part tag ``"name"`` is the chart ``name`` in category ``"misc"``.

A sink that writes several TensorBoard runs names their directories with
:func:`escape_run_name` (reversed by :func:`unescape_run_name`), so that any feature or predictor
name is one directory level.

>>> chart_of("metrics/accuracy/window"), chart_of("ipfi/age"), chart_of("lr")
(('metrics', 'accuracy'), ('ipfi', 'ipfi'), ('misc', 'lr'))
>>> group_tags(["metrics/accuracy/cumulative", "metrics/accuracy/window", "lr"])
{'metrics': {'accuracy': ['metrics/accuracy/cumulative', 'metrics/accuracy/window']}, 'misc': {'lr': ['lr']}}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote

from torchstream.base import Sink, SinkBase

__all__ = ["MISC", "Sink", "SinkBase", "as_scalar", "chart_of", "escape_run_name", "group_tags",
           "unescape_run_name"]

MISC = "misc"


def chart_of(tag: str) -> tuple[str, str]:
    """The ``(category, chart)`` a tag belongs to, by the module's tag convention."""
    parts = tag.split("/")
    if len(parts) == 1:
        return MISC, tag
    if len(parts) == 2:
        return parts[0], parts[0]
    return parts[0], parts[1]


#: Characters kept as they are in a run directory's name; every other one is percent-encoded.
_SAFE = "-_.+=,@ ()[]"


def escape_run_name(name: str) -> str:
    """``name`` as one directory level: ``/``, ``%``, ``\\``, control and other odd characters
    are percent-encoded (UTF-8), as is a leading ``.`` (so ``.`` and ``..`` stay names);
    :func:`unescape_run_name` reverses it. ``ValueError`` for an empty name.

    >>> escape_run_name("elevel"), escape_run_name("price/m²"), escape_run_name("..")
    ('elevel', 'price%2Fm%C2%B2', '%2E.')
    >>> unescape_run_name(escape_run_name("price/m²"))
    'price/m²'
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a run needs a non-empty name, got {name!r}")
    escaped = quote(name, safe=_SAFE)
    return "%2E" + escaped[1:] if escaped.startswith(".") else escaped


def unescape_run_name(escaped: str) -> str:
    """The name :func:`escape_run_name` encoded as ``escaped``."""
    return unquote(escaped, errors="strict")


def group_tags(tags: Iterable[str]) -> dict[str, dict[str, list[str]]]:
    """Group tags as ``{category: {chart: [tags]}}``, each level in order of first appearance."""
    groups: dict[str, dict[str, list[str]]] = {}
    for tag in tags:
        category, chart = chart_of(tag)
        series = groups.setdefault(category, {}).setdefault(chart, [])
        if tag not in series:
            series.append(tag)
    return groups


def as_scalar(tag: str, value: Any) -> float:
    """``value`` as a Python float; ``TypeError`` naming ``tag`` when it is not numeric.

    Numbers, numpy scalars and one-element tensors are accepted; non-finite values pass through.

    >>> as_scalar("loss", 1)
    1.0
    >>> as_scalar("loss", "0.5")
    Traceback (most recent call last):
    ...
    TypeError: scalar 'loss': expected a number, got str '0.5'
    """
    if not isinstance(value, (str, bytes)) and hasattr(type(value), "__float__"):
        try:
            return float(value)
        except (TypeError, ValueError, RuntimeError):
            pass
    raise TypeError(f"scalar {tag!r}: expected a number, got {type(value).__name__} {value!r}")
