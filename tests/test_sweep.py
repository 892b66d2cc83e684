"""`torchstream sweep`: a grid of runs, one table, reruns skip finished runs, failures reported."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from torchstream.cli import main
from torchstream.cli.sweep import SweepConfig, load_sweep, run_sweep


def write(tmp_path, text):
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


GRID = """
[sweep]
name = "t"
workers = {workers}
out = "{out}"
[grid]
models = ["probit", "mlp"]
explain = ["ipfi"]
[run]
n_samples = 200
batch_size = 10
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_two_run_sweep_and_rerun_skips(tmp_path, capsys, workers):
    out = tmp_path / "out"
    path = write(tmp_path, GRID.format(workers=workers, out=out))
    assert main(["sweep", str(path)]) == 0
    table = pd.read_csv(out / "results.csv")
    assert list(table["model"]) == ["probit", "mlp"]  # the option's name, not the grid key's
    assert (table["status"] == "ok").all()
    assert table["n_rows"].tolist() == [200, 200]
    assert {"accuracy", "ipfi/salary"} <= set(table.columns)
    for run_id in table["run_id"]:
        result = json.loads((out / run_id / "result.json").read_text())
        assert result["metrics"]["accuracy"] == pytest.approx(
            float(table.loc[table["run_id"] == run_id, "accuracy"].iloc[0]))
        assert any((out / run_id / "tensorboard").iterdir())
    capsys.readouterr()
    main(["sweep", str(path)])
    assert "2 already finished, 0 to run" in capsys.readouterr().out
    again = pd.read_csv(out / "results.csv")  # the rerun keeps each run's own wall time
    assert again["wall_seconds"].tolist() == table["wall_seconds"].tolist()
    assert (again["wall_seconds"] > 0).all()


def test_a_csv_stream_in_a_run_id_is_its_name_and_a_digest(tmp_path):
    config = SweepConfig(name="t", out=tmp_path, grid={"streams": ["/data/a/x.csv",
                                                                   "/data/b/x.csv"]})
    ids = [spec.run_id for spec in config.runs()]
    assert all(i.startswith("stream=x.") and "/" not in i and "data" not in i for i in ids)
    assert len(set(ids)) == 2


def test_failed_run_is_reported_and_does_not_stop_the_grid(tmp_path):
    out = tmp_path / "out"
    path = write(tmp_path, f"""
[sweep]
out = "{out}"
[grid]
batch_sizes = [10, 300]
[run]
n_samples = 200
steps = 2
explain = "none"
""")
    table = run_sweep(load_sweep(path), echo=lambda s: None)
    assert table["status"].tolist() == ["ok", "ok"]
    # a run that fails inside (an iPDP of a column that does not exist) is reported
    path = write(tmp_path, f"""
[sweep]
out = "{out}2"
[grid]
explain = ["ipdp", "none"]
[run]
n_samples = 200
pdp_feature = "nope"
""")
    table = run_sweep(load_sweep(path), echo=lambda s: None)
    assert table["status"].tolist() == ["failed", "ok"]
    assert "--pdp-feature 'nope' is not a column" in table.loc[0, "error"]
    assert table.loc[1, "n_rows"] == 200


@pytest.mark.parametrize("text, message", [
    ("[sweep]\nnmae = 'x'\n", "unknown keys \\['nmae'\\] in \\[sweep\\]"),
    ("[grid]\nmodel = ['mlp']\n", "unknown keys \\['model'\\] in \\[grid\\]"),
    ("[grid]\nmodels = ['nope']\n", "unknown model 'nope'"),
    ("[grid]\nstreams = ['nope']\n", "unknown stream 'nope'"),
    ("[run]\nbatch_sise = 3\n", "unknown key 'batch_sise' in \\[run\\]"),
    ("[run]\nworkers = 2\n", "a sweep runs each run in one process"),
    ("[run]\ndevice = 'cuda'\n", "no CUDA device"),
    ("[sweep]\nexecutor = 'slurm'\n", "executor"),
    ("[grid]\nseeds = []\n", "non-empty list"),
    ("[other]\n", "unknown sections"),
])
def test_bad_configs_fail_before_any_run(tmp_path, text, message):
    import torch

    if "cuda" in text and torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    out = tmp_path / "never"
    path = write(tmp_path, text + f"\n[sweep]\nout = '{out}'\n" if "[sweep]" not in text
                 else text.replace("[sweep]\n", f"[sweep]\nout = '{out}'\n"))
    with pytest.raises(SystemExit, match=message):
        main(["sweep", str(path)])
    assert not out.exists()


def test_the_same_grid_on_a_local_ray(tmp_path):
    pytest.importorskip("ray")
    local = run_sweep(load_sweep(write(tmp_path, GRID.format(workers=1, out=tmp_path / "a"))),
                      echo=lambda s: None)
    config = load_sweep(write(tmp_path, GRID.format(workers=2, out=tmp_path / "b")))
    on_ray = run_sweep(config, executor="ray", echo=lambda s: None)
    assert (on_ray["status"] == "ok").all()
    cols = ["run_id", "n_rows", "accuracy", "log_loss", "ipfi/salary"]
    assert on_ray[cols].equals(local[cols])  # the same seeded runs, wherever they ran


def test_ray_address_that_does_not_answer_fails_before_any_run(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "never"
    path = write(tmp_path, f"""
[sweep]
executor = "ray"
ray_address = "127.0.0.1:1"
out = "{out}"
[run]
n_samples = 100
""")
    with pytest.raises(SystemExit, match="does not answer"):
        main(["sweep", str(path)])
    assert not out.exists()
