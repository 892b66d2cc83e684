"""Resume continues the same run, or says which keys differ (checkpoint identity)."""

from __future__ import annotations

import warnings

import pytest
import torch

from torchstream.checkpoint import CheckpointError, load_checkpoint
from torchstream.cli import main
from torchstream.evaluate import Prequential
from torchstream.explain import IncrementalPFI
from torchstream.learners import online_learner
from torchstream.models import MLP
from torchstream.streams import SEA, Friedman


def mlp_learner(task, seed=0):
    return online_learner(lambda d, k: MLP(d, k, hidden=(16,)), task=task, lr=0.01, seed=seed)


def _runner(stream, *, alpha=0.01):
    learner = mlp_learner(stream.task, seed=0)
    ipfi = IncrementalPFI(None, "cross_entropy" if stream.task == "classification" else "mse",
                          stream.n_features, alpha=alpha, seed=0)
    return Prequential(learner, stream, batch_size=8, window=50, plugins=[ipfi])


@pytest.fixture
def saved(tmp_path):
    runner = _runner(SEA(n_samples=400, seed=3))
    runner.run(10)
    return runner.save(tmp_path / "c.pt")


@pytest.mark.parametrize("other, keys", [
    (lambda: _runner(SEA(n_samples=400, seed=4)), ["stream.first_rows_sha256"]),
    (lambda: _runner(SEA(n_samples=500, seed=3)), ["stream.n_samples"]),
    (lambda: _runner(SEA(n_samples=400, seed=3), alpha=0.1), ["plugins.ipfi.alpha"]),
    (lambda: _runner(Friedman(n_samples=400, seed=3)),
     ["stream.n_features", "stream.task", "plugins.ipfi.loss_name"]),
])
def test_another_run_is_refused_with_each_differing_key(saved, other, keys):
    runner = other()
    with pytest.raises(CheckpointError, match="belongs to another run") as e:
        runner.resume(saved)
    for key in keys:
        assert key in str(e.value)
    # nothing was loaded
    assert runner.position == 0 and runner.learner.n_samples_seen == 0
    assert runner.plugins[0].n_batches == 0


def test_same_run_resumes_and_strict_false_only_warns(saved):
    same = _runner(SEA(n_samples=400, seed=3))
    same.resume(saved)
    assert same.position == 80
    other = _runner(SEA(n_samples=400, seed=4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other.resume(saved, strict=False)
    assert any("first_rows_sha256" in str(w.message) for w in caught)
    assert other.position == 80


def test_identity_is_stored_and_names_version_and_stream(saved):
    identity = load_checkpoint(saved)["identity"]
    assert identity["torchstream"]
    assert identity["stream"]["name"].startswith("SEA") and identity["stream"]["n_features"] == 3
    assert identity["protocol"]["batch_size"] == 8


def _cli(tmp_path, *argv):
    return main(["run", "--n-samples", "200", "--batch-size", "4", "--no-progress",
                 "--explain", "ipfi", "--logdir", str(tmp_path / "logs"), *argv])


@pytest.mark.parametrize("argv, key", [
    (["--seed", "1"], "config.seed"),
    (["--stream", "sea-drift"], "stream.name"),
    (["--explain", "ipfi,isage"], "plugins.isage: only in this run"),
    (["--lr", "0.1"], "config.lr"),
    (["--batch-size", "8"], "protocol.batch_size"),
])
def test_cli_resume_of_another_run_exits_2_naming_the_key(tmp_path, capsys, argv, key):
    ck = tmp_path / "c.pt"
    assert _cli(tmp_path, "--checkpoint", str(ck), "--steps", "10") == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        _cli(tmp_path, "--resume", str(ck), *argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert key in err and err.count("\n") == 1


def test_cli_csv_file_changed_between_runs_is_refused(tmp_path, capsys):
    data = tmp_path / "d.csv"
    rows = "\n".join(f"{i % 7},{(i * 3) % 5},{i % 2}" for i in range(120))
    data.write_text("a,b,y\n" + rows + "\n")
    ck = tmp_path / "c.pt"
    args = ["--stream", str(data), "--target", "y", "--n-samples", "120"]
    assert _cli(tmp_path, *args, "--checkpoint", str(ck), "--steps", "5") == 0
    data.write_text("a,b,y\n" + rows + "\n" + "1,1,1\n")  # one more row: another file
    capsys.readouterr()
    with pytest.raises(SystemExit):
        _cli(tmp_path, *args, "--resume", str(ck))
    err = capsys.readouterr().err
    assert "stream.source.size" in err and "stream.source.sha256_first_mib" in err


def test_finished_run_writes_a_final_checkpoint(tmp_path, capsys):
    ck = tmp_path / "c.pt"
    # 50 steps; periodic checkpoints every 7 steps would end at step 49 without the final one
    assert _cli(tmp_path, "--checkpoint", str(ck), "--checkpoint-every", "7") == 0
    assert load_checkpoint(ck)["state"]["position"] == 200
    capsys.readouterr()
    assert _cli(tmp_path, "--resume", str(ck)) == 0
    out = capsys.readouterr().out
    assert "resumed from" in out and "nothing left to do" in out


@pytest.mark.parametrize("argv, message", [
    (["--checkpoint-every", "0", "--checkpoint", "c.pt"], "--checkpoint-every must be >= 1"),
    (["--checkpoint-every", "-3", "--checkpoint", "c.pt"], "--checkpoint-every must be >= 1"),
    (["--device", "tpu"], "--device 'tpu' is not a device"),
    (["--device", "npu:0"], "--device"),
    (["--lr", "-1"], "--lr must be a finite number > 0"),
    (["--lr", "nan"], "--lr must be a finite number > 0"),
    (["--lr", "inf"], "--lr must be a finite number > 0"),
    (["--explain-alpha", "0"], "--explain-alpha"),
    (["--resume", "missing.pt"], "does not exist"),
])
def test_cli_usage_errors_exit_2_with_one_line(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        _cli(tmp_path, *argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("error: ")
    assert not (tmp_path / "logs").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cli_cuda_without_cuda(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        _cli(tmp_path, "--device", "cuda")
    assert e.value.code == 2 and "CUDA is not available" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--checkpoint", "--result-json"])
def test_output_paths_are_checked_before_the_first_row(tmp_path, capsys, flag):
    directory = tmp_path / "a_directory"
    directory.mkdir()
    with pytest.raises(SystemExit) as e:
        _cli(tmp_path, flag, str(directory))
    assert e.value.code == 2 and "is a directory" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()  # nothing ran, nothing was written


def test_logdir_that_is_a_file(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    with pytest.raises(SystemExit):
        main(["run", "--n-samples", "100", "--logdir", str(tmp_path / "f")])
    assert "is a file, not a directory" in capsys.readouterr().err


def test_river_dataset_that_needs_a_download_offline(tmp_path, capsys, monkeypatch):
    import urllib.error

    from torchstream import streams

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(streams, "from_river", offline)
    with pytest.raises(SystemExit) as e:
        main(["run", "--stream", "river:Elec2", "--logdir", str(tmp_path / "x")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "river dataset Elec2 could not be read" in err and err.count("\n") == 1


def test_cli_streams_step_records_to_the_run_directory_and_resume_continues_them(tmp_path):
    import pandas as pd

    ck = tmp_path / "c.pt"
    assert _cli(tmp_path, "--checkpoint", str(ck), "--steps", "20") == 0
    steps = tmp_path / "logs" / "steps.csv"
    assert len(pd.read_csv(steps)) == 20
    assert _cli(tmp_path, "--resume", str(ck)) == 0
    frame = pd.read_csv(steps)
    assert list(frame["step"]) == list(range(50))  # 200 rows / 4, no step twice or missing
    assert list(frame["start"]) == [4 * s for s in range(50)]


@pytest.mark.parametrize("action", ["raise", "skip"])
def test_cli_divergence_stops_or_is_counted(tmp_path, capsys, action):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(200, 2, generator=g) * 1e6
    data = tmp_path / "big.csv"
    data.write_text("a,b,y\n" + "\n".join(f"{a:.1f},{b:.1f},{int(a > 0)}"
                                          for a, b in X.tolist()) + "\n")
    argv = ["run", "--stream", str(data), "--model", "probit", "--no-scale-inputs",
            "--explain", "none", "--no-progress", "--logdir", str(tmp_path / "logs"),
            "--on-divergence", action]
    if action == "raise":
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "training diverged at row" in err and "scale the inputs" in err
    else:
        with pytest.warns(RuntimeWarning, match="the step was undone"):
            assert main(argv) == 0
        assert "divergent steps (skip): non-finite parameters" in capsys.readouterr().out
