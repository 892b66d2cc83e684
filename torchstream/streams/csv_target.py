"""The target column of a CSV file: its task and labels, decided by a stated rule, and the
feature columns that would leak it.

Rule (when the task is not declared): labels that are all strings (``"yes"``, ``"True"``) are a
classification; numbers that are all integers are a classification with at most
``max_classes`` (20) distinct values and a regression with more; numbers with fractions are a
regression. Values that disagree with the rule are an error with the counts: numbers mixed with
strings (one ``abc`` among 0 / 1), or a few non-integers (at most 5 % of the rows) among integer
class labels (one ``0.5`` among 0 / 1). A missing or non-finite target is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from torchstream.schema import match_key
from torchstream.streams.base import Task
from torchstream.streams.csv_columns import Tokens, Where, plural, shown

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


def find_leaks(
    target: np.ndarray, features: dict[str, np.ndarray], *, min_rows: int = 10
) -> list[tuple[str, ...]]:
    """Complete numeric features equal to the target on every row, and pairs of them that sum
    to it on every row (exact float equality), for ``min_rows`` rows or more."""
    if len(target) < min_rows:
        return []
    t = target.astype(np.float64) + 0.0  # -0.0 -> 0.0
    head = min(len(t), 64)  # candidates agree on the first rows; the check is on every row
    leaks: list[tuple[str, ...]] = []
    by_head: dict[bytes, list[str]] = {}
    for name, x in features.items():
        if np.array_equal(x, t):
            leaks.append((name,))
        elif np.any(x):  # a column of zeros adds nothing to a sum
            by_head.setdefault((x[:head] + 0.0).tobytes(), []).append(name)
    seen: set[frozenset[str]] = set()
    for a, x in features.items():
        if (a,) in leaks or not np.any(x):
            continue
        for b in by_head.get((t[:head] - x[:head] + 0.0).tobytes(), []):
            pair = frozenset((a, b))
            if b == a or pair in seen:
                continue
            seen.add(pair)
            if np.array_equal(t - x + 0.0, features[b] + 0.0):
                leaks.append(tuple(n for n in features if n in pair))
    return leaks
