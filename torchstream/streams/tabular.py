"""Finite streams held in memory: numpy / torch arrays, pandas frames, CSV files, river datasets.

All of them end up as a :class:`TableStream`: the rows encoded once into a tensor, the targets
encoded once, and batches that are slices of those tensors.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Hashable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from torchstream.schema import Feature, Schema, match_key
from torchstream.streams.base import Row, Stream, Task, infer_task

__all__ = [
    "MISSING_TOKENS",
    "SHARED_DATA",
    "TableStream",
    "data_path",
    "from_numpy",
    "from_pandas",
    "from_river",
    "read_csv",
    "shared_data",
]

MISSING_TOKENS = ("", "?", "NA", "N/A", "NaN", "nan", "null", "None")


def data_path(name: str) -> Path:
    """Path of a shared data file: ``$TORCHSTREAM_DATA/name`` when the variable is set, else
    ``../shared/data/name`` relative to the working directory."""
    root = os.environ.get("TORCHSTREAM_DATA")
    base = Path(root) if root else Path.cwd().parent / "shared" / "data"
    return base / name


def _sorted_labels(labels: Iterable[Any]) -> list[Any]:
    first: dict[Any, Any] = {}
    for v in labels:  # keyed like the stream's classes: True and 1 stay two labels
        first.setdefault(match_key(v), v)
    distinct = list(first.values())
    try:
        return sorted(distinct)
    except TypeError:
        return distinct


class TableStream(Stream):
    """A finite stream whose rows are already encoded.

    Parameters
    ----------
    X
        Encoded rows ``[n, d]`` (any float dtype; kept as float64 on the CPU).
    labels
        The raw labels (length ``n``).
    schema
        The schema that produced ``X``.
    rows
        The raw dict rows, when they differ from what ``schema.decode(X)`` gives back (categorical
        and nullable features); ``None`` for all-numeric data.
    """

    def __init__(
        self,
        X: torch.Tensor,
        labels: Sequence[Any],
        schema: Schema,
        *,
        task: Task | None = None,
        classes: Sequence[Any] | None = None,
        rows: Sequence[Row] | None = None,
        name: str | None = None,
    ) -> None:
        if X.dim() != 2 or X.shape[1] != schema.n_columns:
            raise ValueError(
                f"X must have shape [n, {schema.n_columns}] for this schema, got {list(X.shape)}"
            )
        if len(labels) != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but there are {len(labels)} labels")
        if rows is not None and len(rows) != len(labels):
            raise ValueError(f"{len(rows)} raw rows for {len(labels)} labels")
        task = task or (infer_task(labels) if len(labels) else "regression")
        if task == "classification" and classes is None:
            classes = _sorted_labels(labels)
        super().__init__(schema, task=task, classes=classes, n_samples=len(labels), name=name)
        self._X = X.detach().to("cpu", torch.float64)
        self._labels = list(labels)
        self._raw_rows = rows
        self._y = self.encode_targets(self._labels)

    def _rows(self) -> Iterator[tuple[Row, Any]]:
        if self._raw_rows is not None:
            return iter(zip(self._raw_rows, self._labels))
        names = self.schema.names
        return ((dict(zip(names, x)), y) for x, y in zip(self._X.tolist(), self._labels))

    def _batches(
        self,
        size: int,
        device: torch.device | str | None,
        dtype: torch.dtype,
        start: int,
        stop: int | None,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = self._X.shape[0] if stop is None else min(stop, self._X.shape[0])
        X = self._X.to(device=device, dtype=dtype)
        y = self._y.to(device=device)
        for lo in range(start, n, size):
            hi = min(lo + size, n)
            yield X[lo:hi], y[lo:hi]

    @property
    def X(self) -> torch.Tensor:
        """All encoded rows ``[n, d]`` (float64, CPU)."""
        return self._X

    @property
    def y(self) -> torch.Tensor:
        """All encoded targets ``[n]``."""
        return self._y


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
    values (the feature becomes nullable, see :mod:`torchstream.schema`).
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
    schema = schema or Schema.infer(rows, categorical=categorical)
    X = schema.encode(rows, dtype=torch.float64)
    plain = all(f.kind == "numeric" and not f.nullable for f in schema.features)
    return TableStream(
        X, labels, schema, task=task, classes=classes, rows=None if plain else rows, name=name
    )


# ---------------------------------------------------------------------- CSV
def read_csv(
    path: str | os.PathLike[str],
    target: str,
    *,
    categorical: Iterable[str] = (),
    numeric: Iterable[str] = (),
    drop: Iterable[str] = (),
    missing: Iterable[str] = MISSING_TOKENS,
    task: Task | None = None,
    delimiter: str = ",",
    nrows: int | None = None,
    name: str | None = None,
) -> TableStream:
    """Read a CSV file with a header row into a stream.

    Column kinds: listed in ``categorical`` / ``numeric``, or inferred: a column is numeric when
    every non-missing value parses as a number and categorical when most values do not. A column
    where at least 90 % of the values are numbers but some are not is almost surely a data error:
    it raises a ``ValueError`` naming the first bad line and column (declare the column
    ``categorical`` to accept it). Values in ``missing`` are missing values (see the schema's
    policy). A line with the wrong number of fields raises a ``ValueError`` naming the line.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "toy.csv"
    >>> _ = p.write_text("a,b,y\\n1,red,0\\n?,blue,1\\n")
    >>> s = read_csv(p, "y")
    >>> s.schema.columns, s.task, s.classes
    (('a', 'a:missing', 'b=red', 'b=blue'), 'classification', [0, 1])
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"CSV file not found: {path}")
    missing_set = set(missing)
    with path.open(newline="") as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(f"{path}: the file is empty (no header row)") from None
        width = len(header)
        if len(set(header)) != width:
            dup = sorted({h for h in header if header.count(h) > 1})
            raise ValueError(f"{path}: duplicate column names {dup}")
        records: list[list[str]] = []
        line_nos: list[int] = []  # the file line of each record (blank lines are skipped)
        for line in reader:
            if nrows is not None and len(records) >= nrows:
                break
            if not line:  # a blank line
                continue
            if len(line) != width:
                raise ValueError(
                    f"{path}, line {reader.line_num}: {len(line)} fields, expected {width} "
                    f"(header: {header})"
                )
            records.append(line)
            line_nos.append(reader.line_num)
    if not records:
        raise ValueError(f"{path}: no data rows after the header")
    for arg, cols in (("target", [target]), ("categorical", categorical), ("numeric", numeric),
                      ("drop", drop)):
        unknown = [c for c in cols if c not in header]
        if unknown:
            raise ValueError(f"{path}: {arg} names unknown columns {unknown} (columns: {header})")
    cat, num, dropped = set(categorical), set(numeric), set(drop)
    ti = header.index(target)
    columns: dict[str, list[Any]] = {}
    features: list[Feature] = []
    for j, col in enumerate(header):
        if j == ti or col in dropped:
            continue
        raw = [r[j] for r in records]
        values, feat = _parse_column(path, col, raw, line_nos, missing_set, cat, num)
        columns[col] = values
        features.append(feat)
    labels_raw = [r[ti] for r in records]
    for i, v in enumerate(labels_raw):
        if v.strip() in missing_set:  # stripped, as feature values are
            raise ValueError(
                f"{path}, line {line_nos[i]}: missing value in the target column {target!r}"
            )
    labels: list[Any]
    try:
        nums = [float(v) for v in labels_raw]
        labels = [int(v) if v.is_integer() else v for v in nums]
    except ValueError:
        labels = [v.strip() for v in labels_raw]
    names = [f.name for f in features]
    rows = [dict(zip(names, vals)) for vals in zip(*(columns[n] for n in names))]
    schema = Schema(features)
    return _from_rows(
        rows, labels, categorical=(), task=task, schema=schema, name=name or path.stem
    )


def _parse_column(
    path: Path,
    col: str,
    raw: list[str],
    line_nos: list[int],
    missing: set[str],
    categorical: set[str],
    numeric: set[str],
) -> tuple[list[Any], Feature]:
    is_missing = [v.strip() in missing for v in raw]
    nullable = any(is_missing)
    if col not in categorical:
        parsed: list[float | None] = []
        bad: list[int] = []
        for i, (v, m) in enumerate(zip(raw, is_missing)):
            if m:
                parsed.append(None)
                continue
            try:
                x = float(v)
            except ValueError:
                bad.append(i)
                parsed.append(None)
                continue
            if not math.isfinite(x):
                raise ValueError(
                    f"{path}, line {line_nos[i]}, column {col!r}: non-finite value {v!r}"
                )
            parsed.append(x)
        n_present = len(raw) - sum(is_missing)
        if not bad:
            seen = [x for x in parsed if x is not None]
            fill = sum(seen) / len(seen) if seen else 0.0
            return parsed, Feature(col, "numeric", nullable=nullable, fill_value=fill)
        if col in numeric or len(bad) <= 0.1 * n_present:
            i = bad[0]
            raise ValueError(
                f"{path}, line {line_nos[i]}, column {col!r}: non-numeric value {raw[i]!r} in a "
                f"numeric column ({len(bad)} such values); declare it categorical to keep it"
            )
    values = [None if m else v.strip() for v, m in zip(raw, is_missing)]
    cats = list(dict.fromkeys(v for v in values if v is not None))
    return values, Feature(col, "categorical", tuple(cats), nullable=nullable)


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
