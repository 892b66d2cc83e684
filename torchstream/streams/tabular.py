"""Finite streams held in memory: numpy / torch arrays, pandas frames, CSV files, river datasets.

All of them end up as a :class:`TableStream`: the rows encoded once into a tensor, the targets
encoded once, and batches that are slices of those tensors. Missing numeric values are imputed
causally (:func:`~torchstream.schema.running_mean_fill`): never with a statistic of later rows.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from torchstream.schema import Schema, running_mean_fill
from torchstream.streams.base import Row, Task
from torchstream.streams.csv_reader import MISSING_TOKENS, read_csv, read_header
from torchstream.streams.table import TableStream

__all__ = [
    "MISSING_TOKENS",
    "SHARED_DATA",
    "TableStream",
    "data_path",
    "from_numpy",
    "from_pandas",
    "from_river",
    "read_csv",
    "read_header",
    "shared_data",
]


def data_path(name: str) -> Path:
    """Path of a shared data file: ``$TORCHSTREAM_DATA/name`` when the variable is set, else
    ``../shared/data/name`` relative to the working directory."""
    root = os.environ.get("TORCHSTREAM_DATA")
    base = Path(root) if root else Path.cwd().parent / "shared" / "data"
    return base / name


# ---------------------------------------------------------------------- numpy / torch
def from_numpy(
    X: Any,
    y: Any,
    *,
    feature_names: Sequence[Hashable] | None = None,
    task: Task | None = None,
    name: str | None = None,
) -> TableStream:
    """A stream over numeric arrays ``X [n, d]`` and ``y [n]`` (numpy or torch)."""
    Xa = np.asarray(X.detach().cpu() if isinstance(X, torch.Tensor) else X)
    ya = np.asarray(y.detach().cpu() if isinstance(y, torch.Tensor) else y)
    if Xa.ndim != 2:
        raise ValueError(f"X must be 2-dimensional [n, d], got shape {Xa.shape}")
    if ya.ndim != 1 or ya.shape[0] != Xa.shape[0]:
        raise ValueError(f"y must have shape [{Xa.shape[0]}], got {ya.shape}")
    try:
        Xf = Xa.astype(np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"X must be numeric ({e}); use from_pandas for categorical data") from None
    bad = ~np.isfinite(Xf)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"row {r}, column {c}: non-finite value {Xf[r, c]} in X")
    names = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(Xa.shape[1])]
    if len(names) != Xa.shape[1]:
        raise ValueError(f"feature_names has {len(names)} names for {Xa.shape[1]} columns")
    labels = ya.tolist()
    return TableStream(torch.from_numpy(Xf), labels, Schema(names), task=task, name=name)


# ---------------------------------------------------------------------- pandas
def from_pandas(
    frame: Any,
    target: Hashable,
    *,
    categorical: Iterable[Hashable] = (),
    drop: Iterable[Hashable] = (),
    task: Task | None = None,
    schema: Schema | None = None,
    name: str | None = None,
) -> TableStream:
    """A stream over a pandas DataFrame; ``target`` names the label column.

    Object / string / category columns become categorical features; NaN / None are missing
    values (the feature becomes nullable, see :mod:`torchstream.schema`). Unless ``schema`` is
    given, a missing number gets the mean of the earlier rows (never later ones) and the
    schema's ``fill_value`` is 0.0.
    """
    if target not in frame.columns:
        raise ValueError(f"target column {target!r} not in the frame's columns {list(frame.columns)}")
    unknown = [c for c in drop if c not in frame.columns]
    if unknown:
        raise ValueError(f"cannot drop unknown columns {unknown}")
    features = frame.drop(columns=[target, *drop])
    cat = set(categorical)
    for col in features.columns:
        if str(features[col].dtype) in ("object", "category", "string", "str", "bool"):
            cat.add(col)
    rows = [
        {k: (None if _is_nan(v) else (v if k in cat else float(v))) for k, v in r.items()}
        for r in features.to_dict(orient="records")
    ]
    labels = frame[target].tolist()
    for i, lab in enumerate(labels):
        if _is_nan(lab):
            raise ValueError(f"row {i}: missing value in the target column {target!r}")
    return _from_rows(rows, labels, categorical=cat, task=task, schema=schema, name=name)


def _is_nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _from_rows(
    rows: list[Row],
    labels: list[Any],
    *,
    categorical: Iterable[Hashable],
    task: Task | None,
    schema: Schema | None,
    name: str | None,
    classes: Sequence[Any] | None = None,
) -> TableStream:
    if not rows:
        raise ValueError(f"stream {name or ''!r} has no rows")
    causal = schema is None
    if schema is None:
        inferred = Schema.infer(rows, categorical=categorical)
        schema = Schema(
            [dataclasses.replace(f, fill_value=0.0) if f.nullable and f.kind == "numeric" else f
             for f in inferred.features],
            encoding=inferred.encoding, unseen=inferred.unseen)
    X = schema.encode(rows, dtype=torch.float64)
    if causal:
        _impute_causally(schema, X)
    plain = all(f.kind == "numeric" and not f.nullable for f in schema.features)
    return TableStream(
        X, labels, schema, task=task, classes=classes, rows=None if plain else rows, name=name
    )


def _impute_causally(schema: Schema, X: torch.Tensor) -> None:
    """Replace, in place, the filled value of each missing number by the mean of the earlier
    rows (the indicator column follows the value column)."""
    for f in schema.features:
        if f.kind == "numeric" and f.nullable:
            j = schema.feature_columns(f.name).start
            col = X[:, j].numpy()
            col[:] = running_mean_fill(col, X[:, j + 1].numpy() > 0.5)


# ---------------------------------------------------------------------- river datasets
def from_river(
    dataset: Iterable[tuple[Row, Any]],
    *,
    categorical: Iterable[Hashable] = (),
    task: Task | None = None,
    n_samples: int | None = None,
    name: str | None = None,
) -> TableStream:
    """A stream over a finite river dataset (or any finite iterable of ``(dict, label)``).

    The rows are read once; the schema and the classes are inferred from all of them.
    """
    limit = n_samples if n_samples is not None else getattr(dataset, "n_samples", None)
    rows: list[Row] = []
    labels: list[Any] = []
    for i, (x, y) in enumerate(dataset):
        if limit is not None and i >= limit:
            break
        rows.append(dict(x))
        labels.append(y)
        if limit is None and i >= 10_000_000:
            raise ValueError("from_river reads finite datasets; pass n_samples for a long one")
    if task is None and hasattr(dataset, "task"):
        t = str(dataset.task).lower()
        task = "regression" if "regression" in t else "classification" if "classification" in t else None
    return _from_rows(
        rows, labels, categorical=categorical, task=task, schema=None,
        name=name or type(dataset).__name__,
    )


#: The shared data sets by name: file, target column, task and the columns that are not features
#: (bike: ``casual + registered = cnt`` would leak the target; ``instant`` and ``dteday`` index
#: the rows).
SHARED_DATA: dict[str, tuple[str, str, Task, tuple[str, ...]]] = {
    "electricity": ("electricity.csv", "class", "classification", ()),
    "spambase": ("spambase.csv", "class", "classification", ()),
    "bike": (
        "bike_hour.csv", "cnt", "regression", ("instant", "dteday", "casual", "registered")
    ),
    "california": ("california_housing.csv", "median_house_value", "regression", ()),
    "adult": ("adult.csv", "income", "classification", ()),
}


def shared_data(name: str, *, drop: Iterable[str] = (), **kwargs: Any) -> TableStream:
    """One of the shared data sets (:data:`SHARED_DATA`) as a stream, read with
    :func:`read_csv` from :func:`data_path` with its target, task and non-feature columns;
    ``drop`` removes further columns, ``kwargs`` go to :func:`read_csv`.

    >>> shared_data("iris")
    Traceback (most recent call last):
    ...
    ValueError: unknown shared data set 'iris'; known: adult, bike, california, electricity, spambase
    """
    if name not in SHARED_DATA:
        raise ValueError(
            f"unknown shared data set {name!r}; known: {', '.join(sorted(SHARED_DATA))}"
        )
    file, target, task, skip = SHARED_DATA[name]
    kwargs.setdefault("task", task)
    return read_csv(data_path(file), target, drop=[*skip, *drop], **kwargs)
