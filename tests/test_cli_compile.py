"""``torchstream run --compile``: iPFI's compiled step from the command line (the compiled path
itself is tested in ``tests/test_ipfi_compiled.py``)."""

from __future__ import annotations

import pytest

from torchstream.cli import main
from torchstream.cli.run import make_explainers, run_parser
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.streams import make_synthetic


def test_compile_reaches_ipfi_only():
    args = run_parser().parse_args(["run", "--compile", "--explain", "ipfi,isage"])
    stream = make_synthetic("agrawal-drift", n_samples=100, seed=0)
    ipfi, isage = make_explainers(args, stream)
    assert isinstance(ipfi, IncrementalPFI) and ipfi.compile
    assert not getattr(isage, "compile", False)
    args = run_parser().parse_args(["run", "--explain", "ipfi"])
    assert not make_explainers(args, stream)[0].compile


def test_compile_needs_ipfi(tmp_path):
    with pytest.raises(SystemExit, match="--compile compiles iPFI's step"):
        main(["run", "--compile", "--explain", "isage", "--logdir", str(tmp_path / "x")])


def test_compile_on_a_river_model_runs_eagerly_and_says_why(tmp_path, capsys):
    with pytest.warns(RuntimeWarning, match="not a torch module"):
        assert main(["run", "--compile", "--explain", "ipfi", "--model", "hoeffding_tree",
                     "--n-samples", "200", "--no-progress",
                     "--logdir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "ipfi: eager, the model (" in out and "is not a torch module" in out
