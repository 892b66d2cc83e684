"""``torchstream run --compile``: the explainers' and the torch learner's compiled steps from the
command line (the compiled paths themselves are tested in ``tests/test_*_compiled.py``)."""

from __future__ import annotations

import pytest

from torchstream.cli import main
from torchstream.cli.run import compile_lines, learner_options, make_explainers
from torchstream.cli.run_args import run_parser
from torchstream.learners.registry import make_learner
from torchstream.streams import make_synthetic


def test_compile_reaches_every_explainer_and_the_torch_learner():
    args = run_parser().parse_args(["run", "--compile", "--explain", "ipfi,isage,ipdp"])
    stream = make_synthetic("agrawal-drift", n_samples=100, seed=0)
    assert all(p.compile for p in make_explainers(args, stream))
    assert make_learner("mlp", stream, learner_options(args)).learner.compile
    args = run_parser().parse_args(["run", "--explain", "ipfi,isage,ipdp"])
    assert not any(p.compile for p in make_explainers(args, stream))
    assert not make_learner("mlp", stream, learner_options(args)).learner.compile


def test_compile_lines_say_what_ran_compiled():
    args = run_parser().parse_args(["run", "--compile", "--explain", "ipfi"])
    stream = make_synthetic("agrawal-drift", n_samples=100, seed=0)
    ipfi = make_explainers(args, stream)[0]
    river = make_learner("hoeffding_tree", stream, learner_options(args)).learner
    ipfi.compile_seconds = 1.25
    assert compile_lines(river, [ipfi]) == [
        f"learner: eager, a {type(river).__name__} has no torch module to compile",
        "ipfi: compiled (1.2 s compiling)",
    ]
    ipfi.compile_off_reason = "chunk_size is set"
    assert compile_lines(river, [ipfi])[1] == "ipfi: eager, chunk_size is set"


def test_compile_on_a_river_model_runs_eagerly_and_says_why(tmp_path, capsys):
    with pytest.warns(RuntimeWarning, match="not a torch module"):
        assert main(["run", "--compile", "--explain", "ipfi", "--model", "hoeffding_tree",
                     "--n-samples", "200", "--no-progress",
                     "--logdir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "ipfi: eager, the model (" in out and "is not a torch module" in out
    assert "learner: eager, a RiverLearner has no torch module to compile" in out


def test_compiled_run_prints_its_compiled_parts_and_matches_eager(tmp_path, capsys,
                                                                  compiler_works):
    """The MLP learner, iPFI and iSAGE compiled: the run says so and its importances are the
    eager run's (1e-3 relative: the float rounding of fused kernels over 600 training rows)."""
    common = ["--explain", "ipfi,isage", "--n-samples", "600", "--batch-size", "50",
              "--no-progress", "--explain-alpha", "0.01"]
    assert main(["run", *common, "--logdir", str(tmp_path / "eager")]) == 0
    eager = capsys.readouterr().out
    assert main(["run", "--compile", *common, "--logdir", str(tmp_path / "compiled")]) == 0
    compiled = capsys.readouterr().out
    for part in ("learner", "ipfi", "isage"):
        assert f"{part}: compiled (" in compiled
    assert _importances(compiled) == pytest.approx(_importances(eager), rel=1e-3, abs=1e-4)


def _importances(out: str) -> dict[str, float]:
    """``{"ipfi/elevel": 2.4277, ...}`` from the printed ``ipfi: elevel=2.4277, ...`` lines."""
    values = {}
    for line in out.splitlines():
        name, _, rest = line.partition(": ")
        if name in ("ipfi", "isage") and "=" in rest:
            for item in rest.split(", "):
                feature, _, value = item.partition("=")
                values[f"{name}/{feature}"] = float(value)
    assert values, out
    return values
