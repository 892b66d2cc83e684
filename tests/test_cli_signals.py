"""Ctrl-C (SIGINT) and SIGTERM stop a real ``torchstream run`` between two steps: the checkpoint
is written, one line says where to resume, the exit status is 130 / 143, and the resumed run
ends exactly where an uninterrupted one does (torchstream.cli.interrupt)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchstream.cli import main

ROWS = 600
OPTIONS = ["--n-samples", str(ROWS), "--batch-size", "1", "--explain", "ipfi", "--seed", "4",
           "--window", "100"]


def _records(path: Path) -> list[list[str]]:
    """steps.csv without the measured seconds."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    keep = [i for i, name in enumerate(rows[0]) if not name.endswith("_seconds")]
    return [[r[i] for i in keep] for r in rows]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[dict, list[list[str]]]:
    folder = tmp_path_factory.mktemp("full")
    assert main(["run", *OPTIONS, "--logdir", str(folder / "logs"), "--result-json",
                 str(folder / "r.json")]) == 0
    return json.loads((folder / "r.json").read_text()), _records(folder / "logs" / "steps.csv")


def _interrupt(argv: list[str], steps_csv: Path, signum: int) -> subprocess.CompletedProcess:
    """Start ``torchstream run`` in a subprocess and send ``signum`` once its steps.csv holds
    rows (the run is between its first and last step)."""
    proc = subprocess.Popen([sys.executable, "-m", "torchstream.cli", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if steps_csv.exists() and steps_csv.stat().st_size > 0:
            break
        time.sleep(0.002)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=240)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("signum, status, words", [
    (signal.SIGINT, 130, "interrupted by SIGINT"), (signal.SIGTERM, 143, "terminated by SIGTERM"),
])
def test_a_signal_writes_the_checkpoint_says_where_to_resume_and_resumes_exactly(
        tmp_path, capsys, uninterrupted, signum, status, words):
    ckpt, logdir, result = tmp_path / "c.pt", tmp_path / "logs", tmp_path / "r.json"
    argv = ["run", *OPTIONS, "--checkpoint", str(ckpt), "--logdir", str(logdir),
            "--result-json", str(result), "--no-progress"]
    done = _interrupt(argv, logdir / "steps.csv", signum)
    assert done.returncode == status, done.stderr[-2000:]
    line = done.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    prefix = f"{words} after row "
    assert line.startswith(prefix), line
    row = int(line[len(prefix):].split(" ")[0].replace(",", ""))
    assert 0 < row < ROWS  # stopped inside the stream, between two steps
    assert line.endswith(f" of {ROWS}: checkpoint written to {ckpt}; to go on, run the same "
                         f"command with --resume {ckpt}")
    assert not result.exists()  # an incomplete run writes no result
    assert len(_records(logdir / "steps.csv")) == row + 1  # header + one record per step
    # the same command with --resume: the end of the uninterrupted run, to the last digit
    assert main([*argv, "--resume", str(ckpt)]) == 0
    assert f"resumed from {ckpt} at row {row:,}" in capsys.readouterr().out
    full, full_records = uninterrupted
    resumed = json.loads(result.read_text())
    assert resumed["n_rows"] == ROWS
    assert resumed["metrics"] == full["metrics"]
    assert resumed["explanations"] == full["explanations"]
    assert _records(logdir / "steps.csv") == full_records


def test_a_signal_without_a_checkpoint_says_the_run_cannot_be_resumed(tmp_path):
    logdir = tmp_path / "logs"
    done = _interrupt(["run", *OPTIONS, "--logdir", str(logdir), "--no-progress"],
                      logdir / "steps.csv", signal.SIGINT)
    assert done.returncode == 130, done.stderr[-2000:]
    line = done.stderr.strip()
    assert "\n" not in line and line.startswith("interrupted by SIGINT after row ")
    assert line.endswith("no checkpoint was asked for (--checkpoint PATH), so the run cannot be "
                         "resumed")
