"""An output never replaces an input of the command, nor a file that is not a torchstream output
of its kind unless ``--overwrite`` says so (torchstream.cli.outputs)."""

from __future__ import annotations

import json
import os

import pytest

from torchstream.checkpoint import MAGIC, load_checkpoint
from torchstream.cli import main

CSV = "a,b,y\n" + "".join(f"{i % 7},{(i * 3) % 5},{i % 2}\n" for i in range(60))


def _run_fails(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    return err


@pytest.mark.parametrize("flag", ["--checkpoint", "--result-json"])
def test_an_output_that_names_the_stream_leaves_its_bytes_unchanged(tmp_path, capsys, flag):
    data = tmp_path / "data.csv"
    data.write_text(CSV)
    before = data.read_bytes()
    err = _run_fails(["run", "--stream", str(data), "--target", "y", flag, str(data),
                      "--logdir", str(tmp_path / "logs"), "--explain", "none"], capsys)
    assert f"{flag} {data} is the --stream input" in err
    assert data.read_bytes() == before
    assert not (tmp_path / "logs").exists()  # refused before the first row


def test_an_output_that_names_the_model_spec_or_another_output(tmp_path, capsys):
    spec = tmp_path / "m.toml"
    spec.write_text('[model]\nkind = "mlp"\n')
    before = spec.read_bytes()
    err = _run_fails(["run", "--n-samples", "50", "--model", str(spec), "--result-json",
                      str(spec), "--logdir", str(tmp_path / "l")], capsys)
    assert "--result-json" in err and "--model input" in err and spec.read_bytes() == before
    same = tmp_path / "out.bin"
    err = _run_fails(["run", "--n-samples", "50", "--checkpoint", str(same), "--result-json",
                      str(same), "--logdir", str(tmp_path / "l")], capsys)
    assert f"--result-json {same} and --checkpoint {same} are the same file" in err


def test_the_stream_inside_the_run_directory_as_its_steps_csv(tmp_path, capsys):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    data = logdir / "steps.csv"
    data.write_text(CSV)
    before = data.read_bytes()
    err = _run_fails(["run", "--stream", str(data), "--target", "y", "--logdir", str(logdir),
                      "--explain", "none"], capsys)
    assert f"--logdir {logdir} (its steps.csv) is the --stream input" in err
    assert data.read_bytes() == before


@pytest.mark.parametrize("flag, kind", [("--checkpoint", "checkpoint"),
                                        ("--result-json", "run result")])
def test_a_file_of_another_kind_is_replaced_only_with_overwrite(tmp_path, capsys, flag, kind):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    argv = ["run", "--n-samples", "40", "--explain", "none", "--logdir", str(tmp_path / "l"),
            flag, str(notes)]
    err = _run_fails(argv, capsys)
    assert f"{flag} {notes} exists and is not a torchstream {kind}" in err
    assert "--overwrite" in err and notes.read_text() == "my notes\n"
    assert main(argv + ["--overwrite"]) == 0
    if kind == "checkpoint":
        assert notes.read_bytes().startswith(MAGIC) and load_checkpoint(notes)["state"]
    else:
        assert json.loads(notes.read_text())["n_rows"] == 40
    capsys.readouterr()
    assert main(argv) == 0  # now a torchstream output of that kind: a rerun replaces it


def test_a_fifo_is_never_an_output(tmp_path, capsys):
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    err = _run_fails(["run", "--n-samples", "40", "--result-json", str(fifo), "--overwrite",
                      "--logdir", str(tmp_path / "l")], capsys)
    assert "is a FIFO (named pipe)" in err and fifo.is_fifo()


def test_a_sweep_never_writes_its_table_over_its_config_or_a_foreign_file(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    config = out / "results.csv"  # the config where the table would go
    config.write_text(f'[sweep]\nout = "{out}"\n[run]\nn_samples = 40\nexplain = "none"\n')
    before = config.read_bytes()
    err = _run_fails(["sweep", str(config)], capsys)
    assert "(its results.csv) is the sweep config input" in err and config.read_bytes() == before
    config = tmp_path / "s.toml"
    config.write_text(f'[sweep]\nout = "{out}"\n[run]\nn_samples = 40\nexplain = "none"\n')
    (out / "results.csv").write_text("not,a,sweep\n")
    err = _run_fails(["sweep", str(config)], capsys)
    assert "exists and is not a torchstream sweep results table" in err
    assert (out / "results.csv").read_text() == "not,a,sweep\n"
    assert main(["sweep", str(config), "--overwrite"]) == 0
    assert (out / "results.csv").read_text().startswith("run_id,")
