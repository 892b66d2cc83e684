"""Dynamic Model Tree APIs: river's estimator checks, dict rows, the evaluation loop with the
monitor plug-in, and the interpretability outputs (text, dict, weights, complexity, drawing)."""

from __future__ import annotations

import functools
import itertools

import pandas as pd
import pytest
import torch
from river import checks, datasets

from torchstream.evaluate import Evaluator
from torchstream.evaluate.measures import tree_complexity
from torchstream.sinks import History
from torchstream.streams import SEA
from torchstream.trees import DynamicModelTree
from torchstream.viz import plot_tree


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def split_tree(m: int = 3, seed: int = 0) -> DynamicModelTree:
    """A tree with one split (x0 <= 0.5): the label flips its dependence on x1."""
    g = torch.Generator().manual_seed(seed)
    tree = DynamicModelTree(n_classes=2, learning_rate=0.5)
    after = 0
    while after < 10:  # ten batches after the split, for the leaves to learn their slopes
        X = torch.rand(500, m, generator=g)
        z = torch.where(X[:, 0] <= 0.5, 8 * (X[:, 1] - 0.5), -8 * (X[:, 1] - 0.5))
        tree.learn(X, torch.bernoulli(torch.sigmoid(z), generator=g).long())
        after += tree.n_nodes > 1
    assert tree.n_nodes == 3
    return tree


def test_river_estimator_checks():
    """All of river's checks for a classifier; the dataset checks on the first 20 rows of each
    dataset (speed), and the memory-growth check (2,000 rows per dataset) left out here."""
    model = DynamicModelTree(feature_incremental=True)
    ran = set()
    for check in checks.yield_checks(model):
        name = check.__name__
        if name == "check_bounded_memory_growth":
            continue
        if isinstance(check, functools.partial) and "dataset" in check.keywords:
            rows = list(itertools.islice(check.keywords["dataset"], 20))
            check.func(model.clone(), dataset=rows)
        else:
            check(model.clone())
        ran.add(name)
    assert {
        "check_learn_one",
        "check_predict_proba_one",
        "check_shuffle_features_no_impact",
        "check_emerging_features",
        "check_classifier_tracks_seen_labels",
    } <= ran


def test_river_rows_match_the_tensor_api():
    rows = list(itertools.islice(datasets.Phishing(), 120))
    frame = pd.DataFrame([x for x, _ in rows])
    labels = pd.Series([y for _, y in rows])
    a = DynamicModelTree()
    a.learn_many(frame, labels)
    names = sorted(frame.columns)
    b = DynamicModelTree()
    X = torch.tensor(frame[names].to_numpy(), dtype=torch.float32)
    b.learn(X, torch.tensor([a.classes_.index(y) for y in labels]))
    pa = a.predict_proba_many(frame).to_numpy()  # columns in classes_ order
    assert torch.allclose(torch.tensor(pa), b(X).double(), atol=1e-6)
    assert list(a.predict_many(frame)) == [a.predict_one(x) for x, _ in rows]
    p = a.predict_proba_one(rows[0][0])
    assert set(p) == {False, True} and sum(p.values()) == pytest.approx(1.0)


def test_categorical_dict_values_get_codes():
    tree = DynamicModelTree(cat_features=["color"])
    tree.learn_one({"color": "red", "size": 0.2}, "a")
    tree.learn_one({"color": "blue", "size": 0.4}, "b")
    assert tree._categories == {0: {(False, "red"): 0.0, (False, "blue"): 1.0}}
    assert tree.feature_names == ["color", "size"]
    # an unseen category at prediction time is not equal to any split value
    assert set(tree.predict_proba_one({"color": "green", "size": 0.1})) == {"a", "b"}


def test_runs_in_the_evaluator_with_the_monitor():
    stream = SEA(seed=1, n_samples=3000)
    tree = DynamicModelTree.for_stream(stream)
    history = History()
    result = Evaluator(
        tree, stream, batch_size=100, plugins=[tree], sinks=[history]
    ).run()
    assert result.n_rows == 3000 and tree.n_samples_seen == 3000
    assert history.values("dmt/n_nodes")[-1] == tree.n_nodes
    assert history.values("dmt/n_splits")[-1] == tree.complexity()["splits"]
    assert 0.6 < result.metrics["accuracy"] <= 1.0


def test_interpretability_outputs():
    tree = split_tree()
    text = tree.to_text()
    assert text.splitlines()[0].startswith("x0 <= ")
    assert text.count("leaf") == 2 and "logit[1] = " in text
    d = tree.to_dict()
    assert d["split"]["feature"] == 0 and set(d["weights"]) == {"x0", "x1", "x2"}
    assert d["left"]["weights"]["x1"][0] > 0 > d["right"]["weights"]["x1"][0]
    # importance of a leaf: |w_j|, the leaf slopes dominate on x1
    left_id = d["left"]["id"]
    imp = tree.feature_importance(left_id)
    assert int(imp.argmax()) == 1
    assert torch.allclose(imp, tree.node_weights()[left_id]["weights"].abs().sum(1).double())
    # paper counting: 1 inner node + 2 binary linear leaves
    c = tree.complexity()
    assert c == {
        "nodes": 3,
        "leaves": 2,
        "depth": 1,
        **tree_complexity(1, 2, leaf_model="linear", n_features=3),
    }
    assert c["splits"] == 3 and c["params"] == 1 + 2 * 3
    s = tree.scalars()
    assert s["n_nodes"] == 3 and s["events/split"] == 1 and s["depth"] == 1
    ax = plot_tree(tree)
    assert len(ax.texts) == 3 and "x0 <= " in ax.texts[0].get_text()
    import matplotlib.pyplot as plt

    plt.close("all")
