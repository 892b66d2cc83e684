"""The worker processes of a data-parallel run: :func:`launch` starts them (joined by
``torch.distributed`` with gloo), watches them and reads rank 0's result back weights-only
(:func:`read_result`); a worker that fails or dies is :class:`WorkerFailed`."""

from __future__ import annotations

import importlib
import io
import multiprocessing as mp
import os
import queue
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.process import BaseProcess
from typing import Any, Generic, TypeVar

import torch
import torch.distributed as dist

from torchstream.distributed.exchange import Exchange

__all__ = ["DEFAULT_TIMEOUT", "Named", "WorkerFailed", "check_workers", "failure", "launch",
           "read_result", "run_worker", "worker_cpus"]

T = TypeVar("T")

#: Seconds a collective waits for the other workers (a worker that dies is noticed at once by
#: the parent; this bounds a worker that hangs, e.g. rank 0 writing a long drift report).
DEFAULT_TIMEOUT = 1800.0


class WorkerFailed(RuntimeError):
    """A worker of a data-parallel run failed or died; the message names it, ``details`` holds
    the failed worker's traceback (empty for a worker that died)."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


@dataclass(frozen=True)
class Named(Generic[T]):
    """A worker's function ``module.name(exchange, *args)``, imported in the worker (a
    command's module that imports the command line itself)."""

    module: str
    name: str
    args: tuple[object, ...] = ()

    def __call__(self, exchange: Exchange) -> T:
        fn: Callable[..., T] = getattr(importlib.import_module(self.module), self.name)
        return fn(exchange, *self.args)


def check_workers(workers: object) -> int:
    """``workers`` when it is a positive integer, else a ``ValueError``."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    return workers


def run_worker(target: Callable[[Exchange], object], rank: int, workers: int,
             init_method: str, timeout: float, on_joined: Callable[[], None] | None = None,
             *, poll: bool = True) -> bytes | None:
    """One worker's whole part: join the gloo process group at ``init_method`` as ``rank``,
    learn every worker's process id, call ``on_joined``, run ``target(exchange)`` (its
    :class:`Exchange` polling its collectives where ``poll``) and leave the group; rank 0's
    result as ``torch.save`` bytes (its tensors' bytes travel in them), None on the others."""
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=workers,
                            timeout=timedelta(seconds=timeout))
    exchange = Exchange(rank, workers, poll=poll)
    pids: list[object] = [None] * workers
    dist.all_gather_object(pids, os.getpid())
    exchange.pids = [int(p) for p in pids]  # type: ignore[call-overload]
    if on_joined is not None:
        on_joined()
    out = target(exchange)
    dist.destroy_process_group()
    if rank != 0:
        return None
    buffer = io.BytesIO()
    torch.save(out, buffer)
    return buffer.getvalue()


def failure(e: BaseException) -> str:
    """A worker's error in one line (a command's ``error: ...`` exit without its prefix)."""
    if isinstance(e, SystemExit) and isinstance(e.code, str):
        return e.code.removeprefix("error: ")
    return f"{type(e).__name__}: {e}"


def _worker(target: Callable[[Exchange], object], rank: int, workers: int, address: str,
            results: Any, timeout: float, cpus: set[int] | None, poll: bool) -> None:
    # a process group of its own: Ctrl-C at the terminal reaches the parent alone, which
    # passes a stop request on to every worker (each gets one signal)
    os.setpgid(0, 0)
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    try:
        out = run_worker(target, rank, workers, address, timeout,
                         lambda: results.put(("running", rank, os.getpid())), poll=poll)
        if out is not None:  # rank 0's (bytes: the queue's own pickler would share tensors'
            results.put(("ok", rank, out))  # memory, gone when this process ends)
    except BaseException as e:  # noqa: BLE001 (reported to the parent, which stops the run)
        results.put(("failed", rank, f"{failure(e)}\n{traceback.format_exc()}"))
        _end(results, 1)
    _end(results, 0)


def _end(results: Any, code: int) -> None:
    """End this worker with ``code`` once its messages are sent and its output flushed,
    without the interpreter's teardown: the process group's threads can make it abort
    (SIGABRT) after the work is done, which the parent would take for a death."""
    results.close()
    results.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def worker_cpus(workers: int, threads: int = 1) -> list[set[int] | None]:
    """The CPUs each of ``workers`` workers of ``threads`` torch threads is pinned to: worker
    ``r`` the ``r``-th ``threads`` CPUs this process may run on, when it may run on at least
    ``workers * threads`` (else None each: the workers share the CPUs as the system schedules
    them). A pinned worker is not moved between cores mid-step, so the workers reach each
    collective closer together (less waiting).

    >>> allowed = sorted(os.sched_getaffinity(0))
    >>> worker_cpus(1) == [{allowed[0]}], worker_cpus(len(allowed) + 1)[0]
    (True, None)
    """
    if not cpus_each(workers, threads):
        return [None] * workers
    allowed = sorted(os.sched_getaffinity(0))
    return [set(allowed[r * threads : (r + 1) * threads]) for r in range(workers)]


def cpus_each(workers: int, threads: int = 1) -> bool:
    """Whether this process may run on ``threads`` CPUs for each of ``workers`` workers."""
    return len(os.sched_getaffinity(0)) >= workers * threads


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(target: Callable[[Exchange], T], workers: int, *, returns: Sequence[type] = (),
           timeout: float = DEFAULT_TIMEOUT,
           on_start: Callable[[list[int]], None] | None = None,
           signal_to_pass: Callable[[], int | None] | None = None, pin: bool = True,
           threads: int = 1) -> T:
    """Run ``target(exchange)`` in ``workers`` processes on this machine (``spawn``; joined by
    ``torch.distributed`` with gloo; each in a process group of its own) and return rank 0's
    result. ``target`` must pickle (a module-level function, a :class:`Named`); its result
    travels as ``torch.save`` bytes read back weights-only: tensors, plain containers and
    values, and instances of the classes in ``returns`` (nothing else is rebuilt). ``on_start``
    is called with the workers' process ids once every worker has joined. ``signal_to_pass``
    is asked while they run; the first signal number it answers is sent to every worker (a
    stop request the parent received). ``timeout``: seconds a collective may wait for a
    worker. ``pin``: where this process may run on at least ``workers * threads`` CPUs,
    worker ``r`` runs on the ``r``-th ``threads`` of them only (:func:`worker_cpus`;
    ``threads``: the torch threads each worker uses). Raises :class:`WorkerFailed`,
    naming the worker, when one fails or dies (the others are stopped)."""
    workers = check_workers(workers)
    cpus = worker_cpus(workers, threads) if pin else [None] * workers
    # a worker polls its collectives where every worker has CPUs of its own; where they
    # share CPUs, a poller would take a peer's compute time (3 workers on 2 CPUs: 5-9 % slower)
    poll = cpus_each(workers, threads)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    address = f"tcp://127.0.0.1:{_free_port()}"
    procs: list[BaseProcess] = [
        ctx.Process(target=_worker, args=(target, r, workers, address, results, timeout,
                                          cpus[r], poll), name=f"torchstream-worker-{r}")
        for r in range(workers)]
    for p in procs:
        p.start()
    answered = False
    try:
        out: T = _wait(procs, results, returns, on_start, signal_to_pass)
        answered = True
        return out
    finally:
        if answered:  # rank 0 has answered: the others end on their own
            for p in procs:
                p.join(timeout=30)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, signal.SIGKILL)
                p.join()


def _wait(procs: list[BaseProcess], results: Any, returns: Sequence[type],
          on_start: Callable[[list[int]], None] | None,
          signal_to_pass: Callable[[], int | None] | None) -> Any:
    """Rank 0's result; a :class:`WorkerFailed` naming the worker that died or failed first (a
    worker that died is named before the errors its peers then met in a collective)."""
    running: dict[int, int] = {}
    passed = False
    while True:
        signum = None if passed or signal_to_pass is None else signal_to_pass()
        if signum is not None:
            passed = True
            for p in procs:
                if p.pid is not None and p.exitcode is None:
                    os.kill(p.pid, signum)
        try:
            status, rank, payload = results.get(timeout=0.2)
        except queue.Empty:
            dead = _dead(procs)
            if dead:
                raise WorkerFailed(dead) from None
            if procs[0].exitcode == 0:  # rank 0 ended without a result (cannot happen)
                raise WorkerFailed("worker 0 ended without its result") from None
            continue
        if status == "running":
            running[rank] = int(payload)
            if len(running) == len(procs) and on_start is not None:
                on_start([running[r] for r in range(len(procs))])
        elif status == "ok":
            return read_result(payload, returns)
        else:
            deadline = time.monotonic() + 2.0  # a peer's death makes the others' errors
            while time.monotonic() < deadline:
                dead = _dead(procs, signalled=True, besides=rank)
                if dead:
                    raise WorkerFailed(dead) from None
                time.sleep(0.05)
            first, _, details = str(payload).partition("\n")
            raise WorkerFailed(f"worker {rank} (pid {procs[rank].pid}) failed: {first}; the "
                               "run is stopped", details)


def read_result(payload: bytes, returns: Sequence[type] = ()) -> Any:
    """A worker's result from its ``torch.save`` bytes, read weights-only: tensors, plain
    containers and values, and instances of the classes in ``returns``; any other object is
    refused (``pickle.UnpicklingError``), so reading it runs no code."""
    with torch.serialization.safe_globals(list(returns)):
        return torch.load(io.BytesIO(payload), weights_only=True)


def _dead(procs: list[BaseProcess], *, signalled: bool = False,
          besides: int | None = None) -> str | None:
    """A message naming the first worker (other than ``besides``) that ended with an error
    (``signalled``: killed by a signal), or None."""
    for rank, p in enumerate(procs):
        if rank == besides:
            continue
        code = p.exitcode
        if code is not None and (code < 0 if signalled else code != 0):
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            return f"worker {rank} (pid {p.pid}) died ({how}); the run is stopped"
    return None
