"""Sweep configs: every value is checked by type, no value becomes an option of `torchstream run`,
and the options that read or write a run's files (a checkpoint to resume from among them) are
refused wherever they are written."""

from __future__ import annotations

import importlib
import pickle
import sys
import types

import pytest
import torch

from torchstream.cli import sweep as sweep_module
from torchstream.cli import build_parser, main
from torchstream.cli.sweep import RunSpec, load_sweep


class _Hostile:
    """Unpickling this object creates the file ``marker`` (what a crafted checkpoint could do)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _evil_checkpoint(tmp_path):
    marker = tmp_path / "MARKER"
    evil = tmp_path / "evil.pt"
    torch.save(_Hostile(marker), evil)
    assert not marker.exists()
    return evil, marker


def _config(tmp_path, body, out):
    path = tmp_path / "sweep.toml"
    path.write_text(f'[sweep]\nout = "{out}"\n{body}')
    return path


def _injections(evil):
    return [
        (f'[run]\nn_samples = 100\ndrop = ["x", "--resume", "{evil}"]\n',
         r"\[run\] drop\[1\] must be a non-empty string that does not start with '-', "
         r"got '--resume'"),
        (f'[run]\ncategorical = ["--", "--resume", "{evil}"]\n', r"categorical\[0\]"),
        (f'[run]\nresume = "{evil}"\n', r"\[run\] resume: set by the sweep itself"),
        (f'[run]\nresume = "{evil}"\ntrust_checkpoint = true\n', "resume: set by the sweep"),
        ('[run]\ntrust-checkpoint = true\n', r"\[run\] trust-checkpoint: set by the sweep"),
        ('[run]\nresult-json = "x.json"\n', r"\[run\] result-json: set by the sweep"),
        ('[run]\ncheckpoint_every = 1\n', "checkpoint_every: set by the sweep"),
        (f'[run]\nres = "{evil}"\n', "unknown key 'res' in \\[run\\]"),  # no abbreviations
        ('[run]\nhelp = true\n', "help: set by the sweep"),
        (f'[run]\ntarget = "--resume={evil}"\n', r"\[run\] target must be a non-empty string"),
        (f'[grid]\nmodels = ["mlp", "--resume={evil}"]\n', r"\[grid\] models\[1\]"),
        (f'[grid]\nstreams = ["sea-drift"]\n[run]\ndrop = ["--resume", "{evil}"]\n',
         r"drop\[0\]"),
    ]


def test_injected_resume_is_refused_and_the_checkpoint_never_loaded(tmp_path):
    evil, marker = _evil_checkpoint(tmp_path)
    out = tmp_path / "never"
    for body, message in _injections(evil):
        path = _config(tmp_path, body, out)
        with pytest.raises(SystemExit, match=message) as err:
            main(["sweep", str(path)])
        assert str(err.value).startswith("error: ") and "\n" not in str(err.value)
        assert not marker.exists(), body
        assert not out.exists(), body
    # the crafted file is hostile indeed: it holds a Python object that a weights-only load
    # refuses (it is never unpickled here)
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL io.open"):  # the call it would make
        torch.load(evil, weights_only=True)
    assert not marker.exists()


@pytest.mark.parametrize("body, message", [
    ('[run]\nn_samples = "200"\n', r"\[run\] n_samples must be an integer, got '200'"),
    ("[run]\nn_samples = true\n", "n_samples must be an integer, got True"),
    ("[run]\nbatch_size = 3.0\n", "batch_size must be an integer, got 3.0"),
    ("[run]\nlr = nan\n", "lr must be a finite number, got nan"),
    ('[run]\nlr = "0.1"\n', "lr must be a finite number"),
    ("[run]\nno_scale_inputs = 1\n", "no_scale_inputs must be true or false, got 1"),
    ('[run]\ndrop = "x"\n', "drop must be a list, got 'x'"),
    ("[run]\ndrop = [1]\n", r"drop\[0\] must be a non-empty string"),
    ('[run]\ntask = "clustering"\n', "task must be one of \\['classification', 'regression'\\]"),
    ("[run]\ntarget = { a = 1 }\n", "target must be a non-empty string"),
    ('[run]\ntarget = ""\n', "target must be a non-empty string"),
    ("[grid]\nseeds = [0, 1.5]\n", r"\[grid\] seeds\[1\] must be an integer, got 1.5"),
    ("[grid]\nlrs = [0.1, true]\n", r"\[grid\] lrs\[1\] must be a finite number, got True"),
    ('[grid]\nmodels = ["mlp", 3]\n', r"\[grid\] models\[1\] must be a non-empty string"),
    ('[run]\nn_samples = 100\nn-samples = 200\n', "n-samples is given twice"),
    ("[sweep]\nworkers = true\n", "workers must be a positive integer, got True"),
    ("[sweep]\nname = 3\n", r"\[sweep\] name must be a non-empty string, got 3"),
    ("run = 3\n", r"\[run\] must be a table"),
])
def test_values_are_checked_by_type(tmp_path, body, message):
    out = tmp_path / "never"
    path = tmp_path / "sweep.toml"
    path.write_text(body + f'\n[sweep]\nout = "{out}"\n' if "[sweep]" not in body
                    else body.replace("[sweep]\n", f'[sweep]\nout = "{out}"\n'))
    with pytest.raises(ValueError, match=message):
        load_sweep(path)
    assert not out.exists()


def test_values_are_passed_so_that_none_can_become_an_option(tmp_path):
    path = _config(tmp_path, '[grid]\nlrs = [-0.5, 0.01]\n[run]\ntarget = "a=b"\n'
                             'drop = ["c", "d"]\nno_scale_inputs = true\nn_samples = 50\n',
                   tmp_path / "out")
    config = load_sweep(path)
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    runs = config.runs()
    assert [spec.options["lr"] for spec in runs] == [-0.5, 0.01]
    argv = runs[0].argv(config.out)
    assert "--lr=-0.5" in argv and "--target=a=b" in argv and "--n-samples=50" in argv
    args = run.parse_args(argv[1:])
    assert (args.lr, args.target, args.drop, args.no_scale_inputs) == (-0.5, "a=b", ["c", "d"],
                                                                       True)
    assert args.resume is None and args.n_samples == 50
    assert args.result_json == str(config.out / runs[0].run_id / "result.json")
    # a string that looks like an option stays the value of its own option
    parsed = run.parse_args(RunSpec("r", {"target": "--resume"}).argv(tmp_path)[1:])
    assert parsed.target == "--resume" and parsed.resume is None
    # a hand-made RunSpec cannot smuggle an option either
    with pytest.raises(ValueError, match="drop item '--resume' starts with '-'"):
        RunSpec("r", {"drop": ["x", "--resume", "evil.pt"]}).argv(tmp_path)
    for key in ("resume", "result_json", "Resume", "resume --x"):
        with pytest.raises(ValueError, match="cannot be set by a sweep"):
            RunSpec("r", {key: "evil.pt"}).argv(tmp_path)


def test_tomli_on_python_3_10(monkeypatch):
    """Before Python 3.11 the config is read with ``tomli`` (a dependency there)."""
    import tomllib

    fake = types.ModuleType("tomli")
    fake.loads = tomllib.loads
    fake.TOMLDecodeError = tomllib.TOMLDecodeError
    monkeypatch.setitem(sys.modules, "tomli", fake)
    monkeypatch.setattr(sys, "version_info", (3, 10, 14, "final", 0))
    try:
        assert importlib.reload(sweep_module).tomllib is fake
    finally:
        monkeypatch.undo()
        importlib.reload(sweep_module)
    assert sweep_module.tomllib is tomllib
