"""One worker's side of a data-parallel run (:mod:`torchstream.distributed.data_parallel`):
which rows of each global batch it takes (:func:`shard`), the rows its explainers see
(:class:`WorkerRows`) and the collectives between the workers (:class:`Exchange`)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist

from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.step import Batch
from torchstream.typing import BatchView

__all__ = ["Exchange", "Explainer", "WorkerRows", "shard"]

#: The explainers whose contributions the workers combine.
Explainer = IncrementalPFI | IncrementalSAGE
T = TypeVar("T")


def shard(n: int, workers: int, rank: int) -> slice:
    """The rows of a global batch of ``n`` rows that worker ``rank`` takes: the ``rank``-th of
    ``workers`` contiguous parts whose sizes differ by at most one (``torch.tensor_split``).

    >>> [shard(8, 2, r) for r in (0, 1)], [shard(5, 2, r) for r in (0, 1)]
    ([slice(0, 4, None), slice(4, 8, None)], [slice(0, 3, None), slice(3, 5, None)])
    """
    base, extra = divmod(n, workers)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (1 if rank < extra else 0))


@dataclass(frozen=True)
class WorkerRows(Batch):
    """A worker's rows of a global batch, as its explainers see them (told apart from the
    runner's global :class:`~torchstream.step.Batch` by its type)."""


class Exchange:
    """One worker's side of the run: its ``rank`` among ``workers``, the global batch of the
    current step and the collectives that refer to it, and the bytes it sent per kind.

    While a run steps, ``stop`` answers whether this worker was asked to stop (its
    ``should_stop``, or the parent process gone); every worker stops after the same step
    (:meth:`ShardedLearner.learn` agrees on it). With one worker nothing is exchanged (no
    process group is needed).

    >>> ex = Exchange(rank=1, workers=2)
    >>> ex.start(torch.zeros(5, 3)), ex.local_n, ex.sizes()
    (slice(3, 5, None), 2, [3, 2])
    """

    def __init__(self, rank: int, workers: int) -> None:
        self.rank, self.workers = rank, workers
        self.stop: Callable[[], bool] | None = None
        self.parent = os.getppid()
        self.X: torch.Tensor | None = None  # the global batch
        self.n = 0
        self.rows = slice(0, 0)
        self.local_n = 0
        self.steps = 0
        self.bytes: dict[str, float] = {"gradients": 0.0, "contributions": 0.0,
                                        "predictions": 0.0, "loss": 0.0}
        #: The joined explainers, in the order every worker runs them.
        self.explainers: list[Explainer] = []
        self.stop_agreed = False
        self.pids: list[int] = []
        #: The current global batch's labels and first row's stream position (the test of a
        #: global batch explains this worker's rows with them).
        self.labels: tuple[torch.Tensor, int] | None = None
        #: This worker's predictions of the batch, waiting to travel with the first
        #: explainer's contributions (one ``all_gather`` for both); then every worker's.
        self.carry: torch.Tensor | None = None
        self.carried: torch.Tensor | None = None
        #: What each joined explainer's plug-in call answers this step (it explained during
        #: the test, so that its contributions carried the predictions).
        self.explained: dict[int, object] = {}

    def start(self, X: torch.Tensor) -> slice:
        """A new global batch ``X``: this worker's rows of it."""
        self.X, self.n = X, X.shape[0]
        self.rows = shard(self.n, self.workers, self.rank)
        self.local_n = self.rows.stop - self.rows.start
        self.steps += 1
        return self.rows

    def own_rows(self) -> slice:
        """The rows this worker computes with: its own, or (a worker without rows in a short
        last batch) the batch's first row, computed and then given no weight, so that it takes
        part in every collective."""
        return self.rows if self.local_n else slice(0, 1)

    def local(self, batch: BatchView) -> WorkerRows:
        """This worker's rows of a plug-in's global ``batch``."""
        rows = self.own_rows()
        return WorkerRows(batch.step, batch.start + rows.start, batch.X[rows], batch.y[rows],
                     batch.y_pred[rows], batch.learner)

    def sizes(self) -> list[int]:
        return [shard(self.n, self.workers, r).stop - shard(self.n, self.workers, r).start
                for r in range(self.workers)]

    def gather_rows(self, values: torch.Tensor, kind: str) -> torch.Tensor:
        """Every worker's ``values [b_r, ...]`` concatenated in rank order (the global batch's
        row order); ``values`` holds this worker's ``local_n`` rows."""
        return self.gather_many([(values, kind)])[0]

    def gather_many(self, items: Sequence[tuple[torch.Tensor, str]]) -> list[torch.Tensor]:
        """:meth:`gather_rows` of several tensors of this worker's rows in one ``all_gather``
        (one flat buffer of their common dtype: each value travels exactly)."""
        values = [v.detach() for v, _ in items]
        if self.workers == 1:
            return values
        sizes = self.sizes()
        top = max(sizes)
        dtype = values[0].dtype
        for v in values[1:]:
            dtype = torch.promote_types(dtype, v.dtype)
        widths = [math.prod(v.shape[1:]) for v in values]
        padded = values[0].new_zeros((top, sum(widths)), dtype=dtype)
        col = 0
        for v, w in zip(values, widths):
            padded[: v.shape[0], col : col + w] = v.reshape(v.shape[0], w)
            col += w
        parts = [torch.empty_like(padded) for _ in range(self.workers)]
        dist.all_gather(parts, padded)
        whole = torch.cat([part[:s] for part, s in zip(parts, sizes)])
        out: list[torch.Tensor] = []
        col = 0
        for (v, kind), w in zip(zip(values, (k for _, k in items)), widths):
            out.append(whole[:, col : col + w].to(v.dtype).reshape(whole.shape[0], *v.shape[1:]))
            self.bytes[kind] += top * w * padded.element_size()
            col += w
        return out

    def all_sum(self, values: list[float], kind: str) -> list[float]:
        """``values`` summed over the workers (float64)."""
        t = torch.tensor(values, dtype=torch.float64)
        if self.workers > 1:
            dist.all_reduce(t)
            self.bytes[kind] += t.numel() * t.element_size()
        return t.tolist()

    def average_gradients(self, params: Sequence[torch.Tensor],
                          riders: Sequence[float] = ()) -> list[float]:
        """Each gradient (its rows' mean) weighted by the worker's share of the rows, summed
        over the workers: the gradient of the global batch's mean loss. ``riders`` (a few
        numbers: the loss, a stop request) are summed in the same ``all_reduce``, in the
        gradients' dtype; returns their sums."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads]) * (self.local_n / self.n)
        size = flat.numel()
        if riders:
            flat = torch.cat([flat, torch.tensor(list(riders), dtype=flat.dtype)])
        if self.workers > 1:
            dist.all_reduce(flat)
            self.bytes["gradients"] += size * flat.element_size()
            self.bytes["loss"] += len(riders) * flat.element_size()
        sums = flat[size:].tolist()
        flat = flat[:size]
        offset = 0
        for p, g in zip(params, grads):
            size = g.numel()
            n = g.numel()
            p.grad = flat[offset : offset + n].view_as(g).clone()
            offset += n
        return [float(v) for v in sums]

    def gather_objects(self, obj: object) -> list[object] | None:
        """Every worker's ``obj`` on rank 0 (None elsewhere)."""
        if self.workers == 1:
            return [obj]
        out: list[object] | None = [None] * self.workers if self.rank == 0 else None
        dist.gather_object(obj, out, dst=0)
        return out

    def broadcast(self, obj: T) -> T:
        """Rank 0's ``obj`` on every worker."""
        if self.workers == 1:
            return obj
        box: list[object] = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]  # type: ignore[return-value]
