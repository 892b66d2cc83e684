"""A sweep's runs as Ray tasks, on one machine or a cluster without a shared file system.

Each run is a task that asks Ray for the run's :class:`Resources` (CPUs, GPUs — fractions
allowed — memory, custom resources). It runs in a temporary folder of the node Ray chose, and
its run directory comes back to the driver through Ray: the task returns it as bytes (a tar
archive), or writes it under an explicit ``storage`` path or URI that every node and the driver
can reach (any file system of ``fsspec``: a shared folder, ``s3://…``, ``gs://…``), from which
the driver fetches it. The driver unpacks every run into ``<out>/<run id>/``, so
``tensorboard --logdir <out>`` on the driver shows every run wherever it ran.

While a run goes on, each checkpoint it writes (``[sweep] checkpoint_every``) is sent, with the
run directory as it stands, to a :class:`SnapshotStore` actor on the driver's node, and the driver
copies it into ``<out>/<run id>/``. A task whose node is lost or whose worker process dies is
retried by Ray (``[sweep] retries``) and resumes from the run's last checkpoint with its logs up
to it; a sweep stopped and started again resumes its unfinished runs from the checkpoints in
``<out>``. Every run records where it ran (:data:`~torchstream.cli.sweep_jobs.RUN_INFO`): the
node, the GPU ids Ray assigned and its ``CUDA_VISIBLE_DEVICES``, the attempt, start and end.

Ray is an optional dependency (``pip install 'torchstream[ray]'``), imported when a sweep runs
on it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import fsspec  # type: ignore[import-untyped]

from torchstream.cli.sweep_jobs import (
    CHECKPOINT,
    RUN_INFO,
    Job,
    SnapshotWatcher,
    execute,
    pack,
    unpack,
)
from torchstream.distributed.ray_workers import connect, ray_module
from torchstream.distributed.snapshots import SnapshotStore
from torchstream.files import atomic_write

__all__ = ["Resources", "cluster_task", "parse_memory", "run_on_ray"]

_UNITS = {"": 1, "B": 1, "K": 10**3, "KB": 10**3, "M": 10**6, "MB": 10**6, "G": 10**9,
          "GB": 10**9, "T": 10**12, "TB": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30,
          "TIB": 2**40}
_MEMORY = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*")
#: Files of a run that a checkpoint snapshot leaves out (a finished run's marks).
_NOT_IN_SNAPSHOT = ("result.json", RUN_INFO)


def parse_memory(value: object, where: str = "memory") -> int:
    """Bytes from an integer or a string with a unit (``"512MiB"``, ``"2GB"``, ``"1.5GiB"``).

    >>> parse_memory("1.5GiB"), parse_memory(1000), parse_memory("2 GB")
    (1610612736, 1000, 2000000000)
    """
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        match = _MEMORY.fullmatch(value)
        if match and match.group(2).upper() in _UNITS:
            amount = float(match.group(1)) * _UNITS[match.group(2).upper()]
            if amount >= 1:
                return int(amount)
    raise ValueError(f"{where} must be a positive number of bytes or a string such as "
                     f"'512MiB' or '2GB', got {value!r}")


def _bytes(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


@dataclass(frozen=True)
class Resources:
    """What one run asks Ray for: ``cpus`` and ``gpus`` (fractions below 1 share a card; above
    1 a whole number), ``memory`` in bytes (None: no reservation) and ``custom`` resources of
    the cluster's nodes (``{"name": amount}``).

    >>> r = Resources(cpus=2, gpus=0.5, memory=2**31)
    >>> r.ray_options()
    {'num_cpus': 2, 'num_gpus': 0.5, 'memory': 2147483648}
    >>> r.describe(), r.fits({"CPU": 4, "GPU": 1, "memory": 2**32}), r.fits({"CPU": 4})
    ('2 CPUs, 0.5 GPU, 2.0 GiB', True, False)
    """

    cpus: float = 1
    gpus: float = 0
    memory: int | None = None
    custom: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, key in (("CPU", "cpus"), ("GPU", "gpus"), ("memory", "memory"),
                          ("object_store_memory", "memory")):
            if name in self.custom:
                raise ValueError(f"[resources] custom {name}: set it as [resources] {key}")
        for name, value in (("cpus", self.cpus), ("gpus", self.gpus), *self.custom.items()):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or value < 0:
                raise ValueError(f"[resources] {name} must be a number >= 0, got {value!r}")
            if value > 1 and value != int(value):
                raise ValueError(f"[resources] {name} = {value}: above 1 a resource is asked "
                                 "for in whole units (fractions below 1 share one)")

    def ray_options(self) -> dict[str, Any]:
        """The keyword arguments of Ray's ``.options()`` for one run."""
        options: dict[str, Any] = {"num_cpus": self.cpus, "num_gpus": self.gpus}
        if self.memory is not None:
            options["memory"] = self.memory
        if self.custom:
            options["resources"] = dict(self.custom)
        return options

    def wanted(self) -> dict[str, float]:
        """The amounts by Ray's resource names (only those asked for)."""
        out = {"CPU": float(self.cpus)}
        if self.gpus:
            out["GPU"] = float(self.gpus)
        if self.memory is not None:
            out["memory"] = float(self.memory)
        out.update({k: float(v) for k, v in self.custom.items()})
        return out

    def fits(self, node: Mapping[str, float]) -> bool:
        """Whether a node with ``node``'s total resources can hold one run."""
        return all(node.get(k, 0.0) >= v for k, v in self.wanted().items())

    def describe(self) -> str:
        parts = [f"{self.cpus:g} CPU{'s' if self.cpus != 1 else ''}"]
        if self.gpus:
            parts.append(f"{self.gpus:g} GPU{'s' if self.gpus > 1 else ''}")
        if self.memory is not None:
            parts.append(_bytes(self.memory))
        parts += [f"{v:g} {k}" for k, v in self.custom.items()]
        return ", ".join(parts)


def _storage(uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
    fs, root = fsspec.core.url_to_fs(uri)
    return fs, root.rstrip("/")


def stored_path(storage: str, run_id: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The file system and path of a run's archive under ``storage``."""
    fs, root = _storage(storage)
    return fs, f"{root}/{run_id}/run.tar"


def cluster_task(job: Job, store: Any, storage: str | None) -> tuple[dict[str, Any],
                                                                     bytes | None]:
    """One run as a Ray task: in a temporary folder of this node, from the store's latest
    snapshot of the run when there is one (a retry after a lost node, a rerun after a stopped
    sweep), its checkpoints sent to the store as they are written. Returns the run's info and
    its run directory as :func:`pack` bytes, or None when the directory went to ``storage``."""
    ray = ray_module()
    run_id = job.spec.run_id
    ctx = ray.get_runtime_context()
    where: dict[str, Any] = {
        "node_id": ctx.get_node_id(), "node_ip": ray.util.get_node_ip_address(),
        "host": socket.gethostname(), "pid": os.getpid(),
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    attempt = ray.get(store.start.remote(run_id, where))
    workdir = Path(tempfile.mkdtemp(prefix="torchstream-sweep-"))
    try:
        run_dir = workdir / run_id
        run_dir.mkdir()
        snapshot = ray.get(store.latest.remote(run_id))
        if snapshot is not None:
            unpack(snapshot, run_dir)
        started = time.time()

        def send(data: bytes) -> None:
            ray.get(store.put.remote(run_id, data))

        with SnapshotWatcher(run_dir, send, exclude=_NOT_IN_SNAPSHOT) as watcher:
            info: dict[str, Any] = execute(job.argv(workdir), str(run_dir))
        info.update(where, attempt=attempt, started=started, ended=time.time(),
                    snapshots_sent=watcher.sent, snapshots_lost=watcher.errors)
        job.finish(run_dir, str(info["status"]))
        atomic_write(run_dir / RUN_INFO, json.dumps(info).encode())
        data = pack(run_dir)
        if storage is None:
            return info, data
        fs, path = stored_path(storage, run_id)
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        fs.pipe_file(path, data)
        info["stored"] = fs.unstrip_protocol(path)
        return info, None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def check_cluster(ray: ModuleType, resources: Resources) -> str:
    """A line describing the cluster; a ``ValueError`` when no alive node can hold one run
    (Ray would wait for such a node for ever)."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    totals = [n.get("Resources", {}) for n in nodes]
    if not any(resources.fits(t) for t in totals):
        have = "; ".join(", ".join(f"{k} {_amount(k, v)}" for k, v in sorted(t.items())
                                   if k in resources.wanted())
                         for t in totals) or "no alive nodes"
        raise ValueError(f"no node of the Ray cluster can hold a run that asks for "
                         f"{resources.describe()} ([resources]); its nodes have: {have}")
    cpus = sum(t.get("CPU", 0) for t in totals)
    gpus = sum(t.get("GPU", 0) for t in totals)
    return (f"ray: {len(nodes)} node(s), {cpus:g} CPUs, {gpus:g} GPUs; each run asks for "
            f"{resources.describe()}")


def _amount(key: str, value: float) -> str:
    return _bytes(value) if key == "memory" else f"{value:g}"


def run_on_ray(jobs: Sequence[Job], out: Path, *, resources: Resources, retries: int,
               address: str | None, workers: int, storage: str | None,
               echo: Callable[[str], None]) -> Iterator[tuple[Job, dict[str, Any]]]:
    """Run ``jobs`` as Ray tasks and yield ``(job, info)`` as each ends, its run directory
    unpacked into ``out/<run id>`` first. Snapshots of unfinished runs are copied into ``out``
    as they arrive; runs with a checkpoint in ``out`` resume from it. A generator: the tasks
    still running are cancelled when it is closed (an interrupted sweep)."""
    ray = ray_module()
    started = connect(ray, address, num_cpus=max(1, math.ceil(workers * resources.cpus)))
    refs: dict[Any, Job] = {}
    store = None
    try:
        echo(check_cluster(ray, resources) + (
            f"; run directories come back through {storage}" if storage else
            "; run directories come back through Ray"))
        if storage is not None:
            fs, root = _storage(storage)
            fs.makedirs(root, exist_ok=True)
        here = ray.get_runtime_context().get_node_id()  # the store lives and dies with the driver
        strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(here, soft=False)
        store = ray.remote(SnapshotStore).options(num_cpus=0,
                                                  scheduling_strategy=strategy).remote()
        for job in jobs:  # an unfinished run of an earlier sweep: resumed from its checkpoint
            run_dir = out / job.spec.run_id
            if (run_dir / CHECKPOINT).is_file():
                ray.get(store.seed.remote(job.spec.run_id,
                                          pack(run_dir, exclude=_NOT_IN_SNAPSHOT)))
        task = ray.remote(cluster_task).options(max_retries=retries, retry_exceptions=[OSError],
                                                **resources.ray_options())
        refs = {task.remote(job, store, storage): job for job in jobs}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            for kind, run_id, n, detail in ray.get(store.events.remote()):
                if kind == "started":
                    gpus = f", GPU {','.join(detail['gpu_ids'])}" if detail["gpu_ids"] else ""
                    echo(f"  {run_id}: started on node {detail['node_id'][:8]} "
                         f"({detail['node_ip']}{gpus})" + (f", attempt {n}" if n > 1 else ""))
                else:
                    data = ray.get(store.latest.remote(run_id))
                    if data is not None:
                        unpack(data, out / run_id)
                        echo(f"  {run_id}: checkpoint {n} kept ({detail['bytes'] / 1024:.0f} "
                             "KiB)")
            for ref in ready:
                job = refs.pop(ref)
                yield job, _collect(ray, ref, job, out)
    finally:
        with contextlib.suppress(Exception):  # never hide why the sweep stopped
            # only the tasks not finished yet: cancelling one whose result is on its way can
            # crash Ray's driver ("complete task that was not pending")
            _, running = (ray.wait(list(refs), num_returns=len(refs), timeout=0) if refs
                          else ([], []))
            for ref in running:
                ray.cancel(ref, force=True)
            if store is not None:  # a driver that stays connected keeps no sweep's snapshots
                ray.kill(store)
        if started:
            ray.shutdown()


def _collect(ray: ModuleType, ref: Any, job: Job, out: Path) -> dict[str, Any]:
    """A finished task's info, its run directory unpacked into ``out/<run id>``."""
    run_dir = out / job.spec.run_id
    try:
        info, data = ray.get(ref)
        if data is None:
            fs, path = fsspec.core.url_to_fs(str(info["stored"]))
            data = fs.cat_file(path)
        unpack(data, run_dir)
    except Exception as e:  # noqa: BLE001 (a task lost for good, after Ray's retries)
        return {"status": "failed", "error": f"{type(e).__name__}: {_first_line(e)}",
                "wall_seconds": float("nan")}
    job.finish(run_dir, str(info["status"]))
    result = run_dir / "result.json"
    if result.is_file():  # where the logs are now: on the driver
        payload = json.loads(result.read_text())
        payload["logdir"] = str(run_dir / "tensorboard")
        atomic_write(result, json.dumps(payload, indent=1).encode())
    return info


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else ""
