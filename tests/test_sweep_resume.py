"""A sweep's runs resume from their checkpoints, and the pieces a sweep on Ray is built of,
checked without a cluster: the ``[resources]`` table, the device checks on Ray, a run
directory carried as bytes, snapshots sent as checkpoints are written, and a TensorBoard sink
whose checkpointed state is on disk."""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from torchstream.cli.sweep import SweepConfig, check_runs, load_sweep, run_sweep
from torchstream.cli.sweep_jobs import (
    CHECKPOINT,
    Job,
    RunSpec,
    SnapshotWatcher,
    execute,
    pack,
    unpack,
)
from torchstream.cli.sweep_ray import Resources, parse_memory
from torchstream.sinks import TensorBoardSink


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


SWEEP = """
[sweep]
out = "{out}"
checkpoint_every = 10
{extra}
[run]
model = "probit"
n_samples = 400
batch_size = 5
explain = "ipfi"
"""


def test_an_unfinished_run_resumes_from_its_checkpoint_to_the_same_result(tmp_path):
    whole = run_sweep(load_sweep(_write(tmp_path, SWEEP.format(out=tmp_path / "a", extra=""))),
                      echo=lambda s: None)
    config = load_sweep(_write(tmp_path, SWEEP.format(out=tmp_path / "b", extra="")))
    (spec,) = config.runs()
    job = Job(spec, checkpoint_every=10)
    # the run stopped after 30 of its 80 batches (as a lost machine or Ctrl-C leaves it)
    first = execute(job.argv(config.out) + ["--steps", "30"], str(config.out / spec.run_id))
    assert first["status"] == "ok" and first["resumed_at_row"] is None
    (config.out / spec.run_id / "result.json").unlink()  # not finished
    assert (config.out / spec.run_id / CHECKPOINT).is_file()
    lines: list[str] = []
    table = run_sweep(config, echo=lines.append)
    assert "1 resumed from their checkpoints" in lines[0]
    info = json.loads((config.out / spec.run_id / "sweep_run.json").read_text())
    assert info["resumed_at_row"] == 30 * 5
    assert "resumed at row 150" in lines[-1]
    cols = ["n_rows", "accuracy", "log_loss", "ipfi/salary"]
    assert table[cols].equals(whole[cols])  # resumed exactly: the uninterrupted run's numbers
    steps = pd.read_csv(config.out / spec.run_id / "tensorboard" / "steps.csv")
    assert len(steps) == 400 // 5
    assert not (config.out / spec.run_id / CHECKPOINT).exists()  # finished: removed


def test_a_finished_run_keeps_its_checkpoint_when_asked(tmp_path):
    config = load_sweep(_write(tmp_path, SWEEP.format(out=tmp_path / "k",
                                                      extra="keep_checkpoints = true")))
    run_sweep(config, echo=lambda s: None)
    (spec,) = config.runs()
    assert (config.out / spec.run_id / CHECKPOINT).is_file()


def test_progress_lines_count_the_runs_as_they_end(tmp_path):
    path = _write(tmp_path, f"""
[sweep]
out = "{tmp_path / 'p'}"
[grid]
batch_sizes = [10, 300]
[run]
n_samples = 200
steps = 2
explain = "none"
""")
    lines: list[str] = []
    run_sweep(load_sweep(path), echo=lines.append)
    assert lines[1].startswith("[1/2, ") and "left]" in lines[1] and ": ok, " in lines[1]
    assert lines[2].startswith("[2/2, ") and "left" not in lines[2]


@pytest.mark.parametrize("table, message", [
    ("cpus = -1", r"\[resources\] cpus must be a number >= 0"),
    ("gpus = 1.5", r"gpus = 1.5: above 1 a resource is asked for in whole units"),
    ("gpus = true", r"gpus must be a number"),
    ('memory = "lots"', r"\[resources\] memory must be a positive number of bytes"),
    ("memory = 0", r"memory must be a positive number"),
    ("custom = 3", r"custom must be a table"),
    ("custom = {GPU = 1}", r"custom GPU: set it as \[resources\] gpus"),
    ("disk = 1", r"unknown keys \['disk'\] in \[resources\]"),
])
def test_bad_resources_are_errors_naming_the_key(tmp_path, table, message):
    path = _write(tmp_path, f"[resources]\n{table}\n")
    with pytest.raises(ValueError, match=message):
        load_sweep(path)


def test_resources_are_read_as_ray_options(tmp_path):
    config = load_sweep(_write(tmp_path, """
[sweep]
retries = 5
storage = "s3://bucket/sweeps/demo"
[resources]
cpus = 2
gpus = 0.25
memory = "1.5GiB"
custom = {big_node = 1}
"""))
    assert config.resources.ray_options() == {"num_cpus": 2, "num_gpus": 0.25,
                                              "memory": 1610612736,
                                              "resources": {"big_node": 1}}
    assert config.retries == 5 and config.storage == "s3://bucket/sweeps/demo"
    assert parse_memory("512MiB") == 512 * 2**20 and parse_memory("2GB") == 2 * 10**9
    assert Resources(gpus=0.5).fits({"CPU": 1, "GPU": 1})
    assert not Resources(gpus=0.5).fits({"CPU": 8})


@pytest.mark.parametrize("device, gpus, message", [
    ("cuda", 0, r"--device cuda on Ray needs \[resources\] gpus > 0"),
    ("cuda:1", 0.5, r"--device cuda:1, but a run sees only the 1 card\(s\) Ray assigns it"),
    ("cpu", 1, r"--device cpu, but \[resources\] gpus = 1 reserves a card"),
])
def test_devices_on_ray_are_checked_against_the_cards_a_run_asks_for(tmp_path, device, gpus,
                                                                     message):
    pytest.importorskip("ray")
    out = tmp_path / "never"
    path = _write(tmp_path, f"""
[sweep]
executor = "ray"
out = "{out}"
[resources]
gpus = {gpus}
[run]
device = "{device}"
n_samples = 50
""")
    with pytest.raises(ValueError, match=message):
        run_sweep(load_sweep(path), echo=lambda s: None)
    assert not out.exists()


def test_on_ray_a_cuda_run_with_cards_asked_for_needs_no_cuda_on_the_driver(tmp_path):
    config = SweepConfig(name="t", out=tmp_path, executor="ray",
                         resources=Resources(gpus=1), run={"device": "cuda", "n_samples": 50})
    assert len(check_runs(config)) == 1  # a node's card, not the driver's
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device is available"):
            check_runs(config, "local")


def test_on_ray_a_run_asking_for_no_gpu_runs_on_the_cpu(tmp_path):
    config = SweepConfig(name="t", out=tmp_path, grid={"seeds": [0]})
    (spec,) = config.runs()
    (job,) = config.jobs([spec], "ray")
    assert "--device=cpu" in job.argv(tmp_path)
    (job,) = SweepConfig(name="t", out=tmp_path, resources=Resources(gpus=0.5)).jobs([spec],
                                                                                    "ray")
    assert not any(a.startswith("--device") for a in job.argv(tmp_path))  # auto: its card
    (job,) = config.jobs([spec], "local")
    assert not any(a.startswith("--device") for a in job.argv(tmp_path))


def test_a_run_directory_travels_as_bytes(tmp_path):
    src = tmp_path / "src"
    (src / "tensorboard" / "mlp").mkdir(parents=True)
    (src / "tensorboard" / "mlp" / "events.out.tfevents.1").write_bytes(b"\x00\x01events")
    (src / "tensorboard" / "steps.csv").write_text("step,loss\n0,1.0\n")
    (src / CHECKPOINT).write_bytes(b"state")
    (src / ".torchstream.lock").write_text("pid 1")  # never carried
    (src / ".result.json.abc.tmp").write_text("{")  # an atomic write under way: never carried
    dst = tmp_path / "dst"
    names = unpack(pack(src), dst)
    assert sorted(names) == ["checkpoint.pt", "tensorboard/mlp/events.out.tfevents.1",
                             "tensorboard/steps.csv"]
    assert (dst / "tensorboard" / "mlp" / "events.out.tfevents.1").read_bytes() == \
        b"\x00\x01events"
    assert CHECKPOINT not in unpack(pack(src, checkpoint=False), tmp_path / "d2")


def test_an_archive_entry_outside_the_run_directory_is_refused(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(ValueError, match=r"entry '\.\./escaped\.txt' is not a file inside"):
        unpack(buffer.getvalue(), tmp_path / "run")
    assert not (tmp_path / "escaped.txt").exists()


def test_a_snapshot_is_sent_each_time_the_checkpoint_is_written(tmp_path):
    got: list[bytes] = []
    (tmp_path / "result.json").write_text("{}")
    with SnapshotWatcher(tmp_path, got.append, exclude=["result.json"], poll=0.01):
        for version in (b"one", b"two"):
            (tmp_path / CHECKPOINT).write_bytes(version)
            deadline = time.monotonic() + 5
            while len(got) < (1 if version == b"one" else 2) and time.monotonic() < deadline:
                time.sleep(0.01)
    assert len(got) == 2
    files = [_members(g) for g in got]
    assert [f[CHECKPOINT] for f in files] == [b"one", b"two"]
    assert all("result.json" not in f for f in files)


def _members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def test_a_tensorboard_sinks_checkpointed_state_is_on_disk(tmp_path):
    sink = TensorBoardSink(str(tmp_path), run="m", flush_secs=3600)
    sink.log_scalars(7, {"metrics/accuracy/cumulative": 0.5})
    sink.state_dict()  # a checkpoint: the events up to it must be readable now, not at close
    (events,) = (tmp_path / "m").glob("events.out.tfevents.*")
    acc = EventAccumulator(str(events))
    acc.Reload()
    assert [e.step for e in acc.Scalars("metrics/accuracy/cumulative")] == [7]
    sink.close()


def test_run_spec_argv_adds_the_checkpoint_and_resume_of_a_job(tmp_path):
    spec = RunSpec("r", {"seed": 1})
    assert "--checkpoint" not in Job(spec).argv(tmp_path)
    argv = Job(spec, checkpoint_every=7).argv(tmp_path)
    assert argv[-4:] == ["--checkpoint", str(tmp_path / "r" / CHECKPOINT),
                         "--checkpoint-every", "7"]
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / CHECKPOINT).write_bytes(b"x")
    assert Job(spec).argv(tmp_path)[-4:] == ["--checkpoint", str(tmp_path / "r" / CHECKPOINT),
                                             "--resume", str(tmp_path / "r" / CHECKPOINT)]
