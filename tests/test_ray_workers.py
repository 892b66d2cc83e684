"""One stream on N workers that are Ray actors (``run_data_parallel(..., ray_address=...)``,
``torchstream run --workers N --ray-address``): the same run as N processes of this machine, to
the bit; a worker that raises or dies stops the run with an error naming it."""

from __future__ import annotations

import builtins
import json
import os
from functools import partial
from pathlib import Path

import pytest
import torch

from test_data_parallel import BATCH, ROWS, build
from torchstream.cli import main
from torchstream.distributed.data_parallel import WorkerSetup, run_data_parallel
from torchstream.distributed.processes import WorkerFailed

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[test]')")


@pytest.fixture(scope="module")
def local_ray():
    """Ray on this machine with two CPUs; its workers import this folder's test modules."""
    here = str(Path(__file__).parent)
    own_print = builtins.print  # Ray puts its own print there, and leaves it after shutdown
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": here}})
    yield
    ray.shutdown()
    builtins.print = own_print


def _dies(rank: int) -> WorkerSetup:
    """Rank 1's process ends at once (as a killed machine's would)."""
    if rank == 1:
        os._exit(3)
    return build(rank)


def test_ray_actors_run_the_same_run_as_local_processes(local_ray):
    on_ray = run_data_parallel(build, workers=2, batch_size=BATCH, ray_address="local")
    here = run_data_parallel(build, workers=2, batch_size=BATCH)
    assert on_ray.rows == here.rows == ROWS and on_ray.workers == 2
    for name, value in here.state.items():  # the same steps, the same draws: to the bit
        assert torch.equal(on_ray.state[name], value), name
    assert on_ray.metrics == here.metrics
    assert on_ray.importances == here.importances
    assert ray.is_initialized()  # Ray was running: the run left it running


def test_a_ray_worker_that_raises_or_dies_is_named(local_ray):
    with pytest.raises(WorkerFailed, match=r"worker 1 failed: .*ValueError: no data for rank 1"):
        run_data_parallel(partial(build, fail_rank=1), workers=2, batch_size=BATCH,
                          ray_address="local")
    with pytest.raises(WorkerFailed, match=r"worker 1 \(a Ray actor\) died"):
        run_data_parallel(_dies, workers=2, batch_size=BATCH, ray_address="local", timeout=60)


def test_the_command_line_runs_its_workers_on_ray(local_ray, tmp_path, capfd):
    common = ["run", "--n-samples", "800", "--batch-size", "8", "--explain", "ipfi",
              "--explain-alpha", "0.02", "--no-progress", "--workers", "2"]
    results = {}
    for name, extra in (("ray", ["--ray-address", "local"]), ("here", [])):
        out = tmp_path / f"{name}.json"
        assert main([*common, "--logdir", str(tmp_path / name), "--result-json", str(out),
                     *extra]) == 0
        results[name] = json.loads(out.read_text())
        printed = capfd.readouterr().out  # worker 0's table reaches this process either way
        assert "workers: 2 processes" in printed and "| accuracy" in printed, name
    ray_run, here = results["ray"], results["here"]
    assert ray_run["n_rows"] == here["n_rows"] == 800
    assert ray_run["metrics"] == here["metrics"]
    assert ray_run["explanations"] == here["explanations"] and here["explanations"]["ipfi"]
    assert (tmp_path / "ray").is_dir()  # worker 0 wrote the run directory (its node: here)
