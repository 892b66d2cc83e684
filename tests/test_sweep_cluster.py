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
groups at the end)."""

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from torchstream.cli.sweep import load_sweep, run_sweep

ray = pytest.importorskip("ray")

RAY = Path(sys.executable).with_name("ray")


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

    def kill(self, node: str) -> None:
        """SIGKILL every process of ``node`` (its raylet, its workers): the node is lost."""
        pgid = self.groups.pop(node, None)
        if pgid is not None:
            _killpg(pgid)


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


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:  # the group is gone already
        pass


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if shutil.which("unshare") is None or not RAY.exists():
        pytest.skip("needs unshare(1) and Ray's `ray` command")
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           check=False, capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a mount namespace: {probe.stderr.strip()}")
    base = Path(tempfile.mkdtemp(prefix="ts-ray-"))  # short: Ray's socket paths are limited
    driver = tmp_path_factory.mktemp("driver")
    (driver / "on-the-driver").write_text("only the driver sees this")
    port = _free_port()
    # the nodes' own home and no token authentication (neither the user's Ray token file nor
    # the RAY_AUTH_MODE an earlier ray.init of this process exported), fast detection of a
    # lost node
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env |= {"HOME": str(base / "home"), "RAY_AUTH_MODE": "disabled",
            "RAY_health_check_period_ms": "500",
            "RAY_health_check_timeout_ms": "1000", "RAY_health_check_failure_threshold": "2",
            "RAY_health_check_initial_delay_ms": "0"}
    (base / "home").mkdir()
    groups: dict[str, int] = {}
    driver_env = pytest.MonkeyPatch()  # the driver (this process) connects as the nodes do
    driver_env.setenv("RAY_AUTH_MODE", "disabled")
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
        ray.init(address=f"127.0.0.1:{port}", logging_level="ERROR", log_to_driver=False)
        try:
            nodes = [n for n in ray.nodes() if n["Alive"]]
            far = [n["NodeID"] for n in nodes if "far" in n["Resources"]]
            head = [n["NodeID"] for n in nodes if "far" not in n["Resources"]]
            assert len(far) == 1 and len(head) == 1, nodes
            assert ray.get_runtime_context().get_node_id() == head[0]  # the driver's node
            strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                far[0], soft=False)
            listing = ray.remote(num_cpus=0)(lambda p: sorted(os.listdir(p)))  # by value
            seen = ray.get(listing.options(scheduling_strategy=strategy).remote(str(driver)))
            assert seen == []  # the far node sees an empty tmpfs where the driver has a file
        finally:
            ray.shutdown()
        yield Cluster(f"127.0.0.1:{port}", head[0], far[0], driver, groups)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for pgid in groups.values():
            _killpg(pgid)
        driver_env.undo()
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
    lines: list[str] = []
    table = run_sweep(load_sweep(path), echo=lines.append)
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


@pytest.mark.parametrize("resources, message", [
    ("gpus = 2", r"no node of the Ray cluster can hold a run that asks for 1 CPU, 2 GPUs"),
    ('memory = "4TiB"', r"asks for 1 CPU, 4096\.0 GiB"),
    ("custom = {tpu = 1}", r"1 tpu"),
])
def test_a_run_no_node_can_hold_is_an_error_before_any_run(tmp_path, cluster, resources,
                                                          message):
    out = tmp_path / "never"
    path = _config(tmp_path, cluster, out, f"[resources]\n{resources}\n[run]\nn_samples = 50\n")
    with pytest.raises(ValueError, match=message):
        run_sweep(load_sweep(path), echo=lambda s: None)
    assert not any(out.glob("*/result.json"))


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
    lines: list[str] = []
    on_far: set[str] = set()

    def echo(line: str) -> None:
        lines.append(line)
        started = re.match(r"\s+(\S+): started on node (\w+)", line)
        if started and cluster.far_id.startswith(started.group(2)):
            on_far.add(started.group(1))
        kept = re.match(r"\s+(\S+): checkpoint \d+ kept", line)
        if kept and kept.group(1) in on_far:
            cluster.kill("far")

    try:
        table = run_sweep(load_sweep(path), echo=echo)
    finally:
        print(f"head {cluster.head_id}, far {cluster.far_id}", *lines, sep="\n")  # on failure
    assert "far" not in cluster.groups, lines  # the far node was killed mid-run
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

    def stop_at_first_checkpoint(line: str) -> None:
        if re.match(r"\s+\S+: checkpoint \d+ kept", line):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(load_sweep(path), echo=stop_at_first_checkpoint)
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    assert (run_dir / "checkpoint.pt").is_file() and not (run_dir / "result.json").exists()
    lines: list[str] = []
    table = run_sweep(load_sweep(path), echo=lines.append)
    assert "1 resumed from their checkpoints" in lines[0]
    assert table["status"].tolist() == ["ok"]
    info = _info(out, run_dir.name)
    assert info["resumed_at_row"] > 0 and info["resumed_at_row"] % (20 * 4) == 0
    assert len(_steps(out, run_dir.name)) == 800 // 4
    assert info["stored"] == f"file://{storage}/{run_dir.name}/run.tar"
    assert (storage / run_dir.name / "run.tar").is_file()
