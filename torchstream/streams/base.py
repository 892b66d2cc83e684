"""The :class:`Stream` protocol: rows at the edge, tensor batches inside."""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterator, Sequence
from typing import Any, Literal

import torch

from torchstream.schema import Schema, match_key

Task = Literal["classification", "regression"]
Row = dict[Hashable, Any]

__all__ = ["Row", "Stream", "Task", "infer_task"]


def infer_task(labels: Sequence[Any], *, max_classes: int = 20) -> Task:
    """Classification when any label is a string / bool, or when all labels are integer-valued
    with at most ``max_classes`` distinct values; regression otherwise."""
    if any(isinstance(v, (str, bool)) for v in labels):
        return "classification"
    distinct = set(labels)
    if len(distinct) <= max_classes and all(float(v).is_integer() for v in distinct):
        return "classification"
    return "regression"


class Stream:
    """A finite or infinite, restartable sequence of ``(x: dict, y)`` rows.

    Subclasses implement :meth:`_rows` (a fresh, deterministic iterator over all rows). A stream
    knows its :class:`~torchstream.schema.Schema`, its task, its classes (for classification, in
    code order), its length when finite (``n_samples``) and, when synthetic, the positions of its
    known drifts (``drift_positions``, row indices where the new concept starts).

    Labels of a classification stream become class indices in :meth:`batches` through
    ``classes``; a stream whose classes are not known up front (``classes=None``) registers new
    labels in order of first appearance. Labels are matched as categories are (see
    :func:`~torchstream.schema.match_key`): ``True`` and ``1`` are different labels, so a stream
    with classes ``(False, True)`` rejects the label ``1`` rather than mapping it to ``True``.
    """

    def __init__(
        self,
        schema: Schema,
        *,
        task: Task,
        classes: Sequence[Any] | None = None,
        n_samples: int | None = None,
        drift_positions: Sequence[int] = (),
        name: str | None = None,
    ) -> None:
        if task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
        if n_samples is not None and n_samples < 0:
            raise ValueError(f"n_samples must be >= 0, got {n_samples}")
        self.schema = schema
        self.task: Task = task
        self.classes: list[Any] | None = None
        self._codes: dict[Any, int] = {}
        if task == "classification":
            self.classes = []
            for c in classes or ():
                self._register(c)
            self._fixed_classes = classes is not None
        self.n_samples = n_samples
        self.drift_positions = tuple(int(p) for p in drift_positions)
        self.name = name or type(self).__name__
        #: Where the rows come from, when a file (path, size, hash of its head): part of a
        #: run's identity, so a checkpoint is resumed only on the same data.
        self.source: dict[str, Any] | None = None

    # ------------------------------------------------------------------ subclass hook
    def _rows(self) -> Iterator[tuple[Row, Any]]:
        raise NotImplementedError

    # ------------------------------------------------------------------ rows
    def __iter__(self) -> Iterator[tuple[Row, Any]]:
        rows = self._rows()
        if self.n_samples is not None:
            rows = itertools.islice(rows, self.n_samples)
        return rows

    def __len__(self) -> int:
        if self.n_samples is None:
            raise TypeError(f"stream {self.name!r} is infinite; it has no length")
        return self.n_samples

    @property
    def n_features(self) -> int:
        """Number of encoded columns ``d`` of the tensors this stream yields."""
        return self.schema.n_columns

    @property
    def n_classes(self) -> int | None:
        return None if self.classes is None else len(self.classes)

    def __repr__(self) -> str:
        n = "inf" if self.n_samples is None else self.n_samples
        return (
            f"{type(self).__name__}(name={self.name!r}, task={self.task!r}, n_samples={n}, "
            f"d={self.n_features}, drifts={list(self.drift_positions)})"
        )

    # ------------------------------------------------------------------ labels
    def register_classes(self, labels: Sequence[Any]) -> None:
        """Know ``labels`` as classes, new ones appended in order (known ones are left as they
        are; e.g. the classes a resumed run had seen)."""
        for label in labels:
            self._register(label)

    def _register(self, label: Any) -> int:
        key = match_key(label)
        code = self._codes.get(key)
        if code is None:
            code = len(self._codes)
            self._codes[key] = code
            assert self.classes is not None
            self.classes.append(label)
        return code

    def encode_targets(
        self, labels: Sequence[Any], *, first_row: int = 0, device: torch.device | str | None = None
    ) -> torch.Tensor:
        """Labels -> class indices (``long``) or regression targets (``float32``) ``[n]``."""
        if self.task == "classification":
            codes = []
            for i, lab in enumerate(labels):
                code = self._codes.get(match_key(lab))
                if code is None:
                    if self._fixed_classes:
                        raise ValueError(
                            f"row {first_row + i}: label {lab!r} is not one of the stream's "
                            f"classes {self.classes!r}"
                        )
                    code = self._register(lab)
                codes.append(code)
            return torch.tensor(codes, dtype=torch.long, device=device)
        try:
            y = torch.tensor([float(v) for v in labels], dtype=torch.float64)
        except (TypeError, ValueError):
            for i, v in enumerate(labels):
                try:
                    float(v)
                except (TypeError, ValueError):
                    raise ValueError(
                        f"row {first_row + i}: regression target {v!r} is not a number"
                    ) from None
            raise
        bad = ~torch.isfinite(y)
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            raise ValueError(f"row {first_row + i}: regression target {labels[i]!r} is not finite")
        return y.to(device=device, dtype=torch.float32)

    # ------------------------------------------------------------------ tensors
    def batches(
        self,
        size: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        start: int = 0,
        stop: int | None = None,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Yield ``(X [b, d], y [b])`` tensors of ``size`` rows (the last batch may be shorter),
        for rows ``start`` (inclusive) to ``stop`` (exclusive, default: the end)."""
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"batch size must be a positive integer, got {size!r}")
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start}")
        return self._batches(size, device, dtype, start, stop)

    def _batches(
        self,
        size: int,
        device: torch.device | str | None,
        dtype: torch.dtype,
        start: int,
        stop: int | None,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Row-based batching (subclasses holding tensors slice them instead)."""
        it = iter(self)
        skipped = itertools.islice(it, start)
        if self.task == "classification" and not self._fixed_classes:
            for _, lab in skipped:  # labels seen before `start` keep their codes
                self._register(lab)
        else:
            for _ in skipped:
                pass
        pos = start
        while stop is None or pos < stop:
            n = size if stop is None else min(size, stop - pos)
            chunk = list(itertools.islice(it, n))
            if not chunk:
                return
            xs, ys = zip(*chunk)
            X = self.schema.encode(xs, dtype=dtype, device=device, first_row=pos)
            y = self.encode_targets(ys, first_row=pos, device=device)
            yield X, y
            pos += len(chunk)

    def n_batches(self, size: int, start: int = 0) -> int | None:
        """Number of batches :meth:`batches` yields, when the stream is finite."""
        if self.n_samples is None:
            return None
        return math.ceil(max(self.n_samples - start, 0) / size)

    def take(self, n: int) -> Stream:
        """This stream cut to its first ``n`` rows."""
        return _Take(self, n)


class _Take(Stream):
    def __init__(self, base: Stream, n: int) -> None:
        if n < 0:
            raise ValueError(f"take(n) needs n >= 0, got {n}")
        total = n if base.n_samples is None else min(n, base.n_samples)
        super().__init__(
            base.schema,
            task=base.task,
            classes=base.classes if base.task == "classification" and base._fixed_classes else None,
            n_samples=total,
            drift_positions=[p for p in base.drift_positions if p < total],
            name=base.name,
        )
        self.base = base
        if base.task == "classification":  # share the label codes with the base stream
            self.classes, self._codes = base.classes, base._codes
            self._fixed_classes = base._fixed_classes

    def _rows(self) -> Iterator[tuple[Row, Any]]:
        return iter(self.base)

    def batches(self, size: int, **kwargs: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        stop = kwargs.pop("stop", None)
        stop = self.n_samples if stop is None else min(stop, self.n_samples or 0)
        yield from self.base.batches(size, stop=stop, **kwargs)
