"""A finite stream held in memory: rows encoded once into a tensor, batches are slices of it."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import torch

from torchstream.schema import Schema, match_key
from torchstream.streams.base import Row, Stream, Task, infer_task

if TYPE_CHECKING:
    from torchstream.streams.csv_inference import CSVInference

__all__ = ["ColumnRows", "TableStream", "sorted_labels"]


def sorted_labels(labels: Iterable[Any]) -> list[Any]:
    """The distinct labels, sorted when they can be (keyed like a stream's classes: ``True`` and
    ``1`` stay two labels)."""
    first: dict[Any, Any] = {}
    for v in labels:
        first.setdefault(match_key(v), v)
    distinct = list(first.values())
    try:
        return sorted(distinct)
    except TypeError:
        return distinct


class ColumnRows(Sequence[Row]):
    """Dict rows built on demand from one array per feature.

    ``columns`` maps a feature name to ``(values, missing)``: ``values`` is a numpy array of
    numbers, or of codes into ``categories`` when ``categories`` is given (``missing`` marks
    the rows whose value is ``None``).
    """

    def __init__(
        self,
        columns: dict[Hashable, tuple[np.ndarray, np.ndarray, Sequence[Any] | None]],
        n: int,
    ) -> None:
        self._columns = columns
        self._n = n
        self._lists: dict[Hashable, list[Any]] | None = None

    def __len__(self) -> int:
        return self._n

    def _materialize(self) -> dict[Hashable, list[Any]]:
        if self._lists is None:
            lists: dict[Hashable, list[Any]] = {}
            for name, (values, missing, categories) in self._columns.items():
                if categories is not None:
                    table = np.array([*categories, None], dtype=object)
                    lists[name] = table[np.where(missing, len(categories), values)].tolist()
                else:
                    col = values.astype(np.float64).tolist()
                    for i in np.flatnonzero(missing).tolist():
                        col[i] = None
                    lists[name] = col
            self._lists = lists
        return self._lists

    @overload
    def __getitem__(self, i: int) -> Row: ...

    @overload
    def __getitem__(self, i: slice) -> list[Row]: ...

    def __getitem__(self, i: int | slice) -> Row | list[Row]:
        lists = self._materialize()
        if isinstance(i, slice):
            return [{k: v[j] for k, v in lists.items()} for j in range(*i.indices(self._n))]
        j = range(self._n)[i]
        return {k: v[j] for k, v in lists.items()}

    def __iter__(self) -> Iterator[Row]:
        lists = self._materialize()
        names = list(lists)
        return (dict(zip(names, vals)) for vals in zip(*lists.values()))


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
    targets
        The encoded labels ``[n]`` when they are already known (class codes into ``classes`` as
        ``long``, or regression targets); computed from ``labels`` when ``None``.
    inference
        How a file's columns were read (:class:`~torchstream.streams.csv_inference.CSVInference`),
        for streams read from a file.
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
        targets: torch.Tensor | None = None,
        inference: CSVInference | None = None,
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
            classes = sorted_labels(labels)
        super().__init__(schema, task=task, classes=classes, n_samples=len(labels), name=name)
        self._X = X.detach().to("cpu", torch.float64)
        self._labels = list(labels)
        self._raw_rows = rows
        self.inference = inference
        self._y = self.encode_targets(self._labels) if targets is None else self._check(targets)

    def _check(self, targets: torch.Tensor) -> torch.Tensor:
        if targets.shape != (len(self._labels),):
            raise ValueError(
                f"targets must have shape [{len(self._labels)}], got {list(targets.shape)}")
        if self.task == "regression":
            return targets.to("cpu", torch.float32)
        if targets.dtype != torch.long or self.classes is None:
            raise ValueError("classification targets must be class codes (long) with classes")
        if len(targets) and (int(targets.min()) < 0 or int(targets.max()) >= len(self.classes)):
            raise ValueError(f"class codes must lie in [0, {len(self.classes)})")
        return targets.to("cpu")

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
