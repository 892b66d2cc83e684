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


def _wait(work: dist.Work | None, poll: bool) -> None:
    """Wait for an asynchronous collective, by polling it (``sched_yield`` between polls)
    where ``poll``; its error, if any, is raised."""
    assert work is not None
    while poll and not work.is_completed():
        os.sched_yield()
    work.wait()


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
    process group is needed). ``poll``: wait for the step's collective by polling it
    (:meth:`synchronise`), where the worker has a CPU of its own.

    >>> ex = Exchange(rank=1, workers=2)
    >>> ex.start(torch.zeros(5, 3)), ex.local_n, ex.sizes()
    (slice(3, 5, None), 2, [3, 2])
    """

    def __init__(self, rank: int, workers: int, *, poll: bool = True) -> None:
        self.rank, self.workers = rank, workers
        self.poll = poll
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
        #: The rows waiting for the step's exchange (:meth:`queue`).
        self.held: list[tuple[torch.Tensor, str, Callable[[torch.Tensor], None]]] = []
        #: What each joined explainer's plug-in call answers this step (it explained during
        #: the test, so that its contributions travel in the step's one exchange).
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

    def queue(self, values: torch.Tensor, kind: str,
              receive: Callable[[torch.Tensor], None]) -> None:
        """Hold ``values`` (this worker's ``local_n`` rows of a value, ``[b_r, ...]``) for the
        step's exchange: :meth:`synchronise` hands ``receive`` every worker's rows concatenated
        in rank order (the global batch's row order)."""
        self.held.append((values.detach(), kind, receive))

    def synchronise(self, gradients: torch.Tensor, riders: Sequence[float]) -> torch.Tensor:
        """The step's one synchronisation point, one ``all_reduce`` (float64) of one buffer:
        the rows held by :meth:`queue`, each worker's in its own rows of the global batch and
        zeros elsewhere (so the sum is every worker's rows, exactly), ``gradients`` (this
        worker's, flat, weighted by its share of the global batch's rows) and ``riders`` (a few
        numbers: the loss, a stop request). Each held value's ``receive`` is then called with
        the global batch's rows, in its own dtype, in the order they were held. Returns the
        summed gradients and riders (float64).

        Where ``poll``, the worker waits for the collective by polling it, yielding its CPU to
        any other thread that is ready (gloo's among them), rather than by sleeping: a CPU that
        sleeps wakes late when the collective completes (on a virtual machine about 1.5 ms a
        step, waking through the hypervisor)."""
        held, self.held = self.held, []
        if self.workers == 1:  # nothing to exchange: each value as it is
            for values, _, receive in held:
                receive(values)
            return torch.cat([gradients.reshape(-1).double(),
                              torch.tensor(list(riders), dtype=torch.float64)])
        widths = [math.prod(v.shape[1:]) for v, _, _ in held]
        n, width = self.n, sum(widths)
        buffer = torch.zeros(n * width + gradients.numel() + len(riders), dtype=torch.float64)
        block = buffer[: n * width].view(n, width)
        col = 0
        for (values, _, _), w in zip(held, widths):
            block[self.rows, col : col + w] = values.reshape(values.shape[0], w)
            col += w
        tail = buffer[n * width :]
        tail[: gradients.numel()] = gradients.reshape(-1)
        tail[gradients.numel() :] = torch.tensor(list(riders), dtype=torch.float64)
        _wait(dist.all_reduce(buffer, async_op=True), self.poll)
        size = buffer.element_size()
        self.bytes["gradients"] += gradients.numel() * size
        self.bytes["loss"] += len(riders) * size
        for (_, kind, _), w in zip(held, widths):
            self.bytes[kind] += n * w * size
        col = 0
        for (values, _, receive), w in zip(held, widths):
            receive(block[:, col : col + w].to(values.dtype).reshape(n, *values.shape[1:]))
            col += w
        return tail

    def all_sum(self, values: list[float], kind: str) -> list[float]:
        """``values`` summed over the workers (float64)."""
        t = torch.tensor(values, dtype=torch.float64)
        if self.workers > 1:
            dist.all_reduce(t)
            self.bytes[kind] += t.numel() * t.element_size()
        return t.tolist()

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
