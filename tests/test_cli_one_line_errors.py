"""Errors of the command line that are one line naming the file, field or option: a cut-short
``result.json`` of a sweep run, a grid too large to build, a bad field in ``report.json``, an
empty ``--explain``, a FIFO or a device given to ``--resume``."""

from __future__ import annotations

import json
import os
import time

import pytest

from torchstream.cli import main
from torchstream.cli.names import EXPLAINERS
from torchstream.cli.sweep import MAX_RUNS, load_sweep


def _fails(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize("content, why", [
    ('{"n_rows": 40, "n_steps": 1', "not valid JSON"), ("", "empty"),
    ('{"n_rows": 40}', "no n_steps, seconds, metrics, explanations, logdir"),
])
def test_a_cut_short_result_of_a_sweep_run_is_named_before_any_run(tmp_path, capsys, content,
                                                                    why):
    out = tmp_path / "out"
    config = tmp_path / "s.toml"
    config.write_text(f'[sweep]\nout = "{out}"\n[grid]\nseeds = [0, 1]\n'
                      '[run]\nn_samples = 40\nexplain = "none"\n')
    first, second = (spec.run_id for spec in load_sweep(config).runs())
    result = out / second / "result.json"
    result.parent.mkdir(parents=True)
    result.write_text(content)
    err = _fails(["sweep", str(config)], capsys)
    assert err.startswith(f"error: {result} is not a complete run result: {why}")
    assert err.endswith(f"remove it to run {second} again")
    assert not (out / first).exists()  # refused before any run
    result.unlink()
    assert main(["sweep", str(config)]) == 0
    assert json.loads(result.read_text())["n_rows"] == 40


def test_a_grid_too_large_is_counted_not_built(tmp_path, capsys):
    seeds = list(range(3700))
    lrs = [0.001 * (i + 1) for i in range(3600)]
    config = tmp_path / "s.toml"
    config.write_text(f'[sweep]\nout = "{tmp_path / "out"}"\n[grid]\nseeds = {seeds}\n'
                      f'lrs = {lrs}\n')
    t0 = time.perf_counter()
    err = _fails(["sweep", str(config)], capsys)
    assert err == ("error: the grid makes 13,320,000 runs (seeds 3,700 x lrs 3,600 x streams 1); "
                   f"a sweep runs at most {MAX_RUNS:,}")
    assert time.perf_counter() - t0 < 10  # counted, never built


def test_report_names_the_file_and_the_bad_field(tmp_path, capsys):
    logdir = tmp_path / "run"
    assert main(["run", "--n-samples", "600", "--explain", "ipfi", "--report", "--logdir",
                 str(logdir)]) == 0
    path = logdir / "report.json"
    data = json.loads(path.read_text())
    data["alarms"][0]["row"] = "5000"
    path.write_text(json.dumps(data))
    capsys.readouterr()
    err = _fails(["report", str(logdir)], capsys)
    assert err == (f"error: {path}: alarm 0 field row is '5000' (a string), expected an integer")
    data["alarms"][0]["row"] = 300
    data["alarms"][0]["changes"][0]["importance_after"] = [1.0]
    path.write_text(json.dumps(data))
    err = _fails(["report", str(logdir)], capsys)
    assert err == (f"error: {path}: alarm 0 field changes[0].importance_after is [1.0] (a list), "
                   "expected a number")


@pytest.mark.parametrize("value", ["", " , "])
def test_an_empty_explain_is_refused(tmp_path, capsys, value):
    err = _fails(["run", "--n-samples", "40", "--explain", value, "--logdir",
                  str(tmp_path / "l")], capsys)
    assert err == (f"error: --explain {value!r} names no explainer; choose from "
                   f"{', '.join(EXPLAINERS)}, or 'none' to run without explainers")
    assert list(EXPLAINERS)[:3] == ["ipfi", "isage", "ipdp"]
    assert not (tmp_path / "l").exists()


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "missing", "directory"])
def test_resume_says_what_the_path_is(tmp_path, capsys, kind):
    if kind == "fifo":
        path, words = tmp_path / "c.pt", "is a FIFO (named pipe), not a checkpoint file"
        os.mkfifo(path)
    elif kind == "dev_zero":
        path, words = "/dev/zero", "is a character device, not a checkpoint file"
    elif kind == "missing":
        path, words = tmp_path / "none.pt", "does not exist"
    else:
        path, words = tmp_path, "is a directory, not a checkpoint file"
    err = _fails(["run", "--n-samples", "40", "--resume", str(path), "--logdir",
                  str(tmp_path / "l")], capsys)
    assert err == f"error: --resume {path} {words}"
