"""``torchstream run --workers 2`` through the command line: the model, metrics, detector alarms
and iPDP of one process at twice the batch, iPFI / iSAGE within their confidence bounds; a
worker killed stops the run naming it, Ctrl-C stops every worker after the same step, and the
run resumed from its checkpoints ends exactly as the uninterrupted run; a resume with another
number of workers is refused with the reason."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from torchstream.checkpoint import load_checkpoint
from torchstream.cli import main
from torchstream.explain.smoothing import ExponentialSmoother

if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

ROWS, BATCH, ALPHA = 2001, 8, 0.01  # the last global batch has one row: worker 1 gets none
COMMON = ["run", "--n-samples", str(ROWS), "--explain", "ipfi,isage,ipdp", "--detect",
          "eddm,ddm", "--explain-alpha", str(ALPHA), "--log-every", "25", "--no-progress"]


def _run(tmp: Path, name: str, *extra: str) -> tuple[int, dict[str, object]]:
    """``torchstream run`` into ``tmp/name``: its exit status and result JSON (or {})."""
    try:
        code = main([*COMMON, "--logdir", str(tmp / name), "--result-json",
                     str(tmp / f"{name}.json"), *extra])
    except SystemExit as e:  # an error: its line on stderr, exit status 2
        code = e.code if isinstance(e.code, int) else 1
    path = tmp / f"{name}.json"
    return code, (json.loads(path.read_text()) if path.exists() else {})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Two workers at batch 8 and one process at batch 16, each with its final checkpoint."""
    tmp = tmp_path_factory.mktemp("workers")
    out: dict[str, object] = {"tmp": tmp}
    for name, extra in (("two", ["--workers", "2", "--batch-size", str(BATCH)]),
                        ("one", ["--batch-size", str(2 * BATCH)])):
        code, result = _run(tmp, name, *extra, "--checkpoint", str(tmp / f"{name}.pt"))
        assert code == 0
        out[name] = result
        out[f"{name}.pt"] = load_checkpoint(tmp / f"{name}.pt")
    return out


def _bounds(state: dict[str, object], explainer: str) -> tuple[torch.Tensor, torch.Tensor]:
    """An explainer's debiased importance and 95 % half-width from a checkpoint's state."""
    saved = state["plugins"][explainer]["smoother"]  # type: ignore[index]
    smoother = ExponentialSmoother(ALPHA, saved["raw"].shape[0])
    smoother.load_state_dict(saved)
    return smoother.debiased, smoother.half_width(0.05)


def test_two_workers_equal_one_process_at_twice_the_batch(runs, capfd):
    two, one = runs["two.pt"], runs["one.pt"]
    assert two["identity"]["config"]["workers"] == 2 and "workers" not in one["identity"]["config"]
    ranks = two["state"]["workers"]["ranks"]  # each worker's own explainer states
    assert len(ranks) == 2
    assert not torch.equal(ranks[0]["explainers"][0][1]["generator"],
                           ranks[1]["explainers"][0][1]["generator"])  # drawn apart
    module_two, module_one = two["state"]["learner"]["module"], one["state"]["learner"]["module"]
    assert set(module_two) == set(module_one)
    for name, value in module_one.items():  # every replica took one process's steps
        assert torch.allclose(module_two[name], value, atol=1e-5, rtol=0), name
    assert two["state"]["learner"]["n_samples_seen"] == ROWS
    a, b = runs["two"], runs["one"]
    assert a["n_rows"] == b["n_rows"] == ROWS and a["n_steps"] == b["n_steps"]
    for key in ("accuracy", "f1", "accuracy_window"):  # counts of the same predictions
        assert a["metrics"][key] == b["metrics"][key], key
    for key in ("log_loss", "log_loss_window"):
        assert a["metrics"][key] == pytest.approx(b["metrics"][key], abs=1e-6), key
    # the detectors saw every row's error in stream order
    assert a["alarms"] == b["alarms"] and len(a["alarms"]["drift_eddm"]) > 5
    ipdp = "ipdp/" + next(k for k in a["explanations"] if k.startswith("ipdp/")).split("/")[1]
    assert a["explanations"][ipdp]["importance"] == pytest.approx(
        b["explanations"][ipdp]["importance"], abs=1e-6)  # worker 0, every row, same seed
    for explainer in ("ipfi", "isage"):  # equal in distribution: within the bounds
        value_two, half_two = _bounds(two["state"], explainer)
        value_one, half_one = _bounds(one["state"], explainer)
        assert torch.all((value_two - value_one).abs() <= half_two + half_one), explainer
        assert int(value_two.argmax()) == int(value_one.argmax()), explainer
        assert list(a["explanations"][explainer].values()) == pytest.approx(
            value_two.tolist(), abs=1e-9)
        assert two["state"]["plugins"][explainer]["smoother"]["n"] == ROWS - 2 * BATCH


def _workers_of(parent: int) -> list[int]:
    """The process ids of ``parent``'s spawned workers (read from /proc; none reaped)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"spawn_main" in cmdline:
            out.append(int(entry.name))
    return sorted(out)


def _after_checkpoint(ckpt: Path, beyond: int, act: object) -> threading.Thread:
    """A thread that calls ``act()`` once ``ckpt`` holds a position beyond row ``beyond``."""

    def watch() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if ckpt.exists() and load_checkpoint(ckpt)["state"]["position"] > beyond:
                    act()  # type: ignore[operator]
                    return
            except (OSError, ValueError):  # being replaced
                pass
            time.sleep(0.005)

    thread = threading.Thread(target=watch)
    thread.start()
    return thread


def test_a_killed_worker_and_a_signal_stop_the_run_which_resumes_to_the_same_result(runs, capfd):
    tmp: Path = runs["tmp"]  # type: ignore[assignment]
    ckpt = tmp / "killed.pt"
    args = ["--workers", "2", "--batch-size", str(BATCH), "--checkpoint", str(ckpt),
            "--checkpoint-every", "20"]
    killed: list[int] = []

    def kill_a_worker() -> None:
        pids = _workers_of(os.getpid())
        if pids:
            killed.append(pids[-1])
            os.kill(pids[-1], signal.SIGKILL)

    watcher = _after_checkpoint(ckpt, 0, kill_a_worker)
    code, result = _run(tmp, "killed", *args)
    watcher.join()
    out, err = capfd.readouterr()
    assert code == 2 and result == {} and killed
    pids = [int(p) for p in re.search(r"pids (\d+), (\d+)\)", out).groups()]
    rank = pids.index(killed[0])
    assert (f"error: worker {rank} (pid {killed[0]}) died (killed by SIGKILL); the run is "
            f"stopped; to go on from its last checkpoint, run the same command with --resume "
            f"{ckpt}") in err
    saved = load_checkpoint(ckpt)["state"]["position"]
    assert 0 < saved < ROWS  # stopped mid-run
    # resumed, then Ctrl-C: passed on to the workers, which stop after one step and checkpoint
    watcher = _after_checkpoint(ckpt, saved, lambda: os.kill(os.getpid(), signal.SIGINT))
    code, result = _run(tmp, "killed", *args, "--resume", str(ckpt))
    watcher.join()
    out, err = capfd.readouterr()
    stopped = load_checkpoint(ckpt)["state"]["position"]
    assert code == 130 and result == {} and f"resumed from {ckpt} at row {saved:,}" in out
    assert saved < stopped < ROWS
    assert (f"interrupted by SIGINT after row {stopped:,} of {ROWS:,}: checkpoint written to "
            f"{ckpt}; to go on, run the same command with --resume {ckpt}") in err
    code, result = _run(tmp, "killed", *args, "--resume", str(ckpt))
    out, _ = capfd.readouterr()
    assert code == 0 and f"resumed from {ckpt} at row {stopped:,}" in out
    # killed, resumed, interrupted and resumed: the uninterrupted run, to the digit
    full = runs["two"]
    assert result["metrics"] == full["metrics"] and result["alarms"] == full["alarms"]
    assert result["explanations"] == full["explanations"]
    resumed, uninterrupted = load_checkpoint(ckpt)["state"], runs["two.pt"]["state"]
    for name, value in uninterrupted["learner"]["module"].items():
        assert torch.equal(resumed["learner"]["module"][name], value), name


def test_resume_with_another_number_of_workers_is_refused(runs, capfd):
    tmp: Path = runs["tmp"]  # type: ignore[assignment]
    two, one = tmp / "two.pt", tmp / "one.pt"
    for workers, ckpt, saved in (("3", two, 2), ("1", two, 2), ("2", one, 1)):
        code, _ = _run(tmp, f"refused{workers}", "--workers", workers, "--batch-size",
                       str(BATCH), "--resume", str(ckpt))
        err = capfd.readouterr().err
        assert code == 2
        assert (f"error: --resume {ckpt} was written by a run with --workers {saved} and this "
                f"run has --workers {workers}") in err
        assert f"resume with --workers {saved}" in err
        assert not (tmp / f"refused{workers}").exists()  # refused before any output
