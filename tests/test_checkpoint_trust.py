"""Checkpoints never run code from a file they do not trust (torchstream.checkpoint)."""

from __future__ import annotations

import io
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from river import drift, tree

from torchstream.checkpoint import (
    MAGIC,
    PICKLED,
    CheckpointError,
    key_path,
    load_checkpoint,
    save_checkpoint,
)
from torchstream.cli import main
from torchstream.drift import ErrorDetector
from torchstream.evaluate import Evaluator, Prequential
from torchstream.learners import RiverLearner
from torchstream.streams import SEA


class _Marker:
    """Unpickling this object creates a file: the proof that code ran from a checkpoint."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def _evil_blob(marker: Path) -> bytes:
    return pickle.dumps(_Marker(marker))


def _payload(state: object) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def _signed_elsewhere(payload: bytes) -> bytes:
    """Our header with a signature made under another key."""
    import hashlib
    import hmac

    digest = hmac.new(b"k" * 32, payload, hashlib.sha256).hexdigest().encode()
    return MAGIC + digest + b"\n" + payload


def test_round_trip_keeps_tensors_objects_and_signs(tmp_path):
    detector = drift.ADWIN()
    for v in [0.0] * 50 + [1.0] * 50:
        detector.update(v)
    state = {"w": torch.arange(3.0), "n": 4, "name": "x", "nested": [{"t": (1, 2.5)}],
             "detector": detector}
    path = save_checkpoint(state, tmp_path / "c.pt")
    loaded = load_checkpoint(path)
    assert torch.equal(loaded["w"], state["w"]) and loaded["n"] == 4
    assert loaded["nested"] == [{"t": (1, 2.5)}]
    assert isinstance(loaded["detector"], drift.ADWIN)
    assert loaded["detector"].width == detector.width
    mode = stat.S_IMODE(os.stat(key_path()).st_mode)
    assert mode == 0o600


def test_foreign_pickled_part_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "evil.pt"
    path.write_bytes(_signed_elsewhere(_payload({"model": {PICKLED: _evil_blob(marker)}})))
    with pytest.raises(CheckpointError, match=r"pickled objects \(/model\) and was not signed"):
        load_checkpoint(path)
    assert not marker.exists()


def test_foreign_pickled_part_loads_only_when_trusted(tmp_path):
    detector = drift.ADWIN()
    path = tmp_path / "foreign.pt"
    blob = pickle.dumps(detector)
    path.write_bytes(_signed_elsewhere(_payload({"detector": {PICKLED: blob}})))
    with pytest.raises(CheckpointError, match="trust"):
        load_checkpoint(path)
    assert isinstance(load_checkpoint(path, trusted=True)["detector"], drift.ADWIN)


@pytest.mark.parametrize("kind", ["plain_torch_save", "object_payload", "tampered"])
def test_crafted_files_are_refused_and_run_nothing(tmp_path, kind):
    marker = tmp_path / "marker"
    path = tmp_path / "evil.pt"
    if kind == "plain_torch_save":  # the format of the former checkpoints: a bare pickle
        torch.save({"state": _Marker(marker)}, path)
    elif kind == "object_payload":  # a correct header, an object that weights-only refuses
        path.write_bytes(_signed_elsewhere(_payload({"state": _Marker(marker)})))
    else:  # our own signed file, one byte of the payload changed after signing
        save_checkpoint({"model": {PICKLED: b"x"}, "w": torch.zeros(4)}, path)
        data = bytearray(path.read_bytes())
        data[-20] ^= 0xFF
        path.write_bytes(bytes(data))
    assert not marker.exists()  # building the file ran nothing either
    with pytest.raises(CheckpointError):
        load_checkpoint(path)
    assert not marker.exists()


def test_foreign_file_of_tensors_only_loads(tmp_path):
    path = tmp_path / "foreign.pt"
    path.write_bytes(_signed_elsewhere(_payload({"w": torch.ones(2), "n": 3})))
    loaded = load_checkpoint(path)
    assert loaded["n"] == 3 and torch.equal(loaded["w"], torch.ones(2))


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"), (b"", "is empty"), (b"garbage", "not a torchstream checkpoint"),
    (MAGIC + b"abc", "truncated or damaged"),
])
def test_missing_empty_garbage(tmp_path, content, message):
    path = tmp_path / "c.pt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path)


def test_raw_pickled_bytes_in_a_state_are_never_unpickled(tmp_path):
    marker = tmp_path / "marker"
    learner = RiverLearner.for_stream(tree.HoeffdingTreeClassifier(), SEA(n_samples=10))
    with pytest.raises(CheckpointError, match="raw pickled bytes"):
        learner.load_state_dict({"model": _evil_blob(marker), "n_classes": 2})
    det = ErrorDetector(drift.ADWIN())
    with pytest.raises(CheckpointError, match="raw pickled bytes"):
        det.load_state_dict({"detector": _evil_blob(marker), "drift_detected": False,
                             "drift_positions": [], "drift_steps": []})
    assert not marker.exists()


def _river_run(n: int) -> Evaluator:
    stream = SEA(n_samples=n, seed=2)
    learner = RiverLearner.for_stream(tree.HoeffdingTreeClassifier(), stream)
    return Prequential(learner, stream, batch_size=10, window=50,
                       plugins=[ErrorDetector(drift.ADWIN())])


def test_river_run_resumes_exactly_from_its_own_signed_checkpoint(tmp_path):
    full = _river_run(600)
    full.run()
    half = _river_run(600)
    half.run(30)
    path = half.save(tmp_path / "river.pt")
    resumed = _river_run(600)
    resumed.resume(path)
    resumed.run()
    assert resumed.results() == full.results()
    # the same file under another user's key needs trust
    other = tmp_path / "other_home"
    env_key = os.environ["TORCHSTREAM_HOME"]
    os.environ["TORCHSTREAM_HOME"] = str(other)
    try:
        with pytest.raises(CheckpointError, match="trust"):
            _river_run(600).resume(path)
        _river_run(600).resume(path, trusted=True)
    finally:
        os.environ["TORCHSTREAM_HOME"] = env_key


def test_cli_hostile_resume_exits_2_runs_nothing_writes_nothing(tmp_path, capsys):
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.pt"
    torch.save({"state": _Marker(marker)}, evil)
    logdir = tmp_path / "logs"
    with pytest.raises(SystemExit) as e:
        main(["run", "--n-samples", "100", "--resume", str(evil), "--logdir", str(logdir),
              "--result-json", str(tmp_path / "r.json"), "--checkpoint", str(tmp_path / "c.pt")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "not a torchstream checkpoint" in err
    assert not marker.exists() and not logdir.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.pt"]


def test_console_script_exit_status_is_2_with_one_line(tmp_path):
    bad = tmp_path / "garbage.pt"
    bad.write_bytes(b"\x80\x04not a pickle")
    out = subprocess.run([sys.executable, "-m", "torchstream.cli", "run", "--resume", str(bad),
                          "--logdir", str(tmp_path / "x")], capture_output=True, text=True, check=False)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
