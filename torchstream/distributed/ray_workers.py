"""The workers of a data-parallel run as Ray actors: one actor per worker (a CPU each; worker
0 on the caller's node where it has a CPU free, the others anywhere on the cluster), joined by
``torch.distributed`` (gloo) at worker 0's node address; the same loop as
:func:`~torchstream.distributed.processes.launch` runs on this machine's processes.

Ray is an optional dependency (``pip install 'torchstream[ray]'``), imported by
:func:`ray_module` when a run asks for it.
"""

from __future__ import annotations

import builtins
import socket
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any, TypeVar

from torchstream.distributed.exchange import Exchange
from torchstream.distributed.processes import (
    DEFAULT_TIMEOUT,
    WorkerFailed,
    check_workers,
    failure,
    read_result,
    run_worker,
)

__all__ = ["RankActor", "connect", "connected", "launch_ray", "ray_module"]

T = TypeVar("T")


class RankActor:
    """One worker of a data-parallel run as a Ray actor (``ray.remote(RankActor)``):
    :meth:`address` names a port on its node (rank 0's: the others join the process group
    there), :meth:`run` joins the group as ``rank`` and runs ``target(exchange)``; rank 0
    returns the result as ``torch.save`` bytes (read back weights-only by the caller)."""

    def address(self) -> str:
        """``host:port``: this node's address and a port free on it."""
        host = socket.gethostbyname(socket.gethostname())
        with socket.socket() as s:
            s.bind((host, 0))
            return f"{host}:{s.getsockname()[1]}"

    def node(self) -> str:
        """The Ray id of the node this actor runs on."""
        return str(ray_module().get_runtime_context().get_node_id())

    def run(self, target: Callable[[Exchange], object], rank: int, workers: int, address: str,
            timeout: float) -> bytes | None:
        try:
            return run_worker(target, rank, workers, f"tcp://{address}", timeout)
        except BaseException as e:  # noqa: BLE001 (its message and traceback go to the caller)
            raise RuntimeError(f"{failure(e)}\n{traceback.format_exc()}") from None


def ray_module() -> ModuleType:
    """Ray, or a ``ValueError`` that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ValueError("running on Ray needs Ray: pip install 'torchstream[ray]'") from None
    return ray


def connect(ray: ModuleType, address: str | None, *, num_cpus: int | None = None) -> bool:
    """Connect to the Ray cluster at ``address`` (None or ``"local"``: start Ray on this
    machine, with ``num_cpus`` CPUs, default all) unless Ray is running in this process
    already; True when this call started it. A ``ValueError`` says why Ray cannot be
    reached."""
    if ray.is_initialized():
        return False
    try:
        if address in (None, "local"):
            ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level="ERROR",
                     log_to_driver=False)
        else:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except Exception as e:  # noqa: BLE001 (any failure to connect is reported)
        raise ValueError(f"cannot reach Ray at {address or 'a new local Ray'}: "
                         f"{type(e).__name__}: {e}") from None
    return True


@contextmanager
def connected(ray: ModuleType, address: str | None) -> Iterator[None]:
    """Inside: connected to Ray as :func:`connect` does; at the end, Ray shut down again if
    this call started it (and ``print`` given back: Ray puts its own in ``builtins``)."""
    own_print = builtins.print
    started = connect(ray, address)
    try:
        yield
    finally:
        if started:
            ray.shutdown()
            builtins.print = own_print


def launch_ray(target: Callable[[Exchange], T], workers: int, *, ray: ModuleType,
               returns: Sequence[type] = (), timeout: float = DEFAULT_TIMEOUT,
               on_start: Callable[[list[str], str], None] | None = None) -> T:
    """Run ``target(exchange)`` on ``workers`` Ray actors (one CPU each) of the cluster this
    process is connected to (:func:`connect`) and return rank 0's result (read weights-only:
    tensors, plain values and the classes in ``returns``). Worker 0 is placed on this
    process's node where it has a CPU free (so that the files it writes are here), elsewhere
    otherwise; the others where Ray places them. ``on_start`` is called with the id of each
    worker's node (rank order) and this process's node once they are placed. ``target``
    travels by Ray's serialisation and runs where the actors are placed (torchstream installed
    there). Raises :class:`~torchstream.distributed.processes.WorkerFailed`, naming the
    worker, when an actor dies or its ``target`` raises; every actor is then killed."""
    workers = check_workers(workers)
    remote = ray.remote(RankActor)
    here = str(ray.get_runtime_context().get_node_id())
    near = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(here, soft=True)
    first = remote.options(num_cpus=1, max_restarts=0, scheduling_strategy=near)
    rest = remote.options(num_cpus=1, max_restarts=0)
    actors = [first.remote(), *(rest.remote() for _ in range(workers - 1))]
    try:
        address = ray.get(actors[0].address.remote())
        if on_start is not None:
            on_start([str(n) for n in ray.get([a.node.remote() for a in actors])], here)
        refs = [a.run.remote(target, r, workers, address, timeout)
                for r, a in enumerate(actors)]
        rank_of = {ref: r for r, ref in enumerate(refs)}
        pending, result = list(refs), None
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                value = _outcome(ray, ref, rank_of[ref])
                if rank_of[ref] == 0:
                    result = read_result(value, returns)
        return result  # type: ignore[return-value]
    finally:
        for a in actors:
            ray.kill(a)


def _outcome(ray: ModuleType, ref: Any, rank: int) -> bytes:
    """What worker ``rank`` returned; :class:`WorkerFailed` naming it when it died or raised."""
    try:
        return ray.get(ref)  # type: ignore[no-any-return]
    except ray.exceptions.RayActorError as e:
        raise WorkerFailed(f"worker {rank} (a Ray actor) died; the run is stopped",
                           str(e)) from None
    except ray.exceptions.RayTaskError as e:
        message = str(e.cause) if e.cause is not None else str(e)
        first = message.splitlines()[0] if message else type(e).__name__
        raise WorkerFailed(f"worker {rank} failed: {first}", message) from None
