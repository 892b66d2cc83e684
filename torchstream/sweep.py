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

Every run gets ``<out>/<run id>/`` with its TensorBoard logs and ``result.json``; the table of
all runs goes to ``<out>/results.csv`` (one row per run: the grid values, status, error,
seconds, final metrics and explainer values). A failed run is reported with its error and does
not stop the grid; a rerun skips the runs that have a ``result.json``. The whole config is checked
(unknown keys, model and stream names, run options, CUDA availability, the Ray address) before
any run starts.
"""

from __future__ import annotations

import argparse
import json
import re
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import tomllib

__all__ = ["RunSpec", "SweepConfig", "load_sweep", "run_sweep"]

_SWEEP_KEYS = {"name", "out", "workers", "executor", "ray_address"}
_GRID_KEYS = {"streams": "stream", "models": "model", "explain": "explain", "seeds": "seed",
              "batch_sizes": "batch_size", "lrs": "lr"}
_RESERVED_RUN = {"stream", "model", "explain", "seed", "logdir", "result_json", "resume",
                 "checkpoint", "checkpoint_every", "no_progress"}


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid: its id and its ``torchstream run`` options."""

    run_id: str
    options: dict[str, Any]

    def argv(self, out: Path) -> list[str]:
        args = ["run"]
        for key, value in self.options.items():
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                if value:
                    args.append(flag)
            elif isinstance(value, list):
                args += [flag, *map(str, value)]
            else:
                args += [flag, str(value)]
        run_dir = out / self.run_id
        return args + ["--logdir", str(run_dir / "tensorboard"),
                       "--result-json", str(run_dir / "result.json"), "--no-progress"]


@dataclass
class SweepConfig:
    name: str
    out: Path
    workers: int = 1
    executor: str = "local"
    ray_address: str | None = None
    grid: dict[str, list[Any]] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)

    def runs(self) -> list[RunSpec]:
        """The grid's runs, in a fixed order."""
        keys = list(self.grid)
        out = []
        for values in product(*(self.grid[k] for k in keys)):
            options = dict(self.run)
            parts = []
            for k, v in zip(keys, values):
                options[_GRID_KEYS[k]] = v
                parts.append(f"{_GRID_KEYS[k]}={v}")
            run_id = re.sub(r"[^A-Za-z0-9_.=,-]+", "_", "-".join(parts)) or "run"
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
    unknown = sorted(set(raw) - {"sweep", "grid", "run"})
    if unknown:
        _fail(path, f"unknown sections {unknown}; known: sweep, grid, run")
    sweep = dict(raw.get("sweep", {}))
    bad = sorted(set(sweep) - _SWEEP_KEYS)
    if bad:
        _fail(path, f"unknown keys {bad} in [sweep]; known: {sorted(_SWEEP_KEYS)}")
    grid = dict(raw.get("grid", {}))
    bad = sorted(set(grid) - set(_GRID_KEYS))
    if bad:
        _fail(path, f"unknown keys {bad} in [grid]; known: {sorted(_GRID_KEYS)}")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            _fail(path, f"[grid] {k} must be a non-empty list, got {v!r}")
    if "streams" not in grid and "stream" not in raw.get("run", {}):
        grid.setdefault("streams", ["agrawal-drift"])
    run = dict(raw.get("run", {}))
    reserved = sorted(set(run) & _RESERVED_RUN - {"stream", "model", "explain", "seed"})
    if reserved:
        _fail(path, f"[run] keys {reserved} are set by the sweep itself")
    clash = sorted({_GRID_KEYS[k] for k in grid} & set(run))
    if clash:
        _fail(path, f"{clash} appear both in [grid] and in [run]")
    name = str(sweep.get("name", path.stem))
    workers = sweep.get("workers", 1)
    if not isinstance(workers, int) or workers < 1:
        _fail(path, f"[sweep] workers must be a positive integer, got {workers!r}")
    executor = sweep.get("executor", "local")
    if executor not in ("local", "ray"):
        _fail(path, f"[sweep] executor must be 'local' or 'ray', got {executor!r}")
    out = Path(sweep.get("out", Path("runs") / f"sweep-{name}"))
    return SweepConfig(name, out, workers, executor, sweep.get("ray_address"), grid, run)


def check_runs(config: SweepConfig) -> list[RunSpec]:
    """Parse every run's options with the ``run`` command's parser and check the names (models,
    streams, explainers, device) before anything runs."""
    from torchstream.cli import EXPLAINERS, build_parser
    from torchstream.learners.registry import available_learners

    parser = build_parser()
    runs = config.runs()
    for spec in runs:
        argv = spec.argv(config.out)
        try:
            args = _parse(parser, argv)
        except ValueError as e:
            raise ValueError(f"run {spec.run_id}: {e}") from None
        _check_names(args, available_learners(), EXPLAINERS, spec.run_id)
    return runs


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    messages: list[str] = []

    def error(message: str) -> None:
        messages.append(message)
        raise ValueError(message)

    sub = parser._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    sub.error = error  # type: ignore[method-assign]
    parser.error = error  # type: ignore[method-assign]
    return parser.parse_args(list(argv))


def _check_names(args: argparse.Namespace, learners: Sequence[str], explainers: Sequence[str],
                 run_id: str) -> None:
    from torchstream.streams import SYNTHETIC

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
    if str(args.device).startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"run {run_id}: --device {args.device} asked for, but no CUDA "
                             "device is available")


def execute(argv: list[str], run_dir: str) -> dict[str, Any]:
    """Run one ``torchstream run`` in this process; never raises (errors become the row)."""
    import contextlib
    import io
    import time

    from torchstream.cli import main

    t0 = time.perf_counter()
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            main(argv)
        status, error = "ok", ""
    except SystemExit as e:
        status, error = "failed", str(e.code if e.code is not None else e)
    except Exception as e:  # noqa: BLE001 (a failed run must not stop the grid)
        status, error = "failed", f"{type(e).__name__}: {e}"
        (Path(run_dir) / "traceback.txt").write_text(traceback.format_exc())
    (Path(run_dir) / "stdout.txt").write_text(log.getvalue())
    return {"status": status, "error": error, "wall_seconds": time.perf_counter() - t0}


def _row(spec: RunSpec, out: Path, info: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": spec.run_id}
    row.update({k: spec.options[v] for k, v in _GRID_KEYS.items() if v in spec.options})
    row.update(info)
    result = out / spec.run_id / "result.json"
    if result.exists():
        data = json.loads(result.read_text())
        row["status"] = "ok"
        row["n_rows"], row["seconds"] = data["n_rows"], data["seconds"]
        row.update(data["metrics"])
        for plugin, values in data["explanations"].items():
            row.update({f"{plugin}/{k}": v for k, v in values.items()})
    return row


def run_sweep(config: SweepConfig, *, executor: str | None = None,
              echo: Callable[[str], None] = print) -> Any:
    """Run the grid (skipping finished runs) and return the results table (a DataFrame)."""
    import pandas as pd

    executor = executor or config.executor
    runs = check_runs(config)
    if executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ValueError("executor 'ray' needs Ray: pip install 'torchstream[ray]'") from None
        if config.ray_address and config.ray_address != "auto":
            _check_reachable(config.ray_address)
    config.out.mkdir(parents=True, exist_ok=True)
    todo = [s for s in runs if not (config.out / s.run_id / "result.json").exists()]
    echo(f"sweep {config.name}: {len(runs)} runs, {len(runs) - len(todo)} already finished, "
         f"{len(todo)} to run on {executor} with {config.workers} worker(s)")
    jobs = [(s.argv(config.out), str(config.out / s.run_id)) for s in todo]
    infos: dict[str, dict[str, Any]] = {}
    if executor == "ray":
        results = _run_ray(jobs, config)
    else:
        results = _run_local(jobs, config.workers)
    for spec, info in zip(todo, results):
        infos[spec.run_id] = info
        echo(f"  {spec.run_id}: {info['status']}" + (f" ({info['error']})" if info["error"]
                                                     else ""))
    rows = [_row(s, config.out, infos.get(s.run_id, {"status": "ok", "error": "",
                                                      "wall_seconds": float("nan")}))
            for s in runs]
    table = pd.DataFrame(rows)
    table.to_csv(config.out / "results.csv", index=False)
    return table


def _run_local(jobs: list[tuple[list[str], str]], workers: int) -> list[dict[str, Any]]:
    if workers == 1 or len(jobs) <= 1:
        return [execute(argv, d) for argv, d in jobs]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        futures = [pool.submit(execute, argv, d) for argv, d in jobs]
        out = []
        for f in futures:
            try:
                out.append(f.result())
            except Exception as e:  # noqa: BLE001 (a crashed worker process)
                out.append({"status": "failed", "error": f"{type(e).__name__}: {e}",
                            "wall_seconds": float("nan")})
        return out


def _run_ray(jobs: list[tuple[list[str], str]], config: SweepConfig) -> list[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise ValueError("executor 'ray' needs Ray: pip install 'torchstream[ray]'") from None
    started = False
    if not ray.is_initialized():
        try:
            if config.ray_address:
                ray.init(address=config.ray_address, logging_level="ERROR",
                         log_to_driver=False)
            else:
                ray.init(num_cpus=config.workers, include_dashboard=False,
                         logging_level="ERROR", log_to_driver=False)
        except Exception as e:  # noqa: BLE001 (any failure to connect is reported)
            raise ValueError(f"cannot reach Ray at {config.ray_address or 'a new local Ray'}: "
                             f"{type(e).__name__}: {e}") from None
        started = True
    try:
        remote = ray.remote(num_cpus=1)(execute)
        refs = [remote.remote(argv, d) for argv, d in jobs]
        out = []
        for ref in refs:
            try:
                out.append(ray.get(ref))
            except Exception as e:  # noqa: BLE001 (a crashed Ray task)
                out.append({"status": "failed", "error": f"{type(e).__name__}: {e}",
                            "wall_seconds": float("nan")})
        return out
    finally:
        if started:
            ray.shutdown()


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast (instead of Ray's minutes of retries) when nothing listens at ``address``
    (``host:port`` or ``ray://host:port``)."""
    import socket

    hostport = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"ray_address {address!r} is not host:port or ray://host:port")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise ValueError(f"the Ray address {address!r} does not answer ({e})") from None


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sweep", help="run a grid of `torchstream run` jobs from a TOML config")
    p.add_argument("config", help="sweep config (TOML)")
    p.add_argument("--executor", choices=["local", "ray"],
                   help="override the config's executor")
    p.add_argument("--workers", type=int, help="override the config's number of workers")
    p.add_argument("--out", help="override the config's output directory")


def sweep_command(args: argparse.Namespace) -> int:
    try:
        config = load_sweep(args.config)
        if args.workers is not None:
            if args.workers < 1:
                raise ValueError("--workers must be >= 1")
            config.workers = args.workers
        if args.out:
            config.out = Path(args.out)
        table = run_sweep(config, executor=args.executor)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    cols = [c for c in table.columns if "/" not in c]
    print(table[cols].to_string(index=False))
    print(f"results: {config.out / 'results.csv'}")
    failed = int((table["status"] != "ok").sum())
    return 1 if failed else 0
