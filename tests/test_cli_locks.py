"""One writer per run directory and per checkpoint: a second process is refused naming the
holder, a stale lock is taken over and said so, temporary files have unique names, and a sweep
refuses a grid that makes a run twice (torchstream.files, torchstream.cli.outputs)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import threading

import pytest
import torch

from torchstream.checkpoint import load_checkpoint, save_checkpoint
from torchstream.cli import main
from torchstream.files import LOCK_NAME, PathInUseError, PathLock

RUN = [sys.executable, "-m", "torchstream.cli", "run", "--n-samples", "800", "--batch-size", "1",
       "--explain", "none", "--no-progress"]


def test_two_runs_on_one_logdir_one_is_refused_naming_the_holder(tmp_path):
    logdir = tmp_path / "logs"
    argv = RUN + ["--logdir", str(logdir)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 2], [(c, e[-400:]) for c, (_, e) in zip(codes, outs)]
    ok, refused = (0, 1) if codes[0] == 0 else (1, 0)
    err = outs[refused][1].strip()
    assert "\n" not in err and err.startswith("error: --logdir")
    assert f"is in use by another process (pid {procs[ok].pid} on host " in err
    # the file holds the rows of one run only: a header and 800 rows of 9 fields
    with open(logdir / "steps.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert len(rows) == 801 and {len(r) for r in rows} == {len(rows[0])}
    assert [int(r[0]) for r in rows[1:]] == list(range(800))
    assert not (logdir / LOCK_NAME).exists()  # released at the end


def test_two_runs_on_one_checkpoint_one_is_refused_naming_the_holder(tmp_path):
    ckpt = tmp_path / "c.pt"
    procs = [subprocess.Popen(RUN + ["--logdir", str(tmp_path / f"logs{i}"), "--checkpoint",
                                     str(ckpt), "--checkpoint-every", "50"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 2], [(c, e[-400:]) for c, (_, e) in zip(codes, outs)]
    ok, refused = (0, 1) if codes[0] == 0 else (1, 0)
    err = outs[refused][1].strip()
    assert "\n" not in err and err.startswith(f"error: --checkpoint {ckpt} is in use")
    assert f"(pid {procs[ok].pid} on host " in err
    assert load_checkpoint(ckpt)["state"]["position"] == 800
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt", f"logs{ok}"]


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
