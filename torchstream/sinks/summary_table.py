"""Markdown tables of evaluation results, with counts printed as integers.

A column holds counts when its dtype is an integer one, or when its name says so (``n_*``,
``*_n_*``, ``*_count``, or one of :data:`COUNT_NAMES`, e.g. ``n_parameters``,
``n_detections``, ``rows``) and every finite value in it is a whole number. Counts are printed
as integers (``3``, not ``3.0000``), every other number with ``digits`` decimals, a missing value
as ``nan``.

>>> import pandas as pd
>>> frame = pd.DataFrame({"accuracy": [0.8125], "n_detections": [3.0]}, index=["mlp"])
>>> print(markdown_table(frame), end="")
| predictor | accuracy | n_detections |
|---|---|---|
| mlp | 0.8125 | 3 |
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd

__all__ = ["COUNT_NAMES", "format_cell", "is_count_column", "markdown_table"]

COUNT_NAMES = ("rows", "instances", "steps", "batches", "detections", "count", "size")
"""Column names (the last ``_``-separated part of a name, too) that denote counts."""


def _count_name(name: str) -> bool:
    n = name.lower().replace(" ", "_")
    parts = n.split("_")
    return (
        n.startswith("n_")
        or "_n_" in n
        or n.endswith("_count")
        or n in COUNT_NAMES
        or parts[-1] in COUNT_NAMES
    )


def is_count_column(column: pd.Series) -> bool:
    """Whether ``column`` holds counts (integer dtype, or a count name with whole values)."""
    if pd.api.types.is_bool_dtype(column):
        return False
    if pd.api.types.is_integer_dtype(column):
        return True
    if not pd.api.types.is_numeric_dtype(column) or not _count_name(str(column.name)):
        return False
    v = column.to_numpy(dtype=np.float64)
    v = v[np.isfinite(v)]
    return bool(np.all(v == np.round(v)))


def format_cell(value: object, *, count: bool, digits: int = 4) -> str:
    """One cell: an integer when ``count``, ``digits`` decimals for other numbers, else text."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    v = float(value)
    if not math.isfinite(v):
        return str(v)
    if count:
        return str(int(round(v)))
    return f"{v:.{digits}f}"


def markdown_table(frame: pd.DataFrame, *, index_label: str = "predictor", digits: int = 4) -> str:
    """``frame`` as a GitHub markdown table, its index as the first column ``index_label``."""
    if not isinstance(digits, int) or digits < 0:
        raise ValueError(f"digits must be a non-negative integer, got {digits!r}")
    cols = [str(c) for c in frame.columns]
    counts = [is_count_column(frame.iloc[:, j]) for j in range(frame.shape[1])]
    lines = [
        "| " + " | ".join([index_label, *cols]) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    for idx, row in zip(frame.index, frame.itertuples(index=False)):
        cells = [format_cell(v, count=c, digits=digits) for v, c in zip(row, counts)]
        lines.append("| " + " | ".join([str(idx), *cells]) + " |")
    return "\n".join(lines) + "\n"
