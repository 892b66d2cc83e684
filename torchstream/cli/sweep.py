"""``torchstream sweep config.toml``: a grid of ``torchstream run`` jobs, gathered into one table.

A sweep config is a TOML file::

    [sweep]
    name = "demo"              # the output directory is runs/sweep-<name> unless `out` is set
    workers = 2                # parallel runs (processes, or Ray tasks)
    executor = "local"         # or "ray"; `ray_address` = "auto" / "ray://host:10001" / unset
    [grid]                     # the product of these lists is the grid
    streams = ["agrawal-drift", "sea-drift"]
    models = ["mlp", "probit"]
    explain = ["ipfi,isage", "none"]
    seeds = [0, 1]
    [run]                      # options given to every run (names of `torchstream run` options)
    n_samples = 2000
    batch_size = 8

    [resources]                # what each run asks Ray for (executor "ray")
    cpus = 1                   # default 1
    gpus = 0.5                 # default 0; below 1 runs share a card, above 1 whole cards
    memory = "2GiB"            # bytes or a size with its unit; default: no reservation
    custom = {big_node = 1}    # the cluster's own resources

Every run gets ``<out>/<run id>/`` with its TensorBoard logs and ``result.json``; the table of
all runs goes to ``<out>/results.csv`` (one row per run: the grid values, status, error,
seconds, final metrics and explainer values). Progress is printed as runs end, one line each.

More ``[sweep]`` keys: ``checkpoint_every`` (batches between a run's checkpoints, kept in its
folder while it is unfinished; a rerun resumes an unfinished run from it, not from row 0),
``keep_checkpoints`` (a finished run keeps its checkpoint), ``retries`` (Ray's retries of a run
whose node was lost, default 3: it resumes from its last checkpoint) and ``storage`` (a path or
URI every Ray node and the driver reach, where runs leave their folders for the driver;
default: through Ray). On Ray a run's folder comes back to the driver wherever it ran
(:mod:`~torchstream.cli.sweep_ray`), and a run that asks for no GPU runs on the CPU. A failed run is reported with its error and does
not stop the grid; a rerun skips the runs that have a ``result.json`` (one that is not a complete
run result, e.g. cut short, is an error naming it). The whole config is checked (unknown keys,
model and stream names, run options, CUDA availability, the Ray address, the grid's size —
at most :data:`MAX_RUNS` runs, counted before any is built — and that no run appears twice)
before any run starts. The output directory is held by one sweep at a time (a lock naming the
holder), its ``results.csv`` is never written over an input, and an existing ``results.csv``
that is not a sweep's table is replaced only with ``--overwrite``.

Every value is checked against the type of its ``torchstream run`` option (a flag takes
``true``/``false``, a number option a number, a list option a list of strings, a choice one of
its choices), and no value can become an option of its own: a string may not start with ``-``,
and single values are passed as ``--option=value``. The options the sweep sets itself or that
read or write files of a run (``logdir``, ``result_json``, ``checkpoint``, ``checkpoint_every``,
``resume``, ``trust_checkpoint``, ``overwrite``, ``no_progress``) are refused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing as mp
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from torchstream.cli.names import EXPLAINERS
from torchstream.cli.outputs import Output, check_outputs, read_result_json
from torchstream.cli.run_args import run_parser
from torchstream.cli.sweep_jobs import CHECKPOINT, RESERVED_RUN, RUN_INFO, Job, RunSpec, execute
from torchstream.cli.sweep_ray import Resources, parse_memory, run_on_ray
from torchstream.distributed.ray_workers import ray_module
from torchstream.files import PathLock, atomic_write
from torchstream.learners.registry import available_learners
from torchstream.streams import SYNTHETIC

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "RunSpec",
    "SweepConfig",
    "check_runs",
    "execute",
    "load_sweep",
    "run_sweep",
    "sweep_command",
]

_SWEEP_KEYS = {"name", "out", "workers", "executor", "ray_address", "retries",
               "checkpoint_every", "keep_checkpoints", "storage"}
_RESOURCE_KEYS = {"cpus", "gpus", "memory", "custom"}
_GRID_KEYS = {"streams": "stream", "models": "model", "explain": "explain", "seeds": "seed",
              "batch_sizes": "batch_size", "lrs": "lr"}
#: The most runs a grid may make (its size is the product of the grid lists' lengths, counted
#: before any run is built).
MAX_RUNS = 100_000


@dataclass
class SweepConfig:
    name: str
    out: Path
    workers: int = 1
    executor: str = "local"
    ray_address: str | None = None
    grid: dict[str, list[Any]] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    #: The config file it was read from (an input: no output may replace it).
    source: Path | None = None
    #: What each run asks Ray for (the ``ray`` executor).
    resources: Resources = field(default_factory=Resources)
    #: Ray's retries of a run whose node was lost or whose worker process died.
    retries: int = 3
    #: Batches between a run's checkpoints (None: no checkpoints while it runs).
    checkpoint_every: int | None = None
    #: A finished run keeps its checkpoint in its folder.
    keep_checkpoints: bool = False
    #: A path or URI every node and the driver reach, where runs on Ray leave their folders
    #: for the driver (None: they come back through Ray).
    storage: str | None = None

    def jobs(self, runs: Sequence[RunSpec], executor: str) -> list[Job]:
        """The runs as the sweep executes them. On Ray a run that asks for no GPU and leaves
        ``device`` at ``auto`` runs on the CPU (Ray shows a task every card of its node when
        it asked for none)."""
        out = []
        for spec in runs:
            if (executor == "ray" and not self.resources.gpus
                    and spec.options.get("device", "auto") == "auto"):
                spec = RunSpec(spec.run_id, {**spec.options, "device": "cpu"})
            out.append(Job(spec, self.checkpoint_every, self.keep_checkpoints))
        return out

    def runs(self) -> list[RunSpec]:
        """The grid's runs, in a fixed order; ``ValueError`` when the grid makes more than
        :data:`MAX_RUNS` runs (counted first) or a run twice."""
        keys = list(self.grid)
        size = math.prod(len(self.grid[k]) for k in keys)
        if size > MAX_RUNS:
            sizes = " x ".join(f"{k} {len(self.grid[k]):,}" for k in keys)
            raise ValueError(f"the grid makes {size:,} runs ({sizes}); a sweep runs at most "
                             f"{MAX_RUNS:,}")
        for k in keys:
            seen: list[Any] = []
            for v in self.grid[k]:
                if v in seen:
                    raise ValueError(f"[grid] {k} lists {v!r} twice: the same runs twice")
                seen.append(v)
        out = []
        ids: dict[str, tuple[Any, ...]] = {}
        for values in product(*(self.grid[k] for k in keys)):
            options = dict(self.run)
            parts = []
            for k, v in zip(keys, values):
                options[_GRID_KEYS[k]] = v
                parts.append(f"{_GRID_KEYS[k]}={_short(v)}")
            run_id = re.sub(r"[^A-Za-z0-9_.=,-]+", "_", "-".join(parts)) or "run"
            if run_id in ids:
                raise ValueError(f"the grid values {list(ids[run_id])} and {list(values)} give "
                                 f"the same run folder {run_id!r}")
            ids[run_id] = values
            out.append(RunSpec(run_id, options))
        return out


def _fail(path: Path, message: str) -> None:
    raise ValueError(f"{path}: {message}")


def load_sweep(path: str | Path) -> SweepConfig:
    """Read and check a sweep config (see the module docstring)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"sweep config not found: {path}")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None
    unknown = sorted(set(raw) - {"sweep", "grid", "run", "resources"})
    if unknown:
        _fail(path, f"unknown sections {unknown}; known: sweep, grid, run, resources")
    for section in ("sweep", "grid", "run", "resources"):
        if not isinstance(raw.get(section, {}), dict):
            _fail(path, f"[{section}] must be a table, got {raw[section]!r}")
    sweep = dict(raw.get("sweep", {}))
    bad = sorted(set(sweep) - _SWEEP_KEYS)
    if bad:
        _fail(path, f"unknown keys {bad} in [sweep]; known: {sorted(_SWEEP_KEYS)}")
    options = _run_options()
    grid = dict(raw.get("grid", {}))
    bad = sorted(set(grid) - set(_GRID_KEYS))
    if bad:
        _fail(path, f"unknown keys {bad} in [grid]; known: {sorted(_GRID_KEYS)}")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            _fail(path, f"[grid] {k} must be a non-empty list, got {v!r}")
        try:
            grid[k] = [_checked(f"[grid] {k}[{i}]", options[_GRID_KEYS[k]], x)
                       for i, x in enumerate(v)]
        except ValueError as e:
            _fail(path, str(e))
    run: dict[str, Any] = {}
    for key, value in raw.get("run", {}).items():
        dest = key.replace("-", "_")
        if dest == "workers":
            _fail(path, f"[run] {key}: a sweep runs each run in one process ([sweep] workers "
                        "sets how many runs go in parallel); `torchstream run --workers N` "
                        "splits one run's stream over N processes")
        if dest in RESERVED_RUN:
            _fail(path, f"[run] {key}: set by the sweep itself or reads or writes a run's "
                        f"files; a sweep config cannot set it")
        if dest not in options:
            known = ", ".join(sorted(set(options) - RESERVED_RUN))
            _fail(path, f"unknown key {key!r} in [run]: not an option of `torchstream run`; "
                        f"known: {known}")
        if dest in run:
            _fail(path, f"[run] {key} is given twice (as {dest!r} and {key!r})")
        try:
            run[dest] = _checked(f"[run] {key}", options[dest], value)
        except ValueError as e:
            _fail(path, str(e))
    if "streams" not in grid and "stream" not in run:
        grid.setdefault("streams", ["agrawal-drift"])
    clash = sorted({_GRID_KEYS[k] for k in grid} & set(run))
    if clash:
        _fail(path, f"{clash} appear both in [grid] and in [run]")
    for key in ("name", "out", "ray_address"):
        if key in sweep and (not isinstance(sweep[key], str) or not sweep[key]):
            _fail(path, f"[sweep] {key} must be a non-empty string, got {sweep[key]!r}")
    name = sweep.get("name", path.stem)
    workers = sweep.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        _fail(path, f"[sweep] workers must be a positive integer, got {workers!r}")
    executor = sweep.get("executor", "local")
    if executor not in ("local", "ray"):
        _fail(path, f"[sweep] executor must be 'local' or 'ray', got {executor!r}")
    out = Path(sweep.get("out", Path("runs") / f"sweep-{name}"))
    config = SweepConfig(name, out, workers, executor, sweep.get("ray_address"), grid, run, path)
    for key in ("retries", "checkpoint_every"):
        value = sweep.get(key)
        low = 0 if key == "retries" else 1
        if key in sweep and (not isinstance(value, int) or isinstance(value, bool)
                             or value < low):
            _fail(path, f"[sweep] {key} must be an integer >= {low}, got {value!r}")
    config.retries = sweep.get("retries", 3)
    config.checkpoint_every = sweep.get("checkpoint_every")
    keep = sweep.get("keep_checkpoints", False)
    if not isinstance(keep, bool):
        _fail(path, f"[sweep] keep_checkpoints must be true or false, got {keep!r}")
    config.keep_checkpoints = keep
    storage = sweep.get("storage")
    if storage is not None and (not isinstance(storage, str) or not storage):
        _fail(path, f"[sweep] storage must be a non-empty path or URI, got {storage!r}")
    config.storage = storage
    try:
        config.resources = _resources(raw.get("resources", {}))
    except ValueError as e:
        _fail(path, str(e))
    return config


def _resources(table: Mapping[str, Any]) -> Resources:
    """The ``[resources]`` table: ``cpus``, ``gpus``, ``memory`` (bytes or '2GiB'), ``custom``
    (a table of the cluster's resource names and amounts)."""
    bad = sorted(set(table) - _RESOURCE_KEYS)
    if bad:
        raise ValueError(f"unknown keys {bad} in [resources]; known: {sorted(_RESOURCE_KEYS)}")
    custom = table.get("custom", {})
    if not isinstance(custom, dict):
        raise ValueError(f"[resources] custom must be a table of resource amounts, got "
                         f"{custom!r}")
    memory = table.get("memory")
    return Resources(cpus=table.get("cpus", 1), gpus=table.get("gpus", 0),
                     memory=None if memory is None else parse_memory(memory,
                                                                     "[resources] memory"),
                     custom=custom)


def _run_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``run`` sub-command's parser inside a ``torchstream`` parser."""
    return parser._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]


def _run_options() -> dict[str, argparse.Action]:
    """``torchstream run``'s options by config key (``--batch-size``: ``batch_size``)."""
    return {opt[2:].replace("-", "_"): action
            for action in _run_parser(run_parser())._actions
            for opt in action.option_strings if opt.startswith("--")}


def _checked(where: str, action: argparse.Action, value: Any) -> Any:
    """``value`` if it has the type of ``action``'s option, else a ``ValueError``."""
    if isinstance(action, argparse._StoreConstAction):  # store_true / store_false
        if not isinstance(value, bool):
            raise ValueError(f"{where} must be true or false, got {value!r}")
        return value
    if type(action) is not argparse._StoreAction:
        raise ValueError(f"{where}: not an option a sweep can set")
    nargs = action.nargs
    if nargs in ("*", "+") or isinstance(nargs, int):
        if not isinstance(value, list):
            raise ValueError(f"{where} must be a list, got {value!r}")
        if (nargs == "+" and not value) or (isinstance(nargs, int) and len(value) != nargs):
            count = nargs if isinstance(nargs, int) else "at least 1"
            raise ValueError(f"{where} must have {count} item(s), got {value!r}")
        return [_checked_item(f"{where}[{i}]", action, v) for i, v in enumerate(value)]
    return _checked_item(where, action, value)


def _checked_item(where: str, action: argparse.Action, value: Any) -> Any:
    if action.type is int:
        ok, expect = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif action.type is float:
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value))
        expect = "a finite number"
    else:  # passed as a string: never one that argparse could read as an option
        ok = isinstance(value, str) and value != "" and not value.startswith("-")
        expect = "a non-empty string that does not start with '-'"
    if not ok:
        raise ValueError(f"{where} must be {expect}, got {value!r}")
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"{where} must be one of {sorted(action.choices)}, got {value!r}")
    return value


def check_runs(config: SweepConfig, executor: str | None = None) -> list[RunSpec]:
    """Parse every run's options with the ``run`` command's parser and check the names (models,
    streams, explainers, device) before anything runs. On Ray (``executor``, default the
    config's) a run on a CUDA device needs ``[resources] gpus`` (it gets the cards Ray assigns
    it, on a node that has them: the driver needs none)."""
    executor = executor or config.executor
    parser = run_parser()
    runs = config.runs()
    for spec in runs:
        argv = spec.argv(config.out)
        try:
            args = _parse(parser, argv)
        except ValueError as e:
            raise ValueError(f"run {spec.run_id}: {e}") from None
        _check_names(args, available_learners(), EXPLAINERS, spec.run_id,
                     ray_gpus=config.resources.gpus if executor == "ray" else None)
    return runs


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    messages: list[str] = []

    def error(message: str) -> None:
        messages.append(message)
        raise ValueError(message)

    sub = _run_parser(parser)
    sub.error = error  # type: ignore[method-assign]
    parser.error = error  # type: ignore[method-assign]
    return parser.parse_args(list(argv))


def _check_names(args: argparse.Namespace, learners: Sequence[str], explainers: Sequence[str],
                 run_id: str, *, ray_gpus: float | None = None) -> None:
    model = args.model
    if model not in learners and not Path(model).exists():
        raise ValueError(f"run {run_id}: unknown model {model!r}; known: {', '.join(learners)}")
    stream = args.stream
    if not (stream in SYNTHETIC or stream.startswith("river:") or Path(stream).exists()):
        raise ValueError(f"run {run_id}: unknown stream {stream!r} (not a synthetic stream, "
                         "river:<Dataset> or an existing CSV)")
    names = [n.strip() for n in args.explain.split(",") if n.strip()]
    bad = [n for n in names if n != "none" and n not in explainers]
    if bad:
        raise ValueError(f"run {run_id}: unknown explainers {bad}")
    cuda = str(args.device).startswith("cuda")
    if ray_gpus is not None:  # on Ray: the cards are the nodes', assigned per run
        if cuda and not ray_gpus:
            raise ValueError(f"run {run_id}: --device {args.device} on Ray needs [resources] "
                             "gpus > 0 (a run uses only the cards Ray assigns it)")
        index = str(args.device).partition(":")[2]
        if cuda and index.isdigit() and int(index) >= max(1, int(ray_gpus)):
            raise ValueError(f"run {run_id}: --device {args.device}, but a run sees only the "
                             f"{max(1, int(ray_gpus))} card(s) Ray assigns it ([resources] "
                             f"gpus = {ray_gpus:g}), numbered from cuda:0")
        if args.device == "cpu" and ray_gpus:
            raise ValueError(f"run {run_id}: --device cpu, but [resources] gpus = {ray_gpus:g} "
                             "reserves a card it would not use")
    elif cuda and not torch.cuda.is_available():
        raise ValueError(f"run {run_id}: --device {args.device} asked for, but no CUDA "
                             "device is available")


def _short(value: object) -> str:
    """A grid value as it appears in a run id: a file path by its name plus 6 hex digits of
    the whole path (two ``data.csv`` in different folders stay apart), anything else as is."""
    text = str(value)
    if "/" in text or text.endswith(".csv"):
        digest = hashlib.sha256(text.encode()).hexdigest()[:6]
        return f"{Path(text).stem}.{digest}"
    return text


def _row(spec: RunSpec, out: Path, info: Mapping[str, Any] | None) -> dict[str, object]:
    row: dict[str, Any] = {"run_id": spec.run_id}
    row.update({v: spec.options[v] for v in _GRID_KEYS.values() if v in spec.options})
    if info is None:  # finished in an earlier sweep: its own record of that execution
        saved = out / spec.run_id / RUN_INFO
        info = (json.loads(saved.read_text()) if saved.exists()
                else {"status": "ok", "error": "", "wall_seconds": float("nan")})
    row.update(info)
    result = out / spec.run_id / "result.json"
    if result.exists():
        data: dict[str, Any] = read_result_json(result)
        row["status"] = "ok"
        row["n_rows"], row["seconds"] = data["n_rows"], data["seconds"]
        row.update(data["metrics"])
        for plugin, values in data["explanations"].items():
            row.update({f"{plugin}/{k}": v for k, v in values.items()})
    return row


def run_sweep(config: SweepConfig, *, executor: str | None = None,
              echo: Callable[[str], None] = print, overwrite: bool = False) -> pd.DataFrame:
    """Run the grid (skipping finished runs) and return the results table (a DataFrame).
    ``overwrite``: replace an existing ``results.csv`` that is not a sweep's table."""
    executor = executor or config.executor
    runs = check_runs(config, executor)
    _check_files(config, runs, overwrite=overwrite)
    if executor == "ray":
        ray_module()
        if config.ray_address and config.ray_address != "auto":
            _check_reachable(config.ray_address)
    with PathLock(config.out, f"the sweep output {config.out}", directory=True) as lock:
        if lock.stale_note:
            echo(lock.stale_note)
        return _run_held(config, runs, executor, echo)


def _check_files(config: SweepConfig, runs: Sequence[RunSpec], *, overwrite: bool) -> None:
    """Before any run: ``results.csv`` is not an input (the config, a stream or model file)
    nor a file of another kind (without ``overwrite``), no input lies in a run's folder, and
    every finished run's ``result.json`` is a complete result (else an error naming it)."""
    inputs: list[tuple[str, Path]] = []
    if config.source is not None:
        inputs.append(("sweep config", config.source))
    for key in ("stream", "model"):
        for value in dict.fromkeys(s.options.get(key) for s in runs):
            if isinstance(value, str) and Path(value).is_file():
                inputs.append((key, Path(value)))
    table = config.out / "results.csv"
    try:
        check_outputs([Output(table, "--out", f"--out {config.out} (its results.csv)",
                              "sweep results table")], inputs, overwrite=overwrite)
    except SystemExit as e:
        raise ValueError(str(e.code).removeprefix("error: ")) from None
    folders = {(config.out / s.run_id).resolve(): s.run_id for s in runs}
    for what, path in inputs:
        for parent in path.resolve().parents:
            if parent in folders:
                raise ValueError(f"the {what} {path} lies in the folder of run {folders[parent]} "
                                 f"({parent}), which the sweep writes; move it out of {config.out}")
    for spec in runs:
        result = config.out / spec.run_id / "result.json"
        if result.exists():
            try:
                read_result_json(result)
            except ValueError as e:
                raise ValueError(f"{e}; remove it to run {spec.run_id} again") from None


def _run_held(config: SweepConfig, runs: list[RunSpec], executor: str,
              echo: Callable[[str], None]) -> pd.DataFrame:
    todo = [s for s in runs if not (config.out / s.run_id / "result.json").exists()]
    jobs = config.jobs(todo, executor)
    resuming = [j for j in jobs if (config.out / j.spec.run_id / CHECKPOINT).is_file()]
    echo(f"sweep {config.name}: {len(runs)} runs, {len(runs) - len(todo)} already finished, "
         f"{len(todo)} to run on {executor} with {config.workers} worker(s)"
         + (f", {len(resuming)} resumed from their checkpoints" if resuming else ""))
    if executor != "ray" and config.resources != Resources():
        echo(f"[resources] ({config.resources.describe()}) are what a run asks Ray for; the "
             "local executor runs each run in one process")
    infos: dict[str, dict[str, Any]] = {}
    if executor == "ray":
        results = run_on_ray(jobs, config.out, resources=config.resources,
                             retries=config.retries, address=config.ray_address,
                             workers=config.workers, storage=config.storage, echo=echo)
    else:
        results = _run_local(jobs, config.out, config.workers)
    t0 = time.perf_counter()
    failed = 0
    for job, info in results:
        run_id = job.spec.run_id
        infos[run_id] = info
        run_dir = config.out / run_id
        if run_dir.is_dir():
            atomic_write(run_dir / RUN_INFO, json.dumps(info).encode())
        failed += info["status"] != "ok"
        echo(_progress_line(len(infos), len(jobs), failed, time.perf_counter() - t0, run_id,
                            info))
    rows = [_row(s, config.out, infos.get(s.run_id)) for s in runs]
    table = pd.DataFrame(rows)
    atomic_write(config.out / "results.csv", table.to_csv(index=False).encode())
    return table


def _progress_line(done: int, total: int, failed: int, elapsed: float, run_id: str,
                   info: Mapping[str, Any]) -> str:
    """``[done/total]`` with the failures so far, the time left at the pace so far, and the
    run's status (its error, the row it resumed at, where it ran)."""
    left = elapsed / done * (total - done)
    head = f"[{done}/{total}{f', {failed} failed' if failed else ''}, {elapsed:.0f} s"
    head += f", ~{left:.0f} s left]" if done < total else "]"
    text = f"{head} {run_id}: {info['status']}"
    if info.get("error"):
        text += f" ({info['error']})"
    details = [f"{info['wall_seconds']:.1f} s"] if math.isfinite(info["wall_seconds"]) else []
    if info.get("resumed_at_row") is not None:
        details.append(f"resumed at row {info['resumed_at_row']:,}")
    if info.get("node_ip"):
        where = f"node {str(info['node_id'])[:8]} ({info['node_ip']})"
        if info.get("gpu_ids"):
            where += f", GPU {','.join(info['gpu_ids'])}"
        if info.get("attempt", 1) > 1:
            where += f", attempt {info['attempt']}"
        details.append(where)
    return text + (f", {'; '.join(details)}" if details else "")


def _run_local(jobs: Sequence[Job], out: Path, workers: int
               ) -> Iterator[tuple[Job, dict[str, Any]]]:
    """Each job in this process (``workers`` 1) or in a pool of processes; ``(job, info)`` as
    each ends."""
    if workers == 1 or len(jobs) <= 1:
        for job in jobs:
            ran = execute(job.argv(out), str(out / job.spec.run_id))
            job.finish(out / job.spec.run_id, str(ran["status"]))
            yield job, ran
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        futures: dict[Future[dict[str, object]], Job] = {
            pool.submit(execute, job.argv(out), str(out / job.spec.run_id)): job
            for job in jobs}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                job = futures[f]
                info: dict[str, Any]
                try:
                    info = f.result()
                except Exception as e:  # noqa: BLE001 (a crashed worker process)
                    info = {"status": "failed", "error": f"{type(e).__name__}: {e}",
                            "wall_seconds": float("nan")}
                job.finish(out / job.spec.run_id, str(info["status"]))
                yield job, info


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast (instead of Ray's minutes of retries) when nothing listens at ``address``
    (``host:port`` or ``ray://host:port``)."""
    hostport = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"ray_address {address!r} is not host:port or ray://host:port")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise ValueError(f"the Ray address {address!r} does not answer ({e})") from None


def sweep_command(args: argparse.Namespace) -> int:
    """Run ``torchstream sweep``; the exit status is 1 when a run failed."""
    try:
        config = load_sweep(args.config)
        if args.workers is not None:
            if args.workers < 1:
                raise ValueError("--workers must be >= 1")
            config.workers = args.workers
        if args.out:
            config.out = Path(args.out)
        table = run_sweep(config, executor=args.executor, overwrite=args.overwrite)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    cols = [c for c in table.columns if "/" not in c]
    print(table[cols].to_string(index=False))
    print(f"results: {config.out / 'results.csv'}")
    failed = int((table["status"] != "ok").sum())
    return 1 if failed else 0
