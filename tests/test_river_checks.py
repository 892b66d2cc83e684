"""OnlineClassifier / OnlineRegressor against river's estimator checks, plus copy, pickle and
clone semantics."""

from __future__ import annotations

import copy
import inspect
import itertools
import math
import pickle

import pandas as pd
import pytest
import torch
from river import base, checks, datasets
from river.checks import common

from torchstream import OnlineClassifier, OnlineLearner, OnlineRegressor, Schema
from torchstream.learners.online import RIVER_CHECK_SKIPS
from torchstream.models import MLP


def small_mlp(n_features: int, n_outputs: int) -> MLP:
    """A picklable module factory (a module-level function, not a lambda)."""
    return MLP(n_features, n_outputs, hidden=(8,))


def phishing(n: int) -> list[tuple[dict, bool]]:
    return list(datasets.Phishing().take(n))


def trump(n: int) -> list[tuple[dict, float]]:
    return list(datasets.TrumpApproval().take(n))


def trained_classifier() -> OnlineClassifier:
    model = OnlineClassifier(small_mlp, lr=0.05, seed=3)
    for x, y in phishing(60):
        model.predict_proba_one(x)
        model.learn_one(x, y)
    return model


def trained_regressor() -> OnlineRegressor:
    model = OnlineRegressor(small_mlp, lr=0.05, scale_inputs=True, seed=3)
    for x, y in trump(60):
        model.predict_one(x)
        model.learn_one(x, y)
    return model


@pytest.mark.parametrize("cls", [OnlineClassifier, OnlineRegressor])
def test_check_estimator(cls):
    torch.set_num_threads(1)
    # TrumpApproval's ordinal_date (~7e5) would make float32 batch and single-row forward
    # passes round apart (rel. ~1e-5 > river's 1e-6): regression inputs are standardised
    model = cls(small_mlp, lr=0.01, seed=1, scale_inputs=cls is OnlineRegressor)
    kind = base.MiniBatchClassifier if cls is OnlineClassifier else base.MiniBatchRegressor
    assert isinstance(model, kind)
    checks.check_estimator(model)
    # every skipped check is one river would run here, and it has a stated reason
    names = {c.__name__ for c in checks.yield_checks(model)}
    assert model._unit_test_skips() == set(RIVER_CHECK_SKIPS) <= names
    assert all(len(reason) > 20 for reason in RIVER_CHECK_SKIPS.values())


def test_skipped_checks_do_fail():
    """The skip list is not stale: each skipped check fails on this learner."""
    model = OnlineRegressor(small_mlp, seed=1)
    failed = set()
    for check in checks.yield_checks(model):
        if check.__name__ in RIVER_CHECK_SKIPS:
            try:
                check(model.clone())
            except (AssertionError, ValueError):
                failed.add(check.__name__)
    assert failed == set(RIVER_CHECK_SKIPS)


def test_declared_schema_makes_feature_order_irrelevant():
    names = list(phishing(1)[0][0])
    model = OnlineClassifier(small_mlp, schema=Schema(names), seed=1)
    common.check_shuffle_features_no_impact(model.clone(), dataset=phishing(50))


def test_signature_is_the_constructor():
    for cls in (OnlineLearner, OnlineClassifier, OnlineRegressor):
        params = inspect.signature(cls).parameters
        assert list(params)[:3] == ["module", "task", "loss"]
        assert "lr" in params and "divergence_factor" in params


def test_params_are_stored_as_given_and_clone_is_untrained():
    model = OnlineRegressor(
        small_mlp, lr=0.02, optimizer="sgd", optimizer_kwargs={"momentum": 0.5},
        scale_inputs=True, scale_targets=None, device="cpu", seed=7,
    )  # fmt: skip
    for x, y in trump(30):
        model.learn_one(x, y)
    params = model._get_params()
    assert params["module"] is small_mlp
    assert params["optimizer"] == "sgd" and params["lr"] == 0.02 and params["seed"] == 7
    assert params["optimizer_kwargs"] == {"momentum": 0.5}
    assert params["scale_targets"] is None and params["dtype"] is None and params["schema"] is None
    assert params["device"] == "cpu" and params["n_features"] is None

    clone = model.clone()
    assert type(clone) is OnlineRegressor
    assert clone._get_params() == params
    assert clone.n_samples_seen == 0 and clone.module is None and clone.schema is None
    # the clone learns exactly as a fresh learner with the same arguments
    fresh = OnlineRegressor(**params)
    for x, y in trump(20):
        clone.learn_one(x, y)
        fresh.learn_one(x, y)
    x = trump(21)[-1][0]
    assert clone.predict_one(x) == fresh.predict_one(x)
    assert model.clone({"lr": 0.5}).lr == 0.5


def test_clone_of_a_module_instance_starts_from_its_untrained_weights():
    module = small_mlp(9, 2)  # Phishing: 9 features
    untrained = copy.deepcopy(module.state_dict())
    model = OnlineClassifier(module, lr=0.1)
    for x, y in phishing(40):
        model.learn_one(x, y)
    trained = model.module.state_dict()["output_layer.weight"]
    assert not torch.equal(trained, untrained["output_layer.weight"])
    clone = model.clone()
    for k, v in clone.module.state_dict().items():
        assert torch.equal(v, untrained[k]), k
    assert clone.n_samples_seen == 0


@pytest.mark.parametrize("make", [trained_classifier, trained_regressor])
@pytest.mark.parametrize("roundtrip", ["pickle", "deepcopy"])
def test_trained_learner_roundtrips(make, roundtrip):
    model = make()
    copied = pickle.loads(pickle.dumps(model)) if roundtrip == "pickle" else copy.deepcopy(model)
    assert type(copied) is type(model)
    rows = phishing(90)[60:] if isinstance(model, OnlineClassifier) else trump(90)[60:]
    for x, y in rows:  # predictions equal, and learning continues identically
        if isinstance(model, OnlineClassifier):
            assert copied.predict_proba_one(x) == model.predict_proba_one(x)
        assert copied.predict_one(x) == model.predict_one(x)
        model.learn_one(x, y)
        copied.learn_one(x, y)
    assert copied.n_samples_seen == model.n_samples_seen == 90
    for k, v in model.state_dict()["module"].items():
        assert torch.equal(copied.state_dict()["module"][k], v), k
    # the copy owns its parameters: the optimiser steps the copy's module, not the original's
    assert all(p is q for p, q in zip(copied.module.parameters(), copied._params))
    assert not any(p is q for p, q in zip(copied.module.parameters(), model.module.parameters()))


def test_probabilities_sum_to_one_within_river_tolerance():
    model = OnlineClassifier(small_mlp, lr=0.05, seed=2)
    worst = 0.0
    for x, y in itertools.islice(datasets.ImageSegments(), 150):
        model.learn_one(x, y)
        p = model.predict_proba_one(x)
        total = sum(p.values())
        assert math.isclose(total, 1.0)  # river's check: rel_tol 1e-9
        assert all(0.0 <= v <= 1.0 for v in p.values())
        worst = max(worst, abs(total - 1.0))
    assert len(p) == 7 and worst < 1e-12
    rows = [x for x, _ in itertools.islice(datasets.ImageSegments(), 20)]
    frame = model.predict_proba_many(pd.DataFrame(rows))
    assert (frame.sum(axis=1) - 1.0).abs().max() < 1e-12


def test_a_learner_from_a_spec_pickles():
    model = OnlineLearner.from_spec("probit", task="classification", lr=0.05)
    for x, y in phishing(30):
        model.learn_one(x, y)
    copied = pickle.loads(pickle.dumps(model))
    assert copied.module.output_layer.out_features == 1  # the probit's one binary unit
    for x, _ in phishing(40)[30:]:
        assert copied.predict_proba_one(x) == model.predict_proba_one(x)
