"""`torchstream sweep` on a real Ray cluster of two nodes on this machine: a head, and a second
node started with ``ray start --address`` in its own mount namespace, where the driver's output
folder is hidden under a tmpfs, so that its runs provably cannot write where the driver reads.
The runs' folders (TensorBoard events, steps.csv, result.json) reach the driver through Ray;
the resources each run asks for are what Ray gives it; a node killed mid-run is retried on the
other and resumes from its last checkpoint; a sweep stopped and started again resumes its
unfinished run from the checkpoint the driver kept; with ``storage`` a run's folder comes back
through a folder every node reaches.

The tests start and stop the cluster themselves and skip, with the reason, where a mount
namespace or Ray cannot be started (the processes they start are killed by their own process
groups at the end). The driver is a fresh ``torchstream sweep`` process, as a user runs it: a
process that has run a Ray of its own keeps that Ray's settings (token authentication)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("ray")

RAY = Path(sys.executable).with_name("ray")
TORCHSTREAM = Path(sys.executable).with_name("torchstream")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    address: str
    head_id: str
    far_id: str
    driver: Path  # the driver's folder, a tmpfs on the far node
    groups: dict[str, int]  # node -> process group of its `ray start` and daemons
    env: dict[str, str]  # a driver's environment

    def kill(self, node: str) -> None:
        """SIGKILL every process of ``node`` (its raylet, its workers): the node is lost."""
        pgid = self.groups.pop(node, None)
        if pgid is not None:
            _killpg(pgid)

    def sweep(self, config: Path,
              on_line: Callable[[str, subprocess.Popen[str]], None] | None = None,
              ) -> tuple[int, list[str]]:
        """``torchstream sweep config`` in a fresh process; its exit status and output lines
        (``on_line`` sees each as it comes)."""
        proc = subprocess.Popen([str(TORCHSTREAM), "sweep", str(config)], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if on_line is not None:
                on_line(lines[-1], proc)
        return proc.wait(timeout=300), lines

    def python(self, code: str, *args: str) -> str:
        """Run ``code`` in a fresh interpreter connected as a driver; its stdout."""
        done = subprocess.run([sys.executable, "-c", code, *args], env=self.env, text=True,
                              capture_output=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:  # the group is gone already
        pass


def _start(argv: list[str], env: dict[str, str], what: str) -> int:
    """Run a ``ray start`` (in a new session; its daemons stay in its process group) and
    return that group; skip the tests with the reason when it fails."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        _killpg(proc.pid)
        pytest.skip(f"{what} did not start within 120 s")
    if proc.returncode != 0:
        _killpg(proc.pid)
        tail = " | ".join(out.strip().splitlines()[-3:])
        pytest.skip(f"{what} could not start (exit {proc.returncode}): {tail}")
    return proc.pid


#: Run in a fresh driver: the node ids, and what the far node sees in the driver's folder.
_PROBE = """
import json, os, sys
import ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
nodes = [n for n in ray.nodes() if n["Alive"]]
far = [n["NodeID"] for n in nodes if "far" in n["Resources"]]
head = [n["NodeID"] for n in nodes if "far" not in n["Resources"]]
strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(far[0], soft=False)
listing = ray.remote(num_cpus=0)(lambda p: sorted(os.listdir(p)))
seen = ray.get(listing.options(scheduling_strategy=strategy).remote(sys.argv[2]))
print(json.dumps({"head": head, "far": far, "driver_node":
                  ray.get_runtime_context().get_node_id(), "seen": seen}))
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if shutil.which("unshare") is None or not RAY.exists() or not TORCHSTREAM.exists():
        pytest.skip("needs unshare(1), Ray's `ray` and the `torchstream` command")
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           check=False, capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a mount namespace: {probe.stderr.strip()}")
    base = Path(tempfile.mkdtemp(prefix="ts-ray-"))  # short: Ray's socket paths are limited
    driver = tmp_path_factory.mktemp("driver")
    (driver / "on-the-driver").write_text("only the driver sees this")
    port = _free_port()
    # nodes and drivers without token authentication (neither the user's Ray token file nor
    # the RAY_AUTH_MODE an earlier ray.init of this process exported); the nodes with their
    # own home and a fast detection of a lost node
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    clean |= {"RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    env = clean | {"HOME": str(base / "home"), "RAY_health_check_period_ms": "500",
                   "RAY_health_check_timeout_ms": "1000",
                   "RAY_health_check_failure_threshold": "2",
                   "RAY_health_check_initial_delay_ms": "0"}
    (base / "home").mkdir()
    groups: dict[str, int] = {}
    try:
        groups["head"] = _start(
            [str(RAY), "start", "--head", "--port", str(port), "--num-cpus", "1",
             "--num-gpus", "1", "--include-dashboard", "false", "--disable-usage-stats",
             "--ray-client-server-port", str(_free_port()), "--temp-dir", str(base / "head")],
            env, "the Ray head node")
        script = ('mount -t tmpfs tmpfs "$1" && exec "$2" start --address "$3" --num-cpus 1 '
                  '--num-gpus 1 --resources \'{"far": 1}\' --disable-usage-stats '
                  '--temp-dir "$4"')
        groups["far"] = _start(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
             str(driver), str(RAY), f"127.0.0.1:{port}", str(base / "far")],
            env, "the second Ray node")
        cluster = Cluster(f"127.0.0.1:{port}", "", "", driver, groups, clean)
        seen = json.loads(cluster.python(_PROBE, cluster.address, str(driver)))
        assert len(seen["far"]) == 1 and len(seen["head"]) == 1, seen
        assert seen["driver_node"] == seen["head"][0]  # a driver on this machine joins the head
        assert seen["seen"] == []  # the far node sees an empty tmpfs where the driver has a file
        cluster.head_id, cluster.far_id = seen["head"][0], seen["far"][0]
        yield cluster
    finally:
        for pgid in groups.values():
            _killpg(pgid)
        shutil.rmtree(base, ignore_errors=True)


def _config(tmp_path: Path, cluster: Cluster, out: Path, body: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(f'[sweep]\nname = "c"\nexecutor = "ray"\nray_address = "{cluster.address}"\n'
                    f'out = "{out}"\n' + body)
    return path


def _info(out: Path, run_id: str) -> dict:
    return json.loads((out / run_id / "sweep_run.json").read_text())


def _steps(out: Path, run_id: str) -> pd.DataFrame:
    return pd.read_csv(out / run_id / "tensorboard" / "steps.csv")


def _scalar_steps(logdir: Path, tag: str) -> list[int]:
    """The steps of ``tag`` over every events file under ``logdir`` (read as TensorBoard does)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    steps: list[int] = []
    for events in sorted(logdir.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            steps += [e.step for e in acc.Scalars(tag)]
    return sorted(set(steps))


def test_runs_on_both_nodes_get_their_resources_and_come_back_whole(tmp_path, cluster):
    out = cluster.driver / "a"
    path = _config(tmp_path, cluster, out, """
[grid]
seeds = [0, 1]
[resources]
cpus = 1
gpus = 0.5
[run]
model = "probit"
n_samples = 400
batch_size = 8
explain = "ipfi"
""")
    status, lines = cluster.sweep(path)
    assert status == 0, lines
    table = pd.read_csv(out / "results.csv")
    assert table["status"].tolist() == ["ok", "ok"], table["error"].tolist()
    assert table["n_rows"].tolist() == [400, 400]
    infos = {run_id: _info(out, run_id) for run_id in table["run_id"]}
    # one CPU a run, one CPU a node: the two runs ran at once, one on each node
    assert {i["node_id"] for i in infos.values()} == {cluster.head_id, cluster.far_id}
    for run_id, info in infos.items():
        assert info["gpu_ids"] == ["0"] and info["cuda_visible_devices"] == "0"  # 0.5 of card 0
        result = json.loads((out / run_id / "result.json").read_text())
        assert result["logdir"] == str(out / run_id / "tensorboard")
        row = table.loc[table["run_id"] == run_id].iloc[0]
        assert result["metrics"]["accuracy"] == pytest.approx(row["accuracy"])
        assert len(_steps(out, run_id)) == 400 // 8
        assert _scalar_steps(out / run_id / "tensorboard", "metrics/accuracy/cumulative")[-1] \
            >= 400 - 8 * 10  # logged every 10 batches, through the end of the stream
        assert not (out / run_id / "checkpoint.pt").exists()
    assert any(re.search(r"^\[2/2, .*: ok, .*node .*GPU 0", line) for line in lines), lines


_TRY = """
import sys
from torchstream.cli.sweep import load_sweep, run_sweep
for path in sys.argv[1:]:
    try:
        run_sweep(load_sweep(path), echo=lambda s: None)
        print("no error")
    except ValueError as e:
        print(e)
"""


def test_workers_on_two_nodes_run_the_run_of_two_local_processes(cluster):
    """``torchstream run --workers 2 --ray-address``: worker 0 on the driver's node (the head),
    worker 1 on the far node, which cannot see the driver's folder; the same run as two local
    processes, to the bit; the run's files are written on the driver."""
    common = ["run", "--n-samples", "800", "--batch-size", "8", "--explain", "ipfi",
              "--explain-alpha", "0.02", "--no-progress", "--workers", "2"]
    runs = {}
    for name, extra in (("ray", ["--ray-address", cluster.address]), ("here", [])):
        out = cluster.driver / f"workers-{name}.json"
        done = subprocess.run(
            [str(TORCHSTREAM), *common, "--logdir", str(cluster.driver / f"workers-{name}"),
             "--result-json", str(out), *extra],
            env=cluster.env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        runs[name] = json.loads(out.read_text()), done.stdout, done.stderr
    (on_ray, printed, errors), (here, _, _) = runs["ray"], runs["here"]
    placed = re.search(r"workers on Ray nodes: 0: node (\w+) at \S+ \(here\), "
                       r"1: node (\w+) at \S+$", printed, re.M)
    assert placed, printed
    assert cluster.head_id.startswith(placed.group(1))  # worker 0 beside the driver
    assert cluster.far_id.startswith(placed.group(2))  # worker 1 on the node that cannot see it
    assert "warning" not in errors
    assert "workers: 2 processes" in printed and "| accuracy" in printed  # worker 0's table
    assert on_ray["n_rows"] == here["n_rows"] == 800
    assert on_ray["metrics"] == here["metrics"]
    assert on_ray["explanations"] == here["explanations"] and here["explanations"]["ipfi"]
    assert _scalar_steps(cluster.driver / "workers-ray", "metrics/accuracy/cumulative")


def test_a_run_no_node_can_hold_is_an_error_before_any_run(tmp_path, cluster):
    cases = {"gpus = 2": r"no node of the Ray cluster can hold a run that asks for 1 CPU, 2 GPUs",
             'memory = "4TiB"': r"asks for 1 CPU, 4096\.0 GiB",
             "custom = {tpu = 1}": r"asks for 1 CPU, 1 tpu"}
    paths = []
    for i, resources in enumerate(cases):
        (tmp_path / str(i)).mkdir()
        paths.append(_config(tmp_path / str(i), cluster, tmp_path / f"never{i}",
                             f"[resources]\n{resources}\n[run]\nn_samples = 50\n"))
    said = cluster.python(_TRY, *map(str, paths)).splitlines()
    assert len(said) == len(cases)
    for line, message in zip(said, cases.values()):
        assert re.search(message, line), line
        assert "its nodes have: CPU 1" in line
    assert not list(tmp_path.glob("never*/*/result.json"))


def test_a_node_killed_mid_run_resumes_on_the_other_from_its_checkpoint(tmp_path, cluster):
    out = cluster.driver / "b"
    path = _config(tmp_path, cluster, out, """
retries = 2
checkpoint_every = 40
[grid]
seeds = [0, 1]
[run]
model = "probit"
n_samples = 2400
batch_size = 4
explain = "ipfi"
""")
    on_far: set[str] = set()

    def echo(line: str, proc: subprocess.Popen[str]) -> None:
        started = re.match(r"\s+(\S+): started on node (\w+)", line)
        if started and cluster.far_id.startswith(started.group(2)):
            on_far.add(started.group(1))
        kept = re.match(r"\s+(\S+): checkpoint \d+ kept", line)
        if kept and kept.group(1) in on_far:
            cluster.kill("far")

    status, lines = cluster.sweep(path, echo)
    assert status == 0, lines
    assert "far" not in cluster.groups, lines  # the far node was killed mid-run
    table = pd.read_csv(out / "results.csv")
    assert table["status"].tolist() == ["ok", "ok"], table["error"].tolist()
    (killed,) = on_far
    info = _info(out, killed)
    assert info["attempt"] == 2 and info["node_id"] == cluster.head_id
    assert info["resumed_at_row"] > 0 and info["resumed_at_row"] % (40 * 4) == 0
    steps = _steps(out, killed)  # every step once: the far node's up to its checkpoint, then
    assert len(steps) == 2400 // 4  # the head's from there
    tb = _scalar_steps(out / killed / "tensorboard", "metrics/accuracy/cumulative")
    assert tb[0] < info["resumed_at_row"] < tb[-1] and tb[-1] >= 2400 - 40
    assert not (out / killed / "checkpoint.pt").exists()


def test_a_stopped_sweep_resumes_its_unfinished_run_from_the_checkpoint(tmp_path, cluster):
    out = cluster.driver / "c"
    storage = tmp_path / "storage"  # reached by every node: the run's folder comes back there
    path = _config(tmp_path, cluster, out, f"""
checkpoint_every = 20
storage = "{storage}"
[run]
model = "probit"
n_samples = 800
batch_size = 4
explain = "ipfi"
""")

    def ctrl_c_at_first_checkpoint(line: str, proc: subprocess.Popen[str]) -> None:
        if re.match(r"\s+\S+: checkpoint \d+ kept", line):
            proc.send_signal(signal.SIGINT)

    status, lines = cluster.sweep(path, ctrl_c_at_first_checkpoint)
    assert status == 130, lines
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    assert (run_dir / "checkpoint.pt").is_file() and not (run_dir / "result.json").exists()
    status, lines = cluster.sweep(path)
    assert status == 0, lines
    assert "1 resumed from their checkpoints" in lines[0]
    table = pd.read_csv(out / "results.csv")
    assert table["status"].tolist() == ["ok"]
    info = _info(out, run_dir.name)
    assert info["resumed_at_row"] > 0 and info["resumed_at_row"] % (20 * 4) == 0
    assert len(_steps(out, run_dir.name)) == 800 // 4
    assert info["stored"] == f"file://{storage}/{run_dir.name}/run.tar"
    assert (storage / run_dir.name / "run.tar").is_file()
