"""OnlineLearner: both APIs, classes, devices, checkpoints, river integration, bad input."""

from __future__ import annotations

import copy
import warnings

import pandas as pd
import pytest
import torch
from river import compose, datasets, evaluate, metrics, preprocessing

from torchstream import OnlineClassifier, OnlineLearner, OnlineRegressor, Schema, online_learner
from torchstream.learners import RunningStandardizer
from torchstream.models import MLP, Probit, SoftDecisionTree


def mlp(hidden=(16,)):
    return lambda d, k: MLP(d, k, hidden=hidden)


def test_task_classes_and_the_factory():
    from river import base

    clf = OnlineClassifier(mlp())
    reg = OnlineRegressor(mlp())
    assert isinstance(clf, OnlineClassifier) and isinstance(clf, base.Classifier)
    assert isinstance(reg, OnlineRegressor) and isinstance(reg, base.Regressor)
    assert isinstance(clf, OnlineLearner) and isinstance(reg, OnlineLearner)
    # the factory picks the class a task names, for modules, factories and specs alike
    assert type(online_learner(mlp(), task="regression")) is OnlineRegressor
    assert type(online_learner(mlp())) is OnlineClassifier
    spec = online_learner("mlp", task="regression", lr=0.5, seed=3)
    assert type(spec) is OnlineRegressor and spec.lr == 0.5 and spec.seed == 3
    with pytest.raises(ValueError, match="task must be 'classification' or 'regression'"):
        online_learner(mlp(), task="ranking")
    with pytest.raises(ValueError, match="task"):
        OnlineClassifier(mlp(), task="regression")
    with pytest.raises(TypeError, match="build an OnlineClassifier or an OnlineRegressor"):
        OnlineLearner(mlp())


def test_the_base_does_not_dispatch_and_imports_no_task_class():
    """OnlineLearner is a plain base class: no ``__new__`` handing construction to its
    subclasses, no ``__signature__`` patch, and learners/online.py does not import tasks.py
    (tasks.py imports online.py: one direction)."""
    import ast
    import inspect

    from torchstream.learners import online, tasks

    assert "__new__" not in vars(OnlineLearner) and "__signature__" not in vars(OnlineLearner)
    assert list(inspect.signature(OnlineRegressor).parameters)[:2] == ["module", "task"]

    def imported(module: object) -> set[str]:
        tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    assert "torchstream.learners.tasks" not in imported(online)
    assert "torchstream.learners.online" in imported(tasks)


def test_phishing_progressive_accuracy():
    """The learner must learn: >= 0.85 prequential accuracy on river's Phishing."""
    model = OnlineClassifier.from_spec("mlp", seed=0)
    score = evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    assert score.get() >= 0.85
    assert model.n_samples_seen == 1250
    assert set(model.classes_) == {True, False}


def test_inside_river_pipeline():
    model = preprocessing.StandardScaler() | OnlineClassifier(mlp(), lr=0.01, seed=0)
    assert isinstance(model, compose.Pipeline)
    score = evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    assert score.get() > 0.8


def test_regression_beats_mean_predictor():
    model = OnlineRegressor.from_spec("mlp", scale_inputs=True, seed=0)
    mae = evaluate.progressive_val_score(datasets.TrumpApproval(), model, metrics.MAE()).get()
    ys = [y for _, y in datasets.TrumpApproval()]
    # the running-mean predictor's prequential MAE
    total, base = 0.0, 0.0
    for i, y in enumerate(ys):
        pred = total / i if i else 0.0
        base += abs(y - pred)
        total += y
    assert mae < 0.5 * base / len(ys)


def test_string_labels_and_new_class_grow_output():
    model = OnlineClassifier(mlp(), lr=0.05, seed=0)
    assert model.predict_proba_one({"a": 1.0, "b": 0.0}) == {}
    assert model.predict_one({"a": 1.0, "b": 0.0}) is None
    rows = [({"a": 1.0, "b": 0.0}, "cat"), ({"a": 0.0, "b": 1.0}, "dog")]
    for _ in range(30):
        for x, y in rows:
            model.learn_one(x, y)
    assert model.module.output_layer.out_features == 2
    old_w = model.module.output_layer.weight.detach().clone()
    model.learn_one({"a": 1.0, "b": 1.0}, "bird")  # never seen: a third unit, no crash
    assert model.classes_ == ["cat", "dog", "bird"]
    assert model.module.output_layer.out_features == 3
    # the first two units' weights moved by one Adam step at most (lr = 0.05 per weight)
    assert torch.allclose(model.module.output_layer.weight[:2], old_w, atol=0.051)
    p = model.predict_proba_one({"a": 1.0, "b": 0.0})
    assert list(p) == ["cat", "dog", "bird"]
    assert sum(p.values()) == pytest.approx(1.0, abs=1e-6)
    for _ in range(60):
        for x, y in [*rows, ({"a": 1.0, "b": 1.0}, "bird")]:
            model.learn_one(x, y)
    assert model.predict_one({"a": 1.0, "b": 1.0}) == "bird"
    assert model.predict_one({"a": 1.0, "b": 0.0}) == "cat"


def test_unseen_output_units_have_zero_probability():
    model = OnlineClassifier(mlp(), seed=0)
    model.learn_one({"a": 1.0}, "only")
    X = torch.tensor([[1.0]])
    p = model.predict_proba(X)
    assert p.shape == (1, 2)
    assert p[0].tolist() == [1.0, 0.0]
    assert model.predict_proba_one({"a": 1.0}) == {"only": 1.0}


def test_binary_probit_link_matches_normal_cdf():
    model = OnlineClassifier(lambda d, k: Probit(d, 1), lr=0.01, seed=0)
    X = torch.randn(5, 3)
    model.learn(X, torch.tensor([0, 1, 0, 1, 1]))
    score = model.module(X).reshape(-1)
    expected = torch.special.ndtr(score)
    assert torch.allclose(model.predict_proba(X)[:, 1], expected, atol=1e-6)
    with pytest.raises(ValueError, match="third class"):
        model.learn(X[:1], torch.tensor([2]))


def test_tensor_api_shapes_and_model_fn():
    model = OnlineClassifier(mlp(), classes=["a", "b", "c"], n_features=4, seed=0)
    X = torch.randn(7, 4)
    model.learn(X, torch.tensor([0, 1, 2, 0, 1, 2, 0]))
    assert model.predict_proba(X).shape == (7, 3)
    assert model.predict(X).shape == (7,)
    out = model(X)  # the ModelFn keeps autograd for gradient attributions
    assert out.shape == (7, 3) and out.requires_grad
    with pytest.raises(ValueError, match="declared"):
        model.learn(X[:1], torch.tensor([3]))
    reg = OnlineRegressor(mlp(), n_features=4)
    reg.learn(X, torch.randn(7))
    assert reg.predict(X).shape == (7,)


def test_model_fn_does_not_learn_or_mutate():
    model = OnlineClassifier(mlp(), n_features=3, seed=0)
    model.learn(torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))
    before = copy.deepcopy(model.state_dict())
    X = torch.randn(5, 3)
    X0 = X.clone()
    model(X)
    model.predict_proba(X)
    assert torch.equal(X, X0)
    after = model.state_dict()
    for k, v in before["module"].items():
        assert torch.equal(v, after["module"][k])


def test_learn_many_and_predict_many_frames():
    data = list(datasets.Phishing())[:200]
    X = pd.DataFrame([x for x, _ in data])
    y = pd.Series([y for _, y in data])
    model = OnlineClassifier(mlp(), lr=0.01, seed=0)
    for lo in range(0, 200, 50):
        model.learn_many(X.iloc[lo : lo + 50], y.iloc[lo : lo + 50])
    proba = model.predict_proba_many(X)
    assert list(proba.columns) == model.classes_
    assert proba.shape == (200, 2)
    assert ((proba.sum(axis=1) - 1).abs() < 1e-5).all()
    pred = model.predict_many(X)
    assert (pred.index == X.index).all()
    assert (pred == proba.idxmax(axis=1)).all()


def test_batch_of_one_equals_learn_one():
    """learn_one(x, y) and learn(tensor [1, d], index) are the same step."""
    rows = list(datasets.Phishing())[:50]
    a = OnlineClassifier(mlp(), lr=0.01, seed=3, classes=[False, True])
    b = OnlineClassifier(mlp(), lr=0.01, seed=3, classes=[False, True])
    schema = Schema(list(rows[0][0]))
    for x, y in rows:
        a.learn_one(x, y)
        b.learn(schema.encode_one(x).unsqueeze(0), torch.tensor([int(y)]))
    for k, v in a.state_dict()["module"].items():
        assert torch.allclose(v, b.state_dict()["module"][k], atol=1e-6)


def test_state_dict_resume_is_exact():
    rows = list(datasets.Phishing())
    a = OnlineClassifier(mlp(), lr=0.01, seed=0)
    for x, y in rows[:300]:
        a.learn_one(x, y)
    state = copy.deepcopy(a.state_dict())
    b = OnlineClassifier(mlp(), lr=0.01, seed=99)
    b.load_state_dict(state)
    for x, y in rows[300:600]:
        a.learn_one(x, y)
        b.learn_one(x, y)
    X = torch.rand(10, 9)
    assert torch.equal(a.predict_proba(X), b.predict_proba(X))
    assert b.n_samples_seen == 600


def test_resume_after_output_growth():
    a = OnlineClassifier(mlp(), lr=0.01, seed=0)
    for i in range(9):
        a.learn_one({"x": float(i)}, i % 3)
    b = OnlineClassifier(mlp(), lr=0.01, seed=0)
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    assert b.module.output_layer.out_features == 3
    a.learn_one({"x": 1.0}, 0)
    b.learn_one({"x": 1.0}, 0)
    assert torch.equal(a.module.output_layer.weight, b.module.output_layer.weight)


def test_soft_tree_learner():
    model = OnlineClassifier(lambda d, k: SoftDecisionTree(d, k, depth=3), lr=0.02, seed=0)
    score = evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    assert score.get() > 0.8


@pytest.mark.parametrize(
    "row, match",
    [
        ({"a": float("nan"), "b": 1.0}, "column 'a'"),
        ({"a": float("inf"), "b": 1.0}, "column 'a'"),
        ({"a": 1.0}, "missing features \\['b'\\]"),
        ({"a": 1.0, "b": 2.0, "c": 3.0}, "unknown features \\['c'\\]"),
        ({"a": "red", "b": 2.0}, "non-numeric value 'red'"),
    ],
)
def test_bad_dict_rows(row, match):
    model = OnlineClassifier(mlp(), seed=0)
    model.learn_one({"a": 1.0, "b": 2.0}, 0)
    with pytest.raises(ValueError, match=match):
        model.learn_one(row, 1)
    with pytest.raises(ValueError, match=match):
        model.predict_proba_one(row)


def test_bad_tensors():
    model = OnlineClassifier(mlp(), n_features=3)
    with pytest.raises(ValueError, match="3"):
        model.learn(torch.zeros(2, 4), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="row 1, column 2"):
        model.learn(torch.tensor([[0.0, 0, 0], [0, 0, float("nan")]]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="shape"):
        model.learn(torch.zeros(2, 3), torch.tensor([0, 1, 1]))
    with pytest.raises(ValueError, match=">= 0"):
        model.learn(torch.zeros(1, 3), torch.tensor([-1]))
    reg = OnlineRegressor(mlp(), n_features=3)
    with pytest.raises(ValueError, match="non-finite"):
        reg.learn(torch.zeros(1, 3), torch.tensor([float("inf")]))
    with pytest.raises(ValueError, match="numbers"):
        reg.learn_one({"a": 1.0, "b": 2.0, "c": 0.0}, "high")
    with pytest.raises(ValueError, match="optimizer"):
        OnlineClassifier(mlp(), optimizer="newton")
    with pytest.raises(ValueError, match="lr"):
        OnlineClassifier(mlp(), lr=-1.0)


def test_string_feature_without_schema_is_a_clear_error():
    model = OnlineClassifier(mlp())
    with pytest.raises(ValueError, match="feature 'color' holds the string"):
        model.learn_one({"color": "red"}, 0)


def test_schema_with_categoricals():
    from torchstream import Feature

    schema = Schema([Feature("x"), Feature("color", "categorical", ("red", "blue"))])
    model = OnlineClassifier(mlp(), schema=schema, lr=0.05, seed=0)
    for _ in range(50):
        model.learn_one({"x": 0.0, "color": "red"}, 0)
        model.learn_one({"x": 0.0, "color": "blue"}, 1)
    assert model.predict_one({"x": 0.0, "color": "blue"}) == 1
    assert model.n_features == 3


def test_running_standardizer_matches_batch_statistics():
    torch.manual_seed(0)
    X = torch.randn(100, 3, dtype=torch.float64) * torch.tensor([1.0, 10.0, 0.1]) + 5
    s = RunningStandardizer(3)
    for chunk in torch.split(X, 7):
        s.update(chunk)
    assert torch.allclose(s.mean, X.mean(0))
    assert torch.allclose(s.std, X.std(0, unbiased=False))
    Z = s.transform(X)
    assert torch.allclose(Z.mean(0), torch.zeros(3, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(s.inverse(Z), X)


def test_to_device_keeps_state():
    model = OnlineClassifier(mlp(), n_features=2, scale_inputs=True, seed=0)
    model.learn(torch.randn(8, 2), torch.randint(0, 2, (8,)))
    X = torch.randn(3, 2)
    before = model.predict_proba(X)
    model.to("cpu")
    assert torch.equal(model.predict_proba(X), before)
    assert str(model.device) == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_learner_matches_cpu():
    rows = list(datasets.Phishing())[:100]
    cpu = OnlineClassifier(mlp(), lr=0.01, seed=0, device="cpu", dtype=torch.float64)
    gpu = OnlineClassifier(mlp(), lr=0.01, seed=0, device="cuda", dtype=torch.float64)
    for x, y in rows:
        cpu.learn_one(x, y)
        gpu.learn_one(x, y)
    X = torch.rand(5, 9, dtype=torch.float64)
    assert torch.allclose(cpu.predict_proba(X), gpu.predict_proba(X).cpu(), atol=1e-6)


def test_prediction_forward_reuse_is_bit_identical():
    """predict_proba_one + learn_one reuses the prediction's forward pass: same weights as
    learning without it (predictions under no_grad take the plain path)."""
    rows = list(datasets.Phishing())[:200]
    a = OnlineClassifier(mlp(), lr=0.01, seed=5)
    b = OnlineClassifier(mlp(), lr=0.01, seed=5)
    for x, y in rows:
        pa = a.predict_proba_one(x)
        with torch.no_grad():
            pb = b.predict_proba_one(x)
        assert pa == pb
        a.learn_one(x, y)
        b.learn_one(x, y)
    for k, v in a.state_dict()["module"].items():
        assert torch.equal(v, b.state_dict()["module"][k])


def test_forward_not_reused_for_a_changed_row():
    model = OnlineClassifier(mlp(), lr=0.01, seed=0)
    model.learn_one({"a": 0.0, "b": 0.0}, 0)
    x = {"a": 1.0, "b": 2.0}
    model.predict_proba_one(x)
    x["a"] = 5.0  # the same dict object, mutated
    ref = OnlineClassifier(mlp(), lr=0.01, seed=0)
    ref.learn_one({"a": 0.0, "b": 0.0}, 0)
    model.learn_one(x, 1)
    ref.learn_one({"a": 5.0, "b": 2.0}, 1)
    for k, v in model.state_dict()["module"].items():
        assert torch.equal(v, ref.state_dict()["module"][k])


def test_numeric_frame_fast_path_equals_row_path():
    data = list(datasets.Phishing())[:64]
    X = pd.DataFrame([x for x, _ in data])
    a = OnlineClassifier(mlp(), lr=0.01, seed=0)
    a.learn_one(data[0][0], data[0][1])
    fast = a._encode_many(X[list(reversed(X.columns))])  # column order does not matter
    slow = a.schema.encode(X.to_dict(orient="records"))
    assert torch.equal(fast, slow)
    bad = X.copy()
    bad.iloc[3, 2] = float("nan")
    with pytest.raises(ValueError, match="row 4, column .https."):  # 1 row seen before
        a.learn_many(bad, pd.Series([y for _, y in data]))


def test_optimizer_step_respects_hooks():
    from torchstream.learners.training import optimizer_step

    p = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([p], lr=0.5)
    calls = []
    opt.register_step_post_hook(lambda o, a, k: calls.append(1))
    p.grad = torch.ones(2)
    optimizer_step(opt)
    assert calls == [1] and p.tolist() == [0.5, 0.5]
    opt2 = torch.optim.Adam([q := torch.nn.Parameter(torch.ones(2))], lr=0.1)
    ref = torch.optim.Adam([r := torch.nn.Parameter(torch.ones(2))], lr=0.1)
    for _ in range(3):
        q.grad, r.grad = torch.tensor([1.0, -2.0]), torch.tensor([1.0, -2.0])
        optimizer_step(opt2)
        ref.step()
    assert torch.equal(q, r)


def test_learn_many_on_a_pandas_frame_warns_nothing():
    """pandas 3 hands out read-only views of a frame's block: the learner copies them rather
    than letting torch warn that the array is not writable."""
    X = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [0.0, 1.0, 0.5]})
    y = pd.Series([0, 1, 0])
    learner = OnlineClassifier(lambda d, k: MLP(d, k), lr=0.01, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        learner.learn_many(X, y)
        assert learner.predict_proba_many(X).shape == (3, 2)
