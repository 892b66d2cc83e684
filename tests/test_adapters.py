"""ModelFn adapters: river and scikit-learn models answer tensors like torch models do."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from river import linear_model, tree

from torchstream import OnlineClassifier
from torchstream.learners import RiverModelFn, SklearnModelFn, as_model_fn
from torchstream.models import MLP
from torchstream.streams import STAGGER, Friedman


def test_river_classifier_on_categorical_stream():
    stream = STAGGER(n_samples=300, seed=0)
    model = tree.HoeffdingTreeClassifier(grace_period=50)
    rows = list(stream)
    for x, y in rows:
        model.learn_one(x, y)
    fn = as_model_fn(model, schema=stream.schema, classes=stream.classes)
    X, _ = next(stream.batches(40))
    out = fn(X.double())
    assert out.shape == (40, 2) and out.dtype == torch.float64
    for i, (x, _) in enumerate(rows[:40]):  # decoding the one-hot columns gives the same rows
        p = model.predict_proba_one(x)
        assert out[i].tolist() == pytest.approx([p.get(c, 0.0) for c in stream.classes])


def test_river_regressor_values():
    stream = Friedman(n_samples=200, seed=0)
    model = linear_model.LinearRegression()
    rows = list(stream)
    for x, y in rows:
        model.learn_one(x, y)
    fn = as_model_fn(model, schema=stream.schema)
    assert isinstance(fn, RiverModelFn) and fn.output == "value"
    X, _ = next(stream.batches(10))
    out = fn(X)
    assert out.shape == (10,)
    expected = [model.predict_one(x) for x, _ in rows[:10]]
    assert out.tolist() == pytest.approx(expected, rel=1e-5)


def test_sklearn_estimator():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    Xn = rng.normal(size=(100, 3))
    yn = (Xn[:, 0] > 0).astype(int)
    est = LogisticRegression().fit(Xn, yn)
    fn = as_model_fn(est)
    assert isinstance(fn, SklearnModelFn)
    X = torch.tensor(Xn[:7], dtype=torch.float32)
    out = fn(X)
    assert out.dtype == torch.float32 and out.shape == (7, 2)
    assert np.allclose(out.numpy(), est.predict_proba(Xn[:7]), atol=1e-6)
    value = SklearnModelFn(est, output="value")(X)
    assert value.tolist() == est.predict(Xn[:7]).tolist()


def test_pass_through_and_errors():
    module = MLP(3, 2)
    assert as_model_fn(module) is module
    learner = OnlineClassifier(lambda d, k: MLP(d, k), n_features=3)
    assert as_model_fn(learner) is learner

    def fn(X):
        return X.sum(1)

    assert as_model_fn(fn) is fn
    with pytest.raises(ValueError, match="schema"):
        as_model_fn(linear_model.LinearRegression())
    with pytest.raises(TypeError, match="ModelFn"):
        as_model_fn(42)
    with pytest.raises(ValueError, match="output"):
        SklearnModelFn(object(), output="logits")
