"""The vectorised path of the river Hoeffding tree adapter gives river's own predictions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from river import tree

from torchstream import Schema
from torchstream.learners import RiverModelFn, as_model_fn
from torchstream.schema import Feature
from torchstream.streams import STAGGER, Agrawal


def _rows_and_tensor(stream, start: int, stop: int):
    pairs = list(stream)
    names = stream.schema.names
    X = torch.tensor([[x[k] for k in names] for x, _ in pairs[start:stop]], dtype=torch.float64)
    return pairs, X


def _reference(model, pairs, classes):
    return np.array([[model.predict_proba_one(x).get(c, 0.0) for c in classes] for x, _ in pairs])


@pytest.mark.parametrize("leaf_prediction", ["nba", "nb", "mc"])
@pytest.mark.parametrize("n_train", [0, 1, 40, 2500])
def test_vectorised_tree_equals_predict_proba_one(leaf_prediction, n_train):
    """Same probabilities as river's per-row ``predict_proba_one`` for every row: routing,
    majority-class leaves and naive Bayes leaves alike (the naive Bayes arithmetic repeats
    river's float64 operations in its order, with libm's pow / exp / log through numpy)."""
    stream = Agrawal(seed=3, n_samples=n_train + 300)
    pairs = list(stream)
    model = tree.HoeffdingTreeClassifier(leaf_prediction=leaf_prediction, grace_period=100)
    for x, y in pairs[:n_train]:
        model.learn_one(x, y)
    fn = as_model_fn(model, schema=stream.schema, classes=stream.classes)
    _, X = _rows_and_tensor(stream, n_train, n_train + 300)
    out = fn(X)
    assert fn._tree is not None  # the fast path was taken
    ref = _reference(model, pairs[n_train:], stream.classes)
    assert out.shape == (300, len(stream.classes)) and out.dtype == torch.float64
    # the leaf of every row and every majority-class row match bit for bit; naive Bayes rows
    # may differ in the last bits only where numpy's SIMD exp / log / pow differ from libm
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-13, atol=1e-300)
    if n_train >= 2500:
        assert model.n_nodes > 1  # the routing is exercised


def test_tree_is_recompiled_after_learning_and_matches_generic_path():
    stream = Agrawal(seed=5, n_samples=3000)
    pairs = list(stream)
    model = tree.HoeffdingTreeClassifier(grace_period=100)
    fn = as_model_fn(model, schema=stream.schema, classes=stream.classes)
    generic = RiverModelFn(model, stream.schema, classes=stream.classes)
    generic._compiled_tree = lambda: None  # force the per-row dict path
    _, X = _rows_and_tensor(stream, 2500, 2600)
    X32 = X.float()
    for x, y in pairs[:2500]:
        model.learn_one(x, y)
        if model._train_weight_seen_by_model in (1, 500, 2500):
            out = fn(X32)
            assert out.dtype == torch.float32  # input's dtype and device
            torch.testing.assert_close(out, generic(X32), rtol=1e-6, atol=0)
            np.testing.assert_allclose(
                fn(X).numpy(), _reference(model, pairs[2500:2600], stream.classes), rtol=1e-13
            )


def test_unknown_trees_and_features_use_the_generic_path():
    stagger = STAGGER(n_samples=300, seed=0)  # categorical features: generic path
    model = tree.HoeffdingTreeClassifier(grace_period=50)
    for x, y in stagger:
        model.learn_one(x, y)
    fn = as_model_fn(model, schema=stagger.schema, classes=stagger.classes)
    X, _ = next(stagger.batches(20))
    out = fn(X.double())
    assert fn._tree is None
    ref = _reference(model, list(stagger)[:20], stagger.classes)
    np.testing.assert_allclose(out.numpy(), ref)

    adaptive = tree.HoeffdingAdaptiveTreeClassifier(seed=0)  # another predict_proba_one
    schema = Schema([Feature("a"), Feature("b")])
    for i in range(200):
        adaptive.learn_one({"a": float(i % 7), "b": float(i % 3)}, i % 7 > 3)
    afn = as_model_fn(adaptive, schema=schema, classes=[False, True])
    X = torch.tensor([[1.0, 2.0], [6.0, 0.0]], dtype=torch.float64)
    assert afn(X).shape == (2, 2) and afn._tree is None


def test_wrong_width_raises_naming_x():
    stream = Agrawal(seed=0, n_samples=10)
    model = tree.HoeffdingTreeClassifier()
    for x, y in stream:
        model.learn_one(x, y)
    fn = as_model_fn(model, schema=stream.schema, classes=stream.classes)
    with pytest.raises(ValueError, match=r"X must have shape \[n, 9\]"):
        fn(torch.zeros(2, 3))


@pytest.mark.filterwarnings("ignore:(overflow|invalid value) encountered:RuntimeWarning")
@pytest.mark.parametrize("one_class", [False, True])
def test_naive_bayes_leaf_matches_river_on_extreme_rows(one_class):
    """Rows whose log-densities are ``-inf`` or NaN (skipped by river), or finite but summing
    past the float range (river's vote turns ``-inf``, its probabilities NaN) give river's
    numbers, for a leaf with two classes and for a leaf that has seen one class only (whose
    probability is 1 exactly while its vote is finite)."""
    names = ["a", "b", "c"]
    schema = Schema([Feature(k) for k in names])
    model = tree.HoeffdingTreeClassifier(leaf_prediction="nb", grace_period=1000)
    for i in range(60):  # small variances (~0.0025): huge finite terms are easy to reach
        x = {"a": (i % 2) * 0.1, "b": (i % 3) * 0.05, "c": 1.0 + (i % 5) * 0.02}
        model.learn_one(x, True if one_class else i % 4 == 0)
    assert model.n_nodes == 1 and (len(model._root.stats) == 1) == one_class
    fn = as_model_fn(model, schema=schema, classes=[False, True])
    base = [0.05, 0.05, 1.04]
    rows = [base]
    for value in (5e152, -5e152, 2e152, 7e152, float("nan"), 3.0):
        for cols in ([0], [1, 2], [0, 1, 2]):
            rows.append([value if j in cols else v for j, v in enumerate(base)])
    out = fn(torch.tensor(rows, dtype=torch.float64))
    assert fn._tree is not None and bool(fn._tree.nb_one_class) == one_class
    ref = np.array(
        [[model.predict_proba_one(dict(zip(names, r))).get(c, 0.0) for c in (False, True)]
         for r in rows]
    )
    assert np.isnan(ref).any()  # the overflowing votes are exercised
    if one_class:  # 1 for the class seen wherever the vote stays finite
        finite = ~np.isnan(ref).any(1)
        assert finite.sum() > 10 and (ref[finite] == [0.0, 1.0]).all()
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-13, atol=1e-300)
