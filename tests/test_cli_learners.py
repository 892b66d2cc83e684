"""One learner factory for `torchstream run`, `evaluate` and `sweep`: river models and the
Dynamic Model Tree run end to end with explainers, checkpoints and resumes; unknown names and
options a learner would ignore are one-line errors."""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import pytest
import torch
from river import naive_bayes, tree

import torchstream.learners.registry as registry
from torchstream.base import Learner
from torchstream.checkpoint import load_checkpoint
from torchstream.cli import main
from torchstream.evaluate.identity import plain_config
from torchstream.learners import OnlineLearner, RiverLearner
from torchstream.learners.registry import (
    LearnerOptions,
    available_learners,
    make_learner,
    register_learner,
)
from torchstream.models import load_spec
from torchstream.streams import SEA, Friedman
from torchstream.cli.sweep import load_sweep, run_sweep
from torchstream.trees import DynamicModelTree

#: (model, rows, batch size): the tree learns per batch, so it gets larger batches
MODELS = [("hoeffding_tree", 400, 4), ("dmt", 400, 40)]


def _run(tmp_path: Path, model: str, rows: int, batch: int, *argv: str) -> int:
    return main(["run", "--model", model, "--stream", "agrawal-drift", "--n-samples", str(rows),
                 "--batch-size", str(batch), "--explain", "ipfi,ipdp", "--no-progress",
                 "--logdir", str(tmp_path / "logs"), *argv])


def _accuracy_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith("| accuracy ")]
    assert len(lines) == 1, out
    return lines[0]


@pytest.mark.parametrize("model, rows, batch", MODELS)
def test_run_explains_checkpoints_and_resumes(tmp_path, capsys, model, rows, batch):
    ck, result = tmp_path / "c.pt", tmp_path / "r.json"
    half = rows // batch // 2
    assert _run(tmp_path, model, rows, batch, "--steps", str(half), "--checkpoint", str(ck),
                "--result-json", str(result)) == 0
    out = capsys.readouterr().out
    assert re.search(rf"\| rows +\| +{half * batch} \|", out)
    explained = json.loads(result.read_text())["explanations"]
    ipfi = explained["ipfi"]
    columns = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears",
               "loan"]
    assert list(ipfi) == columns
    assert all(math.isfinite(v) for v in ipfi.values())
    assert any(v != 0.0 for v in ipfi.values())  # the model has learnt something to explain
    assert math.isfinite(explained["ipdp/salary"]["importance"])

    config = load_checkpoint(ck)["identity"]["config"]
    assert config["scale_inputs"] is None  # these learners never standardise their inputs
    identity = config["model_spec"]
    kind, cls = (("river model", "river.tree.hoeffding_tree_classifier.HoeffdingTreeClassifier")
                 if model == "hoeffding_tree" else
                 ("dynamic model tree", "torchstream.trees.dmt.DynamicModelTree"))
    assert identity == {"name": model, "kind": kind, "class": cls}

    assert _run(tmp_path, model, rows, batch, "--resume", str(ck)) == 0
    resumed = capsys.readouterr().out
    assert f"resumed from {ck} at row {half * batch}" in resumed
    assert re.search(rf"\| rows +\| +{rows} \|", resumed)
    (tmp_path / "full").mkdir()
    assert _run(tmp_path / "full", model, rows, batch) == 0
    full = capsys.readouterr().out
    assert _accuracy_line(resumed) == _accuracy_line(full)  # the resume ends where a full run does


def test_run_prints_the_learner_and_its_device_where_it_has_one(tmp_path, capsys):
    assert _run(tmp_path, "hoeffding_tree", 40, 4, "--explain", "none") == 0
    river_out = capsys.readouterr().out
    assert "learner RiverLearner(HoeffdingTreeClassifier" in river_out
    assert re.search(r"\) on (cpu|cuda)", river_out) is None  # river runs on the CPU, unsaid
    assert _run(tmp_path / "m", "mlp", 40, 4, "--explain", "none", "--device", "cpu") == 0
    assert re.search(r"\) on cpu\n", capsys.readouterr().out)


def test_resume_with_another_model_is_refused_naming_the_key(tmp_path, capsys):
    ck = tmp_path / "c.pt"
    assert _run(tmp_path, "hoeffding_tree", 80, 4, "--steps", "5", "--checkpoint", str(ck)) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        _run(tmp_path, "hoeffding_adaptive_tree", 80, 4, "--resume", str(ck))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "config.model_spec.name" in err and err.count("\n") == 1


def test_spec_identity_is_the_spec(tmp_path, capsys):
    ck = tmp_path / "c.pt"
    assert _run(tmp_path, "probit", 40, 4, "--explain", "none", "--checkpoint", str(ck)) == 0
    config = load_checkpoint(ck)["identity"]["config"]
    assert config["scale_inputs"] is True
    stored = config["model_spec"]
    spec = load_spec("probit")
    assert stored == plain_config({"name": "probit", "source": str(spec.source), **spec.model,
                                   "learner": dict(spec.learner)})


def test_unknown_model_is_one_line_listing_the_names(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        _run(tmp_path, "transformer", 40, 4)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: unknown learner 'transformer'; known: ")
    for name in ("mlp", "probit", "hoeffding_tree", "naive_bayes", "dmt"):
        assert name in err


@pytest.mark.parametrize("argv, option", [(["--lr", "0.1"], "lr"),
                                          (["--no-scale-inputs"], "scale_inputs"),
                                          (["--on-divergence", "warn"], "on_divergence")])
def test_an_option_a_river_model_ignores_is_refused(tmp_path, capsys, argv, option):
    with pytest.raises(SystemExit) as e:
        _run(tmp_path, "naive_bayes", 40, 4, *argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"'naive_bayes' (a river model) does not use the option {option}" in err
    assert not (tmp_path / "logs").exists()  # nothing written


def test_dmt_takes_the_learning_rate():
    stream = SEA(seed=0, n_samples=50)
    built = make_learner("dmt", stream, LearnerOptions(lr=0.5))
    assert isinstance(built.learner, DynamicModelTree)
    assert built.learner.learning_rate == 0.5
    assert make_learner("dmt", stream).learner.learning_rate == 0.05  # the paper's default


def test_factory_builds_each_kind():
    sea = SEA(seed=0, n_samples=50)
    built = make_learner("naive_bayes", sea)
    assert isinstance(built.learner, RiverLearner)
    assert isinstance(built.learner.model, naive_bayes.GaussianNB)
    assert isinstance(make_learner("hoeffding_tree", Friedman(seed=0, n_samples=50))
                      .learner.model, tree.HoeffdingTreeRegressor)
    spec = make_learner("mlp", sea, LearnerOptions(seed=3, lr=0.25, device="cpu"))
    assert isinstance(spec.learner, OnlineLearner) and spec.name == "mlp"
    assert (spec.learner.lr, spec.learner.seed) == (0.25, 3)
    assert spec.learner.scale_inputs is True  # specs standardise inputs by default
    unscaled = make_learner("mlp", sea, LearnerOptions(scale_inputs=False)).learner
    assert unscaled.scale_inputs is False


def test_classifier_only_models_refuse_a_regression_stream():
    with pytest.raises(ValueError, match="naive_bayes: this river model is a classifier only"):
        make_learner("naive_bayes", Friedman(seed=0, n_samples=50))
    with pytest.raises(ValueError, match="dmt: the Dynamic Model Tree is a classifier"):
        make_learner("dmt", Friedman(seed=0, n_samples=50))


def test_registration():
    assert "dmt" in available_learners()  # registered by the command line
    with pytest.raises(ValueError, match="unknown learner options"):
        register_learner("x", lambda stream, options: None, kind="test", uses=("momentum",))


def test_one_learner_protocol_every_built_learner_answers_it():
    """The registry speaks of torchstream.base.Learner (it has no protocol of its own); every
    built-in name, and a registered foreign learner (``__call__`` and ``learn`` only), comes
    back in that shape."""
    assert not hasattr(registry, "Learner") or registry.Learner is Learner
    stream = SEA(seed=0, n_samples=100)
    for name in ("naive_bayes", "hoeffding_tree", "dmt", "mlp"):
        assert isinstance(make_learner(name, stream).learner, Learner), name

    class Foreign:
        def __call__(self, X: torch.Tensor) -> torch.Tensor:
            return X.sum(1)

        def learn(self, X: torch.Tensor, y: torch.Tensor) -> float:
            return 0.25

    assert not isinstance(Foreign(), Learner)
    register_learner("foreign-test", lambda stream, options: Foreign(), kind="test")
    try:
        built = make_learner("foreign-test", stream)
    finally:
        registry._REGISTRY.pop("foreign-test")
    learner = built.learner
    assert isinstance(learner, Learner) and math.isnan(learner.last_loss)
    assert learner.learn(torch.ones(2, 3), torch.ones(2)) is None and learner.last_loss == 0.25
    assert learner(torch.ones(2, 3)).tolist() == [3.0, 3.0]
    assert built.identity["class"].endswith("Foreign")  # the learner's class, not the adapter's


def test_registry_imports_nothing_above_the_learners_layer():
    source = Path(registry.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
    ours = {m for m in imported if m.startswith("torchstream")}
    higher = ("torchstream.trees", "torchstream.explain", "torchstream.drift",
              "torchstream.select", "torchstream.evaluate", "torchstream.sinks",
              "torchstream.cli", "torchstream.reproductions")
    assert ours and not [m for m in ours if m.startswith(higher)], ours


def test_evaluate_and_sweep_use_the_same_factory(tmp_path, capsys):
    out = tmp_path / "ev"
    assert main(["evaluate", "--stream", "sea-drift", "--n-samples", "400", "--models",
                 "dmt,hoeffding_tree", "--batch-size", "20", "--out", str(out)]) == 0
    summary = (out / "summary.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in summary[1:]] == ["dmt", "hoeffding_tree"]
    config = tmp_path / "s.toml"
    config.write_text(f'[sweep]\nout = "{tmp_path / "sweep"}"\n[grid]\n'
                      'models = ["hoeffding_tree", "dmt"]\n'
                      '[run]\nn_samples = 200\nbatch_size = 20\nexplain = "ipfi"\n')
    table = run_sweep(load_sweep(config), echo=lambda s: None)
    assert list(table["status"]) == ["ok", "ok"], table["error"].tolist()
    ipfi = table[[c for c in table.columns if c.startswith("ipfi/")]].to_numpy()
    assert ipfi.shape == (2, 9) and all(math.isfinite(v) for v in ipfi.ravel())
