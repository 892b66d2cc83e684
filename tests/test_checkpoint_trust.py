"""Checkpoints never run code from a file they do not trust (torchstream.checkpoint)."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import stat
import subprocess
import sys
import threading
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from river import drift, tree

from torchstream.checkpoint import (
    MAGIC,
    PICKLED,
    CheckpointError,
    check_key,
    key_path,
    load_checkpoint,
    pickled_parts,
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


def test_a_torch_runs_checkpoint_loads_under_another_key_without_trust(tmp_path, monkeypatch,
                                                                       capsys):
    base = ["run", "--n-samples", "200", "--batch-size", "4", "--seed", "3"]
    ckpt = tmp_path / "c.pt"
    assert main(base + ["--steps", "20", "--checkpoint", str(ckpt),
                        "--logdir", str(tmp_path / "a")]) == 0
    raw = ckpt.read_bytes()[len(MAGIC) + 65:]
    state = torch.load(io.BytesIO(raw), weights_only=True)
    assert pickled_parts(state) == []  # module, optimiser, scalers, explainers: weights only
    assert isinstance(state["state"]["learner"]["module"], OrderedDict)
    # another user: another key, no --trust-checkpoint
    monkeypatch.setenv("TORCHSTREAM_HOME", str(tmp_path / "other_home"))
    capsys.readouterr()
    assert main(base + ["--resume", str(ckpt), "--logdir", str(tmp_path / "b"),
                        "--result-json", str(tmp_path / "resumed.json")]) == 0
    assert "resumed from" in capsys.readouterr().out
    assert main(base + ["--logdir", str(tmp_path / "c"),
                        "--result-json", str(tmp_path / "full.json")]) == 0
    resumed = json.loads((tmp_path / "resumed.json").read_text())
    full = json.loads((tmp_path / "full.json").read_text())
    assert resumed["n_rows"] == full["n_rows"] == 200
    assert resumed["metrics"] == full["metrics"]
    assert resumed["explanations"] == full["explanations"]


def _home_with_key(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TORCHSTREAM_HOME", str(home))
    return home / "checkpoint.key"


def _refused_before_the_first_row(tmp_path, capsys) -> str:
    logdir = tmp_path / "logs"
    with pytest.raises(SystemExit) as e:
        main(["run", "--n-samples", "50", "--checkpoint", str(tmp_path / "c.pt"),
              "--logdir", str(logdir)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: checkpoint key ") and "\n" not in err
    assert not logdir.exists() and not (tmp_path / "c.pt").exists()
    return err


def test_a_key_others_can_read_is_refused_before_the_first_row(tmp_path, monkeypatch, capsys):
    key = _home_with_key(tmp_path, monkeypatch)
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)
    err = _refused_before_the_first_row(tmp_path, capsys)
    assert f"{key} has mode 0644: other users can read or change it" in err
    key.chmod(0o600)
    assert check_key() == key


def test_a_symlink_to_a_readable_key_is_refused_and_one_to_a_private_key_is_used(
        tmp_path, monkeypatch, capsys):
    key = _home_with_key(tmp_path, monkeypatch)
    real = tmp_path / "real.key"
    real.write_bytes(os.urandom(32))
    real.chmod(0o640)
    key.symlink_to(real)
    err = _refused_before_the_first_row(tmp_path, capsys)
    assert f"{key} (a symlink to {real}) has mode 0640" in err
    real.chmod(0o600)
    path = save_checkpoint({"x": {PICKLED: pickle.dumps(drift.ADWIN())}}, tmp_path / "c.pt")
    assert isinstance(load_checkpoint(path)["x"], drift.ADWIN)  # signed and verified with it


def test_a_fifo_key_is_refused_without_being_opened(tmp_path, monkeypatch, capsys):
    key = _home_with_key(tmp_path, monkeypatch)
    os.mkfifo(key, 0o600)
    outcome: list[BaseException] = []

    def check() -> None:  # opening a FIFO for reading would block here until a writer came
        try:
            check_key()
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            outcome.append(e)

    thread = threading.Thread(target=check, daemon=True)
    thread.start()
    thread.join(timeout=20)
    assert not thread.is_alive(), "check_key blocked on the FIFO"
    assert isinstance(outcome[0], CheckpointError)
    assert str(outcome[0]) == (f"checkpoint key {key} is a FIFO (named pipe), not a regular "
                               "file; remove it (a new key is made on first use)")
    _refused_before_the_first_row(tmp_path, capsys)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_key_of_another_user_is_refused(tmp_path, monkeypatch):
    key = _home_with_key(tmp_path, monkeypatch)
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    os.chown(key, 54321, -1)
    with pytest.raises(CheckpointError, match="belongs to another user \\(uid 54321\\)"):
        check_key()


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
def test_a_checkpoint_that_is_not_a_regular_file_is_named_and_never_read(tmp_path, kind):
    if kind == "fifo":
        path, words = tmp_path / "c.pt", "is a FIFO (named pipe), not a checkpoint file"
        os.mkfifo(path)
    elif kind == "dev_zero":
        path, words = Path("/dev/zero"), "is a character device, not a checkpoint file"
    else:
        path, words = tmp_path, "is a directory, not a checkpoint file"
    with pytest.raises(CheckpointError, match=re.escape(f"checkpoint {path} {words}")):
        load_checkpoint(path)
