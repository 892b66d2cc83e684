"""The target column of a CSV file: its task and labels, decided by a stated rule, and the
feature columns that would leak it.

Rule (when the task is not declared): labels that are all strings (``"yes"``, ``"True"``) are a
classification; numbers that are all integers are a classification with at most
``max_classes`` (20) distinct values and a regression with more; numbers with fractions are a
regression (numbers written with separators, ``"12,345.6"`` or ``"3,14"``, are numbers as for
a feature: :func:`~torchstream.streams.csv_columns.read_separated`). Values that disagree with
the rule are an error with the counts: numbers mixed with strings (one ``abc`` among 0 / 1), or
a few non-integers (at most 5 % of the rows) among integer class labels (one ``0.5`` among
0 / 1). A missing or non-finite target is an error.

Leaks (:func:`find_leaks`): a complete numeric feature that is an affine copy of a numeric
target (``x = a * y + b`` with ``a != 0``; ``a = 1, b = 0``: equal), or two that sum to it, on
every row within float tolerance (a relative ``1e-6`` of the magnitudes: ``0.1 + 0.2`` is
``0.3``, and a copy written with 7 significant digits is a copy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from torchstream.schema import match_key
from torchstream.streams.base import Task
from torchstream.streams.csv_columns import Tokens, Where, plural, read_separated, shown

__all__ = ["MAX_CLASSES", "TargetPlan", "find_leaks", "plan_target", "tokens_of_numbers"]

MAX_CLASSES = 20
_FEW = 0.05  # at most this share of non-integer rows among integer labels is a disagreement


@dataclass
class TargetPlan:
    """The task, the labels and the encoded targets of a target column."""

    name: str
    task: Task
    rule: str
    declared: bool
    labels: list[Any]
    targets: torch.Tensor
    classes: list[Any] | None
    class_counts: list[int] | None
    numbers: np.ndarray | None  # the values as float64 when every label is a number


def tokens_of_numbers(values: np.ndarray) -> Tokens:
    """Tokens of a column the parser read as numbers (no value is missing)."""
    codes, distinct = pd.factorize(values)
    text = [str(v) for v in distinct.tolist()]
    return Tokens(codes.astype(np.int64), text)


def plan_target(
    name: str,
    tok: Tokens,
    *,
    task: Task | None,
    where: Where,
    path: str,
    max_classes: int = MAX_CLASSES,
) -> TargetPlan:
    """Decide the task of the target ``tok`` (the module's rule) and encode its labels."""
    n = len(tok.codes)
    if tok.n_missing:
        i = int(np.argmax(tok.codes < 0))
        raise ValueError(f"{path}, {where(i)}: missing value in the target column {name!r} "
                         f"({tok.n_missing:,} of {n:,} rows)")
    numbers = np.asarray(pd.to_numeric(np.array(tok.values, dtype=object), errors="coerce"),
                         dtype=np.float64)
    is_number = ~np.isnan(numbers)
    numbers, is_number, separated = read_separated(tok, numbers, is_number, name=name,
                                                   where=where, path=path)
    counts = tok.counts()
    if is_number.any() and not np.isfinite(numbers[is_number]).all():
        i = tok.first_row(is_number & ~np.isfinite(numbers))
        raise ValueError(f"{path}, {where(i)}: non-finite value {shown(tok.values[tok.codes[i]])}"
                         f" in the target column {name!r}")
    declared = task is not None
    if is_number.all():
        integer = numbers == np.round(numbers)
        n_distinct = len(np.unique(numbers))
        if task is None:
            if integer.all():
                task = "classification" if n_distinct <= max_classes else "regression"
                rule = (f"integer values, {n_distinct:,} distinct "
                        f"({'at most' if task == 'classification' else 'more than'} "
                        f"{max_classes}): {task}")
            else:
                n_frac = int(counts[~integer].sum())
                n_int_values = len(np.unique(numbers[integer]))
                if n_frac <= _FEW * n and 0 < n_int_values <= max_classes:
                    i = tok.first_row(~integer)
                    examples = ", ".join(shown(tok.values[j]) for j in np.flatnonzero(~integer)[:3])
                    raise ValueError(
                        f"{path}, {where(i)}: target {shown(tok.values[tok.codes[i]])} is not "
                        f"an integer — column {name!r} holds {plural(n - n_frac, 'integers')} "
                        f"with {n_int_values} distinct values (class labels?) and "
                        f"{plural(n_frac, 'non-integers')} such as {examples}; fix the values "
                        f"or declare the task (task= / --task)")
                task, rule = "regression", "numbers with fractions: regression"
        else:
            rule = f"declared {task}"
        if separated is not None:
            rule += f"; {separated}"
        labels_of = [int(v) if v.is_integer() else float(v) for v in numbers.tolist()]
        return _encode(name, tok, task, rule, declared, labels_of, numbers)
    if task == "regression":
        i = tok.first_row(~is_number)
        raise ValueError(
            f"{path}, {where(i)}: target {shown(tok.values[tok.codes[i]])} is not a number, "
            f"but the task is regression ({int(counts[~is_number].sum()):,} such values)")
    if is_number.any() and task is None:
        i = tok.first_row(~is_number)
        top = np.flatnonzero(~is_number)
        top = top[np.argsort(-counts[top], kind="stable")][:3]
        raise ValueError(
            f"{path}, {where(i)}: target {shown(tok.values[tok.codes[i]])} is not a number — "
            f"column {name!r} holds {plural(int(counts[is_number].sum()), 'numbers')} and "
            f"{plural(int(counts[~is_number].sum()), 'strings')} such as "
            f"{', '.join(shown(tok.values[j]) for j in top)}; fix the values, or declare "
            f"task='classification' (--task classification) to keep every value as a class "
            f"label")
    rule = "declared classification" if declared else "the labels are strings: classification"
    return _encode(name, tok, "classification", rule, declared, list(tok.values), None)


def _encode(
    name: str,
    tok: Tokens,
    task: Task,
    rule: str,
    declared: bool,
    labels_of: list[Any],
    numbers: np.ndarray | None,
) -> TargetPlan:
    """Labels per row, and class codes (sorted classes) or regression targets."""
    values = None if numbers is None else numbers[tok.codes]
    if task == "regression":
        assert values is not None
        labels = (values.astype(np.int64).tolist() if all(type(v) is int for v in labels_of)
                  else np.array(labels_of, dtype=object)[tok.codes].tolist())
        targets = torch.from_numpy(values.astype(np.float32))
        return TargetPlan(name, task, rule, declared, labels, targets, None, None, values)
    first: dict[Any, Any] = {}
    for v in labels_of:  # "1" and "1.0" are one class
        first.setdefault(match_key(v), v)
    classes = sorted(first.values())
    code_of = {match_key(c): k for k, c in enumerate(classes)}
    token_code = np.array([code_of[match_key(v)] for v in labels_of], dtype=np.int64)
    codes = token_code[tok.codes]
    labels = np.array(classes, dtype=object)[codes].tolist()
    counts = np.bincount(codes, minlength=len(classes)).tolist()
    return TargetPlan(name, task, rule, declared, labels, torch.from_numpy(codes), classes,
                      counts, values)


#: Relative tolerance of the leak rules: the numbers of a text file carry about 7 significant
#: digits or more, so a copy (or a sum) written with fewer is still found.
LEAK_RTOL = 1e-6


def find_leaks(
    target: np.ndarray, features: dict[str, np.ndarray], *, min_rows: int = 10
) -> list[tuple[tuple[str, ...], str]]:
    """Complete numeric features that leak the target on every row, within float tolerance
    (:data:`LEAK_RTOL`), for ``min_rows`` rows or more: affine copies ``x = a * y + b``
    (``a != 0``; for a target of two values only from ``5 * min_rows`` rows, where a column
    that merely matches the two labels is rare by chance), and pairs that sum to the target.
    Returns each group of column names with its relation to the target, a format string whose
    ``{t}`` is the target (``"equals {t}"``, ``"equals 2 * {t} + 1"``, ``"sum to {t}"``).

    >>> y = np.arange(12.0)
    >>> a = y % 5 + 0.1
    >>> find_leaks(y, {"a": a, "b": y - a, "c": 2 * y + 1, "d": y % 3})
    [(('c',), 'equals 2 * {t} + 1'), (('a', 'b'), 'sum to {t}')]
    """
    n = len(target)
    if n < min_rows:
        return []
    t = target.astype(np.float64) + 0.0  # -0.0 -> 0.0
    leaks: list[tuple[tuple[str, ...], str]] = []
    names = list(features)
    distinct = len(np.unique(t))
    affine_ok = distinct >= 3 or (distinct == 2 and n >= 5 * min_rows)
    copies = set()
    lo, hi = int(np.argmin(t)), int(np.argmax(t))
    for name in names:
        x = features[name].astype(np.float64)
        if affine_ok and t[hi] != t[lo]:
            a = (x[hi] - x[lo]) / (t[hi] - t[lo])
            b = x[lo] - a * t[lo]
            if a != 0 and _close(x, a * t + b, np.abs(x) + np.abs(a * t) + abs(b)):
                copies.add(name)
                leaks.append(((name,), _affine(a, b, float(np.abs(x).max()))))
    leaks += _pairs(t, {k: v for k, v in features.items() if k not in copies})
    return leaks


def _close(u: np.ndarray, v: np.ndarray, scale: np.ndarray) -> bool:
    """``u`` and ``v`` agree on every row within :data:`LEAK_RTOL` of ``scale``."""
    tiny = np.finfo(np.float64).tiny
    return bool(np.all(np.abs(u - v) <= LEAK_RTOL * scale + tiny))


def _affine(a: float, b: float, scale: float) -> str:
    """``x = a * y + b`` in words: ``a`` and ``b`` to 6 digits, each 0 (or ``a`` 1) where it
    is within the tolerance (``b`` relative to ``scale``, the column's largest magnitude)."""
    a_r = 1.0 if abs(a - 1) <= LEAK_RTOL else float(f"{a:.6g}")
    b_r = 0.0 if abs(b) <= LEAK_RTOL * scale else float(f"{b:.6g}")
    if a_r == 1 and b_r == 0:
        return "equals {t}"
    scaled = "{t}" if a_r == 1 else "-{t}" if a_r == -1 else f"{a_r:g} * {{t}}"
    return f"equals {scaled}" + ("" if b_r == 0 else f" {'+-'[b_r < 0]} {abs(b_r):g}")


def _pairs(t: np.ndarray, features: dict[str, np.ndarray]) -> list[tuple[tuple[str, ...], str]]:
    """Pairs of columns that sum to ``t`` on every row within tolerance. Candidates agree on
    a random projection of the first rows (sorted, one search per column), then on every row."""
    names = [k for k, x in features.items() if np.any(x)]  # a column of zeros adds nothing
    if len(names) < 2:
        return []
    head = min(len(t), 64)
    F = np.stack([features[k][:head].astype(np.float64) for k in names], 1)
    w = np.random.default_rng(0).standard_normal(head)
    proj, mag = w @ F, np.abs(w) @ np.abs(F)
    t_proj, t_mag = float(w @ t[:head]), float(np.abs(w) @ np.abs(t[:head]))
    order = np.argsort(proj, kind="stable")
    ranked = proj[order]
    slack = LEAK_RTOL * (t_mag + mag + mag.max()) + np.finfo(np.float64).tiny
    found: list[tuple[tuple[str, ...], str]] = []
    for i in range(len(names)):
        need = t_proj - proj[i]
        start = np.searchsorted(ranked, need - slack[i], side="left")
        stop = np.searchsorted(ranked, need + slack[i], side="right")
        for j in order[start:stop].tolist():
            if j <= i:
                continue
            xa, xb = features[names[i]], features[names[j]]
            if _close(xa[:head] + xb[:head], t[:head], np.abs(t[:head]) + np.abs(xa[:head])
                      + np.abs(xb[:head])) and _close(xa + xb, t, np.abs(t) + np.abs(xa)
                                                      + np.abs(xb)):
                found.append(((names[i], names[j]), "sum to {t}"))
    order_of = {k: n for n, k in enumerate(features)}
    return [(tuple(sorted(g, key=order_of.__getitem__)), r) for g, r in found]
