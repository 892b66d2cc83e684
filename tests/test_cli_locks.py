"""One writer per run directory and per checkpoint: a second process is refused naming the
holder, a stale lock is taken over and said so, temporary files have unique names, and a sweep
refuses a grid that makes a run twice (torchstream.files, torchstream.cli.outputs)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from torchstream.checkpoint import load_checkpoint, save_checkpoint
from torchstream.cli import main
from torchstream.files import LOCK_NAME, PathInUseError, PathLock

RUN = [sys.executable, "-m", "torchstream.cli", "run", "--n-samples", "800", "--batch-size", "1",
       "--explain", "none", "--no-progress"]
#: A run that holds its locks until it is stopped.
LONG = [*RUN[:4], "--n-samples", "10000000", *RUN[6:]]


def _holding(argv: list[str], lock: Path) -> subprocess.Popen[str]:
    """Start the run ``argv`` and return once it holds ``lock`` (its lock file exists): a run
    started after that meets the lock, however slowly either process starts."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not lock.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first run never took its lock"
        time.sleep(0.05)
    return proc


def _stopped(proc: subprocess.Popen[str]) -> int:
    """Stop the run as Ctrl-C does (it ends at a step boundary); its exit status."""
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=300)
    return proc.returncode


def test_two_runs_on_one_logdir_one_is_refused_naming_the_holder(tmp_path):
    logdir = tmp_path / "logs"
    holder = _holding(LONG + ["--logdir", str(logdir)], logdir / LOCK_NAME)
    second = subprocess.run(RUN + ["--logdir", str(logdir)], capture_output=True, text=True,
                            timeout=300, check=False)
    assert _stopped(holder) == 130
    assert second.returncode == 2, second.stderr
    err = second.stderr.strip()
    assert "\n" not in err and err.startswith("error: --logdir")
    assert f"is in use by another process (pid {holder.pid} on host " in err
    # the file holds the rows of one run only: a header and the holder's rows, in order
    with open(logdir / "steps.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert len(rows) > 1 and {len(r) for r in rows} == {len(rows[0])}
    assert [int(r[0]) for r in rows[1:]] == list(range(len(rows) - 1))
    assert not (logdir / LOCK_NAME).exists()  # released at the end


def test_two_runs_on_one_checkpoint_one_is_refused_naming_the_holder(tmp_path):
    ckpt = tmp_path / "c.pt"
    holder = _holding(LONG + ["--logdir", str(tmp_path / "logs0"), "--checkpoint", str(ckpt),
                              "--checkpoint-every", "50"], tmp_path / "c.pt.lock")
    second = subprocess.run(RUN + ["--logdir", str(tmp_path / "logs1"), "--checkpoint",
                                   str(ckpt), "--checkpoint-every", "50"],
                            capture_output=True, text=True, timeout=300, check=False)
    assert _stopped(holder) == 130
    assert second.returncode == 2, second.stderr
    err = second.stderr.strip()
    assert "\n" not in err and err.startswith(f"error: --checkpoint {ckpt} is in use")
    assert f"(pid {holder.pid} on host " in err
    assert load_checkpoint(ckpt)["state"]["position"] > 0  # the holder's, written as it stopped
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt", "logs0"]


def test_a_stale_lock_is_taken_over_and_said(tmp_path, capsys):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (logdir / LOCK_NAME).write_text(json.dumps({"pid": int(dead.stdout), "host": "h",
                                                "since": "2024-01-01 00:00:00"}))
    assert main(["run", "--n-samples", "40", "--explain", "none", "--logdir", str(logdir)]) == 0
    out = capsys.readouterr().out
    assert (f"took over a stale lock file {logdir / LOCK_NAME} (pid {dead.stdout.strip()} on "
            "host h, since 2024-01-01 00:00:00, no longer running)") in out
    assert not (logdir / LOCK_NAME).exists()


def test_a_held_path_is_refused_in_process_and_free_after_release(tmp_path):
    lock = PathLock(tmp_path / "c.pt", "--checkpoint c.pt")
    with lock:
        with pytest.raises(PathInUseError, match=rf"pid {os.getpid()} on host "):
            PathLock(tmp_path / "c.pt", "--checkpoint c.pt").acquire()
    with PathLock(tmp_path / "c.pt", "--checkpoint c.pt") as again:
        assert again.held and again.stale_note is None


def test_concurrent_saves_of_one_checkpoint_never_share_a_temporary_file(tmp_path):
    path = tmp_path / "c.pt"
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def write(k: int) -> None:
        start.wait()
        try:
            for i in range(15):
                save_checkpoint({"w": torch.full((2000,), float(k)), "i": i}, path)
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    state = load_checkpoint(path)
    assert state["i"] == 14 and torch.equal(state["w"], torch.full((2000,), state["w"][0].item()))
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temporary file left


def test_a_sweep_refuses_a_run_twice(tmp_path, capsys):
    out = tmp_path / "out"
    config = tmp_path / "s.toml"
    config.write_text(f'[sweep]\nout = "{out}"\n[grid]\nseeds = [0, 0]\n[run]\nn_samples = 40\n')
    with pytest.raises(SystemExit) as e:
        main(["sweep", str(config)])
    assert e.value.code == 2
    assert "[grid] seeds lists 0 twice" in capsys.readouterr().err and not out.exists()
