"""The kind of every feature column of a CSV file, decided by stated rules or by declaration.

Values are compared after stripping spaces; a value listed in the missing tokens is missing.
A value is a number when it parses as one (``1``, ``-2.5e3``, ``inf``, ``nan``...). Rules, in
order, for a column that is not declared:

1. **empty** -- every value is missing: left out.
2. **numeric** -- every value is a number (non-finite ones are an error). A column of
   consecutive integers (``k, k+1, k+2, ...``) over at least 10 rows is the row number: an
   **identifier**, left out. Numbers written with separators are numbers too, read one way
   for the whole column and said in its note: ``,`` separating thousands (``"12,345.6"``,
   ``"1,234,567"``) or ``,`` as the decimal mark (``"3,14"``, ``"1.234,5"``). A column whose
   separated values fit both readings (only ``"1,234"``-like values and integers) or neither
   (``"12,345.6"`` beside ``"3,14"``) is an error naming the line and the value.
3. **mixed** -- numbers (separated ones included) and other strings: an error with the counts
   and examples.
4. **datetime** -- every value is an ISO-like date ``YYYY-MM-DD`` (or ``YYYY/MM/DD``),
   optionally with a time ``[T ]HH:MM[:SS[.f]]``: the column becomes the numeric parts
   ``<name>:year``, ``:month``, ``:day``, ``:weekday`` (Monday = 0) and, when any value has a
   time, ``:hour`` and ``:minute``; or it is left out (``dates="drop"``). Dates mixed with other
   strings are an error.
5. **identifier** -- a different string on every row, over at least 10 rows (a key or an
   id): left out.
6. **categorical** -- the other string columns (one-hot); more than ``max_categories``
   distinct values is an error.

A column declared ``categorical`` keeps its values as strings; one declared ``numeric`` must hold
only numbers (an error names the line, column and value otherwise). Declared columns are never
left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from torchstream.schema import Feature

__all__ = [
    "MISSING_TOKENS",
    "ColumnKind",
    "ColumnPlan",
    "Declared",
    "Part",
    "Tokens",
    "Where",
    "plan_numbers",
    "plan_tokens",
    "plural",
    "read_separated",
    "shown",
    "tokenize",
    "tokenize_codes",
]

MISSING_TOKENS = ("", "?", "NA", "N/A", "NaN", "nan", "null", "None")

ColumnKind = Literal["numeric", "categorical", "datetime", "identifier", "empty"]
Declared = Literal["categorical", "numeric"] | None
Where = Callable[[int], str]  # a row index -> "line 17" (for messages)

_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")  # 12,345.6 and 1,234
_DECIMAL_COMMA = re.compile(r"[+-]?(?:\d+|\d{1,3}(?:\.\d{3})+),\d+")  # 3,14 and 1.234,5
_INTEGER = re.compile(r"[+-]?\d+")
_DATE = re.compile(r"\d{4}([-/])\d{2}\1\d{2}(?:([T ])\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?")
_NAN_SPELLINGS = frozenset(("nan", "+nan", "-nan"))  # in any case: a number, not a string
DATE_PARTS = ("year", "month", "day", "weekday")
TIME_PARTS = ("hour", "minute")


def shown(value: str, limit: int = 30) -> str:
    """``repr`` of a value, shortened for a message."""
    return repr(value if len(value) <= limit else value[: limit - 3] + "...")


@dataclass(frozen=True)
class Tokens:
    """A column as codes into its distinct stripped values (``-1`` where missing)."""

    codes: np.ndarray
    values: list[str]

    @property
    def n_missing(self) -> int:
        return int((self.codes < 0).sum())

    def counts(self) -> np.ndarray:
        """Rows holding each distinct value."""
        return np.bincount(self.codes[self.codes >= 0], minlength=len(self.values))

    def first_row(self, flagged: np.ndarray) -> int:
        """The first row whose value is flagged (``flagged`` has one entry per distinct value)."""
        hit = np.zeros(len(self.values) + 1, dtype=bool)
        hit[:-1] = flagged  # index -1 (missing) reads the last entry: never flagged
        return int(np.argmax(hit[self.codes]))


def tokenize(raw: np.ndarray, missing: Collection[str]) -> Tokens:
    """Distinct values of the strings ``raw`` (stripped, in order of first appearance) and the
    code of each row."""
    codes, uniques = pd.factorize(raw, use_na_sentinel=True)
    return tokenize_codes(codes, np.asarray(uniques, dtype=object), missing)


def tokenize_codes(codes: np.ndarray, uniques: np.ndarray, missing: Collection[str]) -> Tokens:
    """:func:`tokenize` of a column given as codes (``-1``: no value) into distinct strings in
    any order (a pandas categorical)."""
    codes = np.asarray(codes, dtype=np.int64)
    seen = pd.unique(codes[codes >= 0])  # codes in order of first appearance
    if len(seen) != len(uniques) or np.any(seen != np.arange(len(seen))):
        rank = np.full(len(uniques) + 1, -1, dtype=np.int64)
        rank[seen] = np.arange(len(seen))
        codes, uniques = rank[codes], uniques[seen]
    stripped = np.array([str(u).strip() for u in uniques], dtype=object)
    merged, distinct = pd.factorize(stripped)
    is_missing = np.fromiter((v in missing for v in distinct), dtype=bool, count=len(distinct))
    index = np.where(is_missing, -1, np.cumsum(~is_missing) - 1)
    lookup = np.append(index[merged], -1)  # raw codes of -1 (NaN, never produced) stay missing
    values = [str(v) for v, m in zip(distinct, is_missing) if not m]
    return Tokens(lookup[codes].astype(np.int64), values)


@dataclass
class Part:
    """One feature made from a column: numbers (NaN where missing) or codes (-1 where missing)
    into the feature's categories."""

    feature: Feature
    values: np.ndarray


@dataclass
class ColumnPlan:
    """What a column becomes: its kind, the features made from it (none when left out) and the
    rule that decided."""

    name: str
    kind: ColumnKind
    declared: bool
    n_missing: int
    note: str
    parts: list[Part] = field(default_factory=list)

    @property
    def kept(self) -> bool:
        return bool(self.parts)


def read_separated(
    tok: Tokens, numbers: np.ndarray, is_number: np.ndarray, *, name: str, where: Where,
    path: str,
) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Numbers written with separators among the distinct values ``tok.values`` (``numbers``:
    their plain parse, NaN where ``is_number`` is False). Returns the numbers and the flags of
    every number-like value (separated ones included) and, when every value is one, a note
    saying how the column was read; ``None`` as the note otherwise (no separated value, or
    strings beside them: the caller's mixed-column rule). A column whose separated values
    fit both readings, or neither, is an error naming the line and the value."""
    others = np.flatnonzero(~is_number)
    thousands = np.zeros(len(tok.values), dtype=bool)
    decimal = np.zeros(len(tok.values), dtype=bool)
    for j in others.tolist():
        v = tok.values[j]
        if "," in v:
            thousands[j] = _THOUSANDS.fullmatch(v) is not None
            decimal[j] = _DECIMAL_COMMA.fullmatch(v) is not None
    separated = thousands | decimal
    if not separated.any():
        return numbers, is_number, None
    number_like = is_number | separated
    if not number_like.all():
        return numbers, number_like, None
    plain_integers = all(_INTEGER.fullmatch(tok.values[j]) for j in np.flatnonzero(is_number))
    as_thousands = bool(thousands[separated].all())
    as_decimal = bool(decimal[separated].all()) and plain_integers
    if as_thousands and as_decimal:
        j = int(np.flatnonzero(separated)[0])
        v = tok.values[j]
        raise ValueError(
            f"{path}, {where(tok.first_row(separated))}, column {name!r}: {shown(v)} is "
            f"{v.replace(',', '')} with ',' separating thousands or {v.replace(',', '.')} with "
            f"',' as the decimal mark, and no value of the column tells which; rewrite the "
            f"numbers without separators, or declare the column categorical to keep the text")
    if not (as_thousands or as_decimal):
        a = int(np.flatnonzero(thousands & ~decimal)[0]) if (thousands & ~decimal).any() else None
        b = int(np.flatnonzero(decimal & ~thousands)[0]) if (decimal & ~thousands).any() else None
        first = tok.first_row(separated)
        examples = " and ".join(shown(tok.values[j]) for j in (a, b) if j is not None)
        raise ValueError(
            f"{path}, {where(first)}, column {name!r}: numbers written with ',' both separating "
            f"thousands and as the decimal mark ({examples or shown(tok.values[tok.codes[first]])}"
            f"{'' if plain_integers else ', beside numbers with a decimal point'}); rewrite them "
            f"one way, or declare the column categorical to keep the text")
    out = numbers.copy()
    for j in np.flatnonzero(separated).tolist():
        v = tok.values[j]
        out[j] = float(v.replace(",", "") if as_thousands else
                       v.replace(".", "").replace(",", "."))
    j = int(np.flatnonzero(separated)[0])
    how = "separating thousands" if as_thousands else "as the decimal mark"
    note = (f"numbers written with ',' {how} ({shown(tok.values[j])} on "
            f"{where(tok.first_row(np.arange(len(tok.values)) == j))} is {out[j]:g})")
    return out, number_like, note


def plan_numbers(name: str, values: np.ndarray, declared: Declared) -> ColumnPlan:
    """A column the parser read as finite numbers with no missing value."""
    x = values.astype(np.float64)
    if declared is None and _is_row_number(x):
        return ColumnPlan(name, "identifier", False, 0, _row_number_note(x))
    note = "declared numeric" if declared else "every value is a number"
    return ColumnPlan(name, "numeric", declared is not None, 0, note, [Part(Feature(name), x)])


MIN_IDENTIFIER_ROWS = 10  # fewer rows are too few to call a column an identifier


def _is_row_number(x: np.ndarray) -> bool:
    return (x.size >= MIN_IDENTIFIER_ROWS and bool(np.all(np.diff(x) == 1.0))
            and float(x[0]).is_integer())


def _row_number_note(x: np.ndarray) -> str:
    return (f"the row number (consecutive integers {x[0]:.0f}..{x[-1]:.0f}): left out; "
            f"declare it numeric to keep it")


def plan_tokens(
    name: str,
    tok: Tokens,
    *,
    declared: Declared,
    dates: Literal["parts", "drop"],
    max_categories: int,
    where: Where,
    path: str,
) -> ColumnPlan:
    """Decide the kind of a column of strings (the module's rules) and make its features."""
    n, n_missing = len(tok.codes), tok.n_missing
    nullable = n_missing > 0
    if declared == "categorical":
        feat = Feature(name, "categorical", tuple(tok.values), nullable=nullable)
        return ColumnPlan(name, "categorical", True, n_missing, "declared categorical",
                          [Part(feat, tok.codes)])
    if not tok.values:
        if declared == "numeric":
            empty = Part(Feature(name, nullable=True), np.full(n, np.nan))
            return ColumnPlan(name, "numeric", True, n_missing,
                              "declared numeric; every value is missing", [empty])
        return ColumnPlan(name, "empty", False, n_missing,
                          f"every value is missing ({n:,} rows): left out")
    text = pd.Series(tok.values, dtype=object)
    lengths = text.str.len().to_numpy()
    numbers = np.asarray(pd.to_numeric(text, errors="coerce"), dtype=np.float64)
    is_number = ~np.isnan(numbers)
    for j in np.flatnonzero(~is_number & (lengths <= 4)).tolist():
        is_number[j] = tok.values[j].lower() in _NAN_SPELLINGS
    numbers, is_number, separated = read_separated(tok, numbers, is_number, name=name,
                                                   where=where, path=path)
    counts = tok.counts()
    if declared == "numeric" and not is_number.all():
        i = tok.first_row(~is_number)
        raise ValueError(
            f"{path}, {where(i)}, column {name!r}: non-numeric value "
            f"{shown(tok.values[tok.codes[i]])} in a numeric column "
            f"({int(counts[~is_number].sum()):,} such values)")
    if is_number.all():
        finite = np.isfinite(numbers)
        if not finite.all():
            i = tok.first_row(~finite)
            raise ValueError(f"{path}, {where(i)}, column {name!r}: non-finite value "
                             f"{tok.values[tok.codes[i]]!r}")
        x = np.where(tok.codes >= 0, numbers[tok.codes], np.nan)
        if declared is None and not nullable and _is_row_number(x):
            return ColumnPlan(name, "identifier", False, 0, _row_number_note(x))
        note = "declared numeric" if declared else "every value is a number"
        if separated is not None:
            note += f"; {separated}"
        if nullable:
            note += f"; {n_missing:,} missing"
        return ColumnPlan(name, "numeric", declared is not None, n_missing, note,
                          [Part(Feature(name, nullable=nullable), x)])
    if is_number.any():
        raise _mixed(path, name, tok, counts, is_number, "numbers", "strings", where)
    is_date = np.zeros(len(tok.values), dtype=bool)
    has_time = False
    maybe = (lengths >= 10) & text.str[4].isin(("-", "/")).to_numpy()
    for j in np.flatnonzero(maybe).tolist():
        match = _DATE.fullmatch(tok.values[j])
        if match is not None:
            is_date[j] = True
            has_time = has_time or match.group(2) is not None
    if is_date.all():
        return _plan_dates(name, tok, has_time, dates, where, path)
    if is_date.any():
        raise _mixed(path, name, tok, counts, is_date, "dates", "other strings", where)
    if not nullable and len(tok.values) == n and n >= MIN_IDENTIFIER_ROWS:
        return ColumnPlan(name, "identifier", False, 0,
                          "a different string on every row (a key or an id): left out; declare "
                          "it categorical to keep it")
    if len(tok.values) > max_categories:
        raise ValueError(
            f"{path}, column {name!r}: {len(tok.values):,} distinct strings in {n:,} rows, more "
            f"than max_categories={max_categories:,} one-hot columns; drop it, or declare it "
            f"categorical to encode every value")
    feat = Feature(name, "categorical", tuple(tok.values), nullable=nullable)
    note = f"no value is a number: {len(tok.values):,} categories"
    if nullable:
        note += f"; {n_missing:,} missing"
    return ColumnPlan(name, "categorical", False, n_missing, note, [Part(feat, tok.codes)])


def _mixed(
    path: str,
    name: str,
    tok: Tokens,
    counts: np.ndarray,
    is_a: np.ndarray,
    a: str,
    b: str,
    where: Where,
) -> ValueError:
    """A column holding values of two kinds ``a`` (numbers or dates, flagged by ``is_a``) and
    ``b`` (strings): the first value of the rarer kind, the counts, examples of ``b``."""
    n_a, n_b = int(counts[is_a].sum()), int(counts[~is_a].sum())
    others = np.flatnonzero(~is_a)
    top = others[np.argsort(-counts[others], kind="stable")][:3]
    examples = ", ".join(shown(tok.values[j]) for j in top)
    numbers = a == "numbers"
    if n_a >= n_b:
        i = tok.first_row(~is_a)
        value, column = ("non-numeric value", "a numeric column") if numbers else (
            "value", "a column of dates")
    else:
        i = tok.first_row(is_a)
        value, column = ("numeric value" if numbers else "date"), "a column of strings"
    what = f"{value} {shown(tok.values[tok.codes[i]])} in {column}"
    return ValueError(
        f"{path}, {where(i)}, column {name!r}: {what} — {plural(n_a, a)} and {plural(n_b, b)} "
        f"such as {examples}; declare it categorical or numeric, or list the strings as missing "
        f"values")


def plural(k: int, noun: str) -> str:
    """``"1 string"``, ``"905 strings"``, ``"3 other strings"``."""
    return f"{k:,} {noun if k != 1 else noun[:-1]}"


def _plan_dates(
    name: str,
    tok: Tokens,
    has_time: bool,
    dates: Literal["parts", "drop"],
    where: Where,
    path: str,
) -> ColumnPlan:
    parts = DATE_PARTS + (TIME_PARTS if has_time else ())
    n_missing = tok.n_missing
    form = "YYYY-MM-DD HH:MM" if has_time else "YYYY-MM-DD"
    if dates == "drop":
        return ColumnPlan(name, "datetime", False, n_missing,
                          f"dates ({form}): left out (dates='drop')")
    iso = pd.Series(tok.values, dtype=object).str.replace("/", "-", regex=False)
    stamps = pd.to_datetime(iso, format="ISO8601", errors="coerce")
    bad = stamps.isna().to_numpy()
    if bad.any():
        i = tok.first_row(bad)
        raise ValueError(f"{path}, {where(i)}, column {name!r}: {tok.values[tok.codes[i]]!r} "
                         f"is not a valid date")
    accessor = stamps.dt
    out: list[Part] = []
    for part in parts:
        attr = "day_of_week" if part == "weekday" else part
        distinct = np.asarray(getattr(accessor, attr), dtype=np.float64)
        x = np.where(tok.codes >= 0, distinct[tok.codes], np.nan)
        out.append(Part(Feature(f"{name}:{part}", nullable=n_missing > 0), x))
    note = (f"dates ({form}) -> numeric parts {', '.join(parts)}"
            f"{' (weekday: Monday = 0)' if 'weekday' in parts else ''}")
    if n_missing:
        note += f"; {n_missing:,} missing"
    return ColumnPlan(name, "datetime", False, n_missing, note, out)
