"""``read_csv``: a CSV file with a header row as an in-memory stream, every decision stated.

The file is checked byte-wise (:mod:`~torchstream.streams.csv_scan`), parsed by pandas' C
parser with no type or missing-value conversion of its own, and every column gets a kind by the
rules of :mod:`~torchstream.streams.csv_columns`; the target gets its task by the rule of
:mod:`~torchstream.streams.csv_target`. What was decided is on ``stream.inference``
(:class:`~torchstream.streams.csv_inference.CSVInference`).
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from torchstream.schema import Schema, running_mean_fill
from torchstream.streams.base import Task
from torchstream.streams.csv_columns import (
    MISSING_TOKENS,
    ColumnPlan,
    Declared,
    Part,
    Tokens,
    plan_numbers,
    plan_tokens,
    tokenize,
    tokenize_codes,
)
from torchstream.streams.csv_inference import ColumnReport, CSVInference
from torchstream.streams.csv_scan import (
    RecordMap,
    Source,
    check_records,
    cut_records,
    diagnose,
    load,
    parse_header,
)
from torchstream.streams.csv_target import (
    TargetPlan,
    find_leaks,
    plan_target,
    tokens_of_numbers,
)
from torchstream.streams.table import ColumnRows, TableStream

__all__ = ["MISSING_TOKENS", "read_csv", "read_header"]


def read_header(
    path: str | os.PathLike[str], *, delimiter: str = ",", encoding: str = "utf-8"
) -> list[str]:
    """The column names of a CSV file (BOM removed, RFC 4180 quoting)."""
    src = load(path, encoding=encoding, delimiter=delimiter)
    return _header(src.path, src.data, delimiter)


def _header(path: Path, data: bytes, delimiter: str) -> list[str]:
    try:
        header = parse_header(data, delimiter)
    except ValueError as e:
        raise diagnose(path, data, delimiter, None) or ValueError(f"{path}: {e}") from None
    if not header:
        raise ValueError(f"{path}: the file is empty (no header row)")
    return header


def read_csv(
    path: str | os.PathLike[str],
    target: str,
    *,
    categorical: Iterable[str] = (),
    numeric: Iterable[str] = (),
    drop: Iterable[str] = (),
    missing: Iterable[str] = MISSING_TOKENS,
    task: Task | None = None,
    dates: Literal["parts", "drop"] = "parts",
    delimiter: str = ",",
    encoding: str = "utf-8",
    nrows: int | None = None,
    max_categories: int = 1000,
    max_field: int = 100_000,
    name: str | None = None,
) -> TableStream:
    """Read a CSV file with a header row into a stream; ``stream.inference`` states every
    decision (``stream.inference.describe()``).

    Column kinds follow the rules of :mod:`~torchstream.streams.csv_columns` (numeric,
    categorical, datetime, identifier or an error) unless listed in ``categorical`` /
    ``numeric``; ``drop`` leaves columns out. The task follows the rule of
    :mod:`~torchstream.streams.csv_target` unless ``task`` is given. Values in ``missing``
    (compared after stripping spaces) are missing; a numeric feature with missing values gets an
    indicator column and, where missing, the mean of the earlier rows (never later ones). Errors
    are ``ValueError``s that name the file, the line and the column; a field longer than
    ``max_field`` characters is one.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "toy.csv"
    >>> _ = p.write_text("a,b,y\\n1,red,0\\n?,blue,1\\n3,red,0\\n")
    >>> s = read_csv(p, "y")
    >>> s.schema.columns, s.task, s.classes
    (('a', 'a:missing', 'b=red', 'b=blue'), 'classification', [0, 1])
    >>> s.X[:, 0].tolist()  # row 1 is missing: the mean of row 0
    [1.0, 1.0, 3.0]
    """
    src = load(path, encoding=encoding, delimiter=delimiter)
    p, data = src.path, src.data
    header = _header(p, data, delimiter)
    declared = {"categorical": list(categorical), "numeric": list(numeric), "drop": list(drop)}
    _check_names(p, header, target, declared)
    cat, num, dropped = (set(declared[k]) for k in ("categorical", "numeric", "drop"))
    if task not in (None, "classification", "regression"):
        raise ValueError(f"task must be 'classification', 'regression' or None, got {task!r}")
    if dates not in ("parts", "drop"):
        raise ValueError(f"dates must be 'parts' or 'drop', got {dates!r}")
    if nrows is not None:
        if nrows < 0:
            raise ValueError(f"nrows must be >= 0, got {nrows}")
        data = cut_records(data, delimiter, nrows)
    usecols = [c for c in header if c not in dropped]
    frame = _parse(p, data, delimiter, header, usecols, cat)
    n = len(frame)
    if n == 0:
        raise ValueError(f"{p}: no data rows after the header")
    check_records(p, data, delimiter, len(header), n + 1)
    where = _Lines(data, delimiter, n)
    missing_set = frozenset(missing)
    tokens = _tokens(p, data, delimiter, frame, cat, missing_set, max_field, where)
    target_tokens = tokens.get(target)
    if target_tokens is None:  # read as numbers
        target_tokens = tokens_of_numbers(frame[target].to_numpy())
    tplan = plan_target(target, target_tokens, task=task, where=where, path=str(p))
    plans: list[ColumnPlan] = []
    for col in usecols:
        if col == target:
            continue
        kind: Declared = "categorical" if col in cat else "numeric" if col in num else None
        tok = tokens.get(col)
        if tok is None:
            plans.append(plan_numbers(col, frame[col].to_numpy(), kind))
        else:
            plans.append(plan_tokens(col, tok, declared=kind, dates=dates,
                                     max_categories=max_categories, where=where, path=str(p)))
    notes = _check_leaks(p, tplan, plans, tokens, target, cat, num)
    parts = [part for plan in plans for part in plan.parts]
    if not parts:
        raise ValueError(f"{p}: no feature column is left:\n" + _summary(plans))
    try:
        schema = Schema([part.feature for part in parts])
    except ValueError as e:
        raise ValueError(f"{p}: {e}") from None
    X = _encode(schema, parts, n)
    plain = all(f.kind == "numeric" and not f.nullable for f in schema.features)
    inference = _inference(src, delimiter, missing_set, header, tplan, plans, dropped, schema,
                           notes, n)
    return TableStream(
        torch.from_numpy(X), tplan.labels, schema, task=tplan.task, classes=tplan.classes,
        rows=None if plain else _rows(parts, n), name=name or p.stem, targets=tplan.targets,
        inference=inference,
    )


def _check_names(path: Path, header: list[str], target: str,
                 declared: dict[str, list[str]]) -> None:
    for j, h in enumerate(header):
        if not h.strip():
            raise ValueError(f"{path}: column {j + 1} of the header has no name")
    if len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise ValueError(f"{path}: duplicate column names {dup}")
    for arg, cols in (("target", [target]), *declared.items()):
        unknown = [c for c in cols if c not in header]
        if unknown:
            raise ValueError(f"{path}: {arg} names unknown columns {unknown} (columns: {header})")
    for arg, cols in declared.items():
        if target in cols:
            raise ValueError(f"{path}: the target {target!r} is listed in {arg}; the target's "
                             f"task is set with task=")
    both = sorted(set(declared["categorical"]) & set(declared["numeric"]))
    if both:
        raise ValueError(f"{path}: columns {both} are declared both categorical and numeric")


_PARSER = dict(header=0, engine="c", encoding="utf-8", quotechar='"', doublequote=True,
               keep_default_na=False, na_filter=False, low_memory=False, index_col=False,
               skip_blank_lines=True)
_SAMPLE_ROWS = 256


def _parse(path: Path, data: bytes, delimiter: str, header: list[str], usecols: list[str],
           as_text: set[str]) -> pd.DataFrame:
    """Every field as the parser reads it: no missing-value tokens, no thousands separators.
    Columns in ``as_text`` and those whose first rows are not all numbers are read as pandas
    categoricals of the raw text (the parser hashes them; a number is never converted)."""
    cols = None if len(usecols) == len(header) else usecols
    try:
        with warnings.catch_warnings():  # a record of the wrong width is diagnosed below
            warnings.simplefilter("ignore", pd.errors.ParserWarning)
            sample = pd.read_csv(io.BytesIO(data), sep=delimiter, usecols=cols,
                                 nrows=_SAMPLE_ROWS, **_PARSER)
            text = as_text | {c for c in sample.columns if sample[c].dtype.kind not in "if"}
            frame = pd.read_csv(io.BytesIO(data), sep=delimiter, usecols=cols,
                                dtype={c: "category" for c in text if c in usecols} or None,
                                **_PARSER)
    except ValueError as e:  # pandas' ParserError is a ValueError
        raise diagnose(path, data, delimiter, len(header)) or ValueError(f"{path}: {e}") from None
    if list(frame.columns) != usecols:
        raise ValueError(f"{path}: the parser read the header as {list(frame.columns)}, "
                         f"expected {usecols}")
    return frame


class _Lines:
    """Row index -> ``"line L"`` (the file line where the record starts), computed on first use."""

    def __init__(self, data: bytes, delimiter: str, n_rows: int) -> None:
        self._data, self._delimiter, self._n = data, delimiter, n_rows
        self._lines: np.ndarray | None = None

    def __call__(self, i: int) -> str:
        if self._lines is None:
            records = RecordMap(self._data, self._delimiter)
            self._lines = records.lines[1:] if len(records) == self._n + 1 else np.zeros(0)
        return f"line {int(self._lines[i])}" if i < len(self._lines) else f"data row {i + 1}"


def _tokens(
    path: Path,
    data: bytes,
    delimiter: str,
    frame: pd.DataFrame,
    as_text: set[str],
    missing: frozenset[str],
    max_field: int,
    where: _Lines,
) -> dict[str, Tokens]:
    """Tokens of the columns that are read as text: those the parser did not read as finite
    numbers, and those in ``as_text``."""
    out: dict[str, Tokens] = {}
    text: dict[str, np.ndarray] = {}
    reread: list[str] = []
    for col in frame.columns:
        dtype = frame[col].dtype
        if isinstance(dtype, pd.CategoricalDtype):
            cat = frame[col].array
            out[col] = tokenize_codes(cat.codes, np.asarray(cat.categories, dtype=object),
                                      missing)
        elif dtype.kind == "i" and col not in as_text:
            continue
        elif (dtype.kind == "f" and col not in as_text
              and np.isfinite(frame[col].to_numpy()).all()):
            continue
        elif pd.api.types.is_string_dtype(dtype):
            text[col] = frame[col].to_numpy(dtype=object)
        else:
            reread.append(col)
    if reread:  # numbers that are not finite, bools: the original text of the fields
        raw = pd.read_csv(io.BytesIO(data), sep=delimiter, usecols=reread, dtype=str,
                          **_PARSER)
        text.update({c: raw[c].to_numpy(dtype=object) for c in reread})
    out.update({col: tokenize(raw_values, missing) for col, raw_values in text.items()})
    for col, tok in out.items():
        lengths = [len(v) for v in tok.values]
        if lengths and max(lengths) > max_field:
            j = int(np.argmax(lengths))
            i = tok.first_row(np.arange(len(lengths)) == j)
            raise ValueError(
                f"{path}, {where(i)}, column {col!r}: a field of {lengths[j]:,} characters, "
                f"longer than max_field={max_field:,}")
    return out


def _check_leaks(
    path: Path,
    tplan: TargetPlan,
    plans: list[ColumnPlan],
    tokens: dict[str, Tokens],
    target: str,
    cat: set[str],
    num: set[str],
) -> dict[str, str]:
    """Features that copy the target (equal, or an affine copy ``a * y + b``) or two that sum
    to it, on every row within float tolerance (:func:`find_leaks`), are an error unless
    declared; returns a note for each declared one."""
    groups: list[tuple[tuple[str, ...], str]] = []
    if tplan.numbers is not None:
        complete = {p.name: p.parts[0].values for p in plans
                    if p.kind == "numeric" and p.kept and not p.n_missing}
        groups += find_leaks(tplan.numbers, complete)
    t = tokens.get(target)
    if t is not None:
        groups += [((p.name,), "equals {t}") for p in plans
                   if p.kind == "categorical" and p.name in tokens
                   and tokens[p.name].values == t.values
                   and np.array_equal(tokens[p.name].codes, t.codes)]
    notes: dict[str, str] = {}
    for group, relation in groups:
        declared = all(c in num or c in cat for c in group)
        names = " + ".join(repr(c) for c in group)
        if not declared:
            it = "it" if len(group) == 1 else "them"
            raise ValueError(
                f"{path}: {names} {relation.format(t=f'the target {target!r}')} on every row "
                f"(within float rounding), so the target leaks into the features; drop {it} "
                f"(drop= / --drop {' '.join(group)}), or declare {it} numeric or categorical "
                f"to keep {it}")
        for c in group:
            notes[c] = (f"kept as declared although {names} "
                        f"{relation.format(t='the target')} on every row")
    return notes


def _encode(schema: Schema, parts: list[Part], n: int) -> np.ndarray:
    """The encoded rows, built column-wise; missing numbers get the running mean of the earlier
    rows (:func:`~torchstream.schema.running_mean_fill`)."""
    X = np.zeros((n, schema.n_columns), dtype=np.float64)
    rows = np.arange(n)
    for part in parts:
        f = part.feature
        cols = schema.feature_columns(f.name)
        if f.kind == "numeric":
            if f.nullable:
                miss = np.isnan(part.values)
                X[:, cols.start] = running_mean_fill(part.values, miss)
                X[:, cols.start + 1] = miss
            else:
                X[:, cols.start] = part.values
        else:
            k = cols.stop - cols.start  # the '<missing>' level is the last one
            X[rows, cols.start + np.where(part.values < 0, k - 1, part.values)] = 1.0
    return X


def _rows(parts: list[Part], n: int) -> ColumnRows:
    columns: dict[Any, tuple[np.ndarray, np.ndarray, Any]] = {}
    for part in parts:
        f = part.feature
        if f.kind == "numeric":
            columns[f.name] = (part.values, np.isnan(part.values), None)
        else:
            columns[f.name] = (part.values, part.values < 0, f.categories)
    return ColumnRows(columns, n)


def _summary(plans: list[ColumnPlan]) -> str:
    return "\n".join(f"  {p.name}: {p.kind}, {p.note}" for p in plans)


def _inference(
    src: Source,
    delimiter: str,
    missing: frozenset[str],
    header: list[str],
    tplan: TargetPlan,
    plans: list[ColumnPlan],
    dropped: set[str],
    schema: Schema,
    notes: dict[str, str],
    n: int,
) -> CSVInference:
    by_name = {p.name: p for p in plans}
    columns: list[ColumnReport] = []
    for col in header:
        if col == tplan.name:
            columns.append(ColumnReport(col, "target", "target", tplan.declared, 0, (),
                                        tplan.rule))
        elif col in dropped:
            columns.append(ColumnReport(col, "-", "dropped", True, 0, (), "dropped (drop=)"))
        else:
            plan = by_name[col]
            encoded = tuple(c for part in plan.parts
                            for c in schema.columns[schema.feature_columns(part.feature.name)])
            note = plan.note + (f"; {notes[col]}" if col in notes else "")
            role = "feature" if plan.kept else "left out"
            columns.append(ColumnReport(col, plan.kind, role, plan.declared, plan.n_missing,
                                        encoded, note))
    ordered = tuple(t for t in MISSING_TOKENS if t in missing) + tuple(
        sorted(t for t in missing if t not in MISSING_TOKENS))
    return CSVInference(
        source=str(src.path), n_rows=n, encoding=src.encoding, bom=src.bom, delimiter=delimiter,
        missing_tokens=ordered, target=tplan.name, task=tplan.task, task_rule=tplan.rule,
        classes=None if tplan.classes is None else tuple(tplan.classes),
        class_counts=None if tplan.class_counts is None else tuple(tplan.class_counts),
        columns=tuple(columns),
    )
