"""The prequential runner: order of operations, metrics, plug-ins, checkpoints, sinks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from torchstream import Prequential, online_learner
from torchstream.evaluate import F1, MAE, MSE, Accuracy, LogLoss
from torchstream.models import MLP
from torchstream.sinks import History, TensorBoardSink
from torchstream.streams import SEA, Friedman, agrawal_drift, from_numpy


def mlp_learner(task="classification", seed=0, **kw):
    return online_learner(
        lambda d, k: MLP(d, k, hidden=(16,)), task=task, lr=0.01, scale_inputs=True, seed=seed, **kw
    )


class Recorder:
    """A learner stand-in that records the order of calls."""

    task = "classification"
    device = torch.device("cpu")
    dtype = torch.float32

    def __init__(self):
        self.calls = []
        self.classes_ = []
        self.seen = 0

    def __call__(self, X):
        self.calls.append(("predict", self.seen))
        # predicts "1" once it has learned >= 5 rows: the test can tell before from after
        p1 = 1.0 if self.seen >= 5 else 0.0
        return torch.tensor([[1 - p1, p1]] * X.shape[0])

    def learn(self, X, y):
        self.calls.append(("learn", self.seen))
        self.seen += X.shape[0]
        return torch.tensor(0.0)

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, s):
        self.seen = s["seen"]

    def _add_class(self, c):
        self.classes_.append(c)


class Spy:
    name = "spy"

    def __init__(self):
        self.batches = []

    def on_batch(self, batch):
        self.batches.append(batch)
        return {"rows": float(batch.size)}


def test_test_then_train_order():
    X = np.zeros((12, 2))
    y = np.array([0] + [1] * 11)
    stream = from_numpy(X, y, task="classification")
    learner, spy = Recorder(), Spy()
    history = History()
    runner = Prequential(learner, stream, batch_size=3, metrics=[Accuracy()], plugins=[spy],
                         sinks=[history])
    result = runner.run()
    assert learner.calls == [("predict", 0), ("learn", 0), ("predict", 3), ("learn", 3),
                             ("predict", 6), ("learn", 6), ("predict", 9), ("learn", 9)]
    # predictions are made before learning: the first two batches (seen 0 and 3) predict 0,
    # right for row 0 only; the last two predict 1, right for all rows
    assert result.metrics["accuracy"] == pytest.approx(7 / 12)
    assert [b.start for b in spy.batches] == [0, 3, 6, 9]
    assert all(b.y_pred.shape == (3, 2) for b in spy.batches)
    assert history.values("spy/rows") == [3.0] * 4
    assert history.steps("metrics/accuracy/cumulative") == [3, 6, 9, 12]  # rows seen
    assert history.values("metrics/accuracy/cumulative") == pytest.approx([1 / 3, 1 / 6, 4 / 9, 7 / 12])


def test_plugin_transform_changes_what_the_learner_sees():
    class ZeroFirst:
        def transform(self, X, step):
            X = X.clone()
            X[:, 0] = 0.0
            return X

        def on_batch(self, batch):
            assert bool((batch.X[:, 0] == 0).all())

    stream = from_numpy(np.ones((6, 2)), np.array([0, 1] * 3), task="classification")
    learner = Recorder()
    seen = []
    learner.learn = lambda X, y: seen.append(X.clone()) or torch.tensor(0.0)
    Prequential(learner, stream, batch_size=2, plugins=[ZeroFirst()]).run()
    assert all(bool((X[:, 0] == 0).all()) and bool((X[:, 1] == 1).all()) for X in seen)


@pytest.mark.parametrize("window", [None, 7])
def test_classification_metrics_match_sklearn(window):
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (50,), generator=g)
    p = torch.softmax(torch.randn(50, 3, generator=g), 1)
    ms = [Accuracy(window), F1(window), LogLoss(window)]
    for lo in range(0, 50, 4):  # uneven batches
        for m in ms:
            m.update(y[lo : lo + 4], p[lo : lo + 4])
    sl = slice(-window, None) if window else slice(None)
    yt, pp = y[sl].numpy(), p[sl].numpy()
    pred = pp.argmax(1)
    assert ms[0].get() == pytest.approx(skm.accuracy_score(yt, pred))
    labels = sorted(set(yt) | set(pred))
    assert ms[1].get() == pytest.approx(skm.f1_score(yt, pred, average="macro", labels=labels))
    assert ms[2].get() == pytest.approx(skm.log_loss(yt, pp, labels=[0, 1, 2]))


def test_binary_f1_is_positive_class_f1():
    y = torch.tensor([1, 0, 1, 1, 0, 0, 1])
    p1 = torch.tensor([0.9, 0.8, 0.2, 0.7, 0.1, 0.3, 0.6])
    m = F1()
    m.update(y, torch.stack([1 - p1, p1], 1))
    assert m.get() == pytest.approx(skm.f1_score(y.numpy(), (p1 > 0.5).long().numpy()))


@pytest.mark.parametrize("window", [None, 5])
def test_regression_metrics(window):
    g = torch.Generator().manual_seed(1)
    y, yp = torch.randn(23, generator=g), torch.randn(23, generator=g)
    mse, mae = MSE(window), MAE(window)
    for lo in range(0, 23, 3):
        mse.update(y[lo : lo + 3], yp[lo : lo + 3])
        mae.update(y[lo : lo + 3], yp[lo : lo + 3])
    sl = slice(-window, None) if window else slice(None)
    assert mse.get() == pytest.approx(skm.mean_squared_error(y[sl], yp[sl]))
    assert mae.get() == pytest.approx(skm.mean_absolute_error(y[sl], yp[sl]))


def test_metric_state_round_trip_and_names():
    m = Accuracy(window=3)
    m.update(torch.tensor([0, 1]), torch.tensor([[0.9, 0.1], [0.9, 0.1]]))
    m2 = Accuracy(window=3)
    m2.load_state_dict(m.state_dict())
    assert m2.get() == m.get() == 0.5
    assert m.name == "accuracy_window"
    with pytest.raises(ValueError, match="window"):
        Accuracy(window=0)


def _run(stream_fn, steps=None, *, batch_size=8, resume_from=None, learner_seed=0, sinks=()):
    stream = stream_fn()
    learner = mlp_learner(stream.task, seed=learner_seed)
    runner = Prequential(learner, stream, batch_size=batch_size, window=50, sinks=list(sinks))
    if resume_from is not None:
        runner.resume(resume_from)
    runner.run(steps)
    return runner


@pytest.mark.parametrize(
    "stream_fn", [lambda: SEA(n_samples=400, seed=3), lambda: Friedman(n_samples=400, seed=3)]
)
def test_checkpoint_resume_is_identical(tmp_path, stream_fn):
    full = _run(stream_fn)
    half = _run(stream_fn, steps=20)
    path = half.save(tmp_path / "ckpt.pt")
    # a fresh runner with a differently seeded learner: everything must come from the checkpoint
    resumed = _run(stream_fn, resume_from=path, learner_seed=123)
    assert resumed.position == full.position == 400
    assert resumed.results() == full.results()
    a, b = full.learner.state_dict()["module"], resumed.learner.state_dict()["module"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_checkpoint_every_and_history_resume(tmp_path):
    stream_fn = lambda: SEA(n_samples=240, seed=1)
    h_full = History()
    _run(stream_fn, sinks=[h_full])
    h1 = History()
    runner = Prequential(mlp_learner(), stream_fn(), batch_size=8, window=50, sinks=[h1])
    result = runner.run(15, checkpoint_every=5, checkpoint_path=tmp_path / "c.pt")
    assert result.checkpoint == str(tmp_path / "c.pt")
    h2 = History()
    resumed = _run(stream_fn, resume_from=tmp_path / "c.pt", sinks=[h2])
    assert resumed.step == 30
    assert h2.values("metrics/accuracy/cumulative") == h_full.values("metrics/accuracy/cumulative")


def test_runner_logs_to_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sink = TensorBoardSink(tmp_path / "tb")
    runner = Prequential(mlp_learner(), SEA(n_samples=100, seed=0), batch_size=10, window=30,
                         sinks=[sink], log_every=2)
    runner.run()
    runner.close()
    acc = EventAccumulator(str(tmp_path / "tb" / "run"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"metrics/accuracy/cumulative", "metrics/accuracy/window", "metrics/f1/cumulative",
            "metrics/log_loss/window", "learner/loss"} <= tags
    events = acc.Scalars("metrics/accuracy/cumulative")
    assert [e.step for e in events] == [20, 40, 60, 80, 100]  # every 2 batches, in rows seen
    assert events[-1].value == pytest.approx(runner.results()["accuracy"], abs=1e-6)


def test_drift_is_visible_in_windowed_accuracy():
    stream = agrawal_drift(n_samples=3000, position=1500, seed=0)
    history = History()
    runner = Prequential(mlp_learner(), stream, batch_size=10, window=300, sinks=[history])
    runner.run()
    steps = history.steps("metrics/accuracy/window")
    acc = dict(zip(steps, history.values("metrics/accuracy/window")))
    before, after = acc[1500], acc[1800]  # windows ending at row 1500 and at row 1800
    assert after < before - 0.1


def test_bad_runs():
    learner = mlp_learner()
    with pytest.raises(ValueError, match="batch_size"):
        Prequential(learner, SEA(n_samples=10), batch_size=0)
    with pytest.raises(ValueError, match="task"):
        Prequential(mlp_learner("regression"), SEA(n_samples=10))
    with pytest.raises(ValueError, match="empty"):
        Prequential(learner, SEA(n_samples=10).take(0)).run()
    with pytest.raises(ValueError, match="infinite"):
        Prequential(learner, SEA(n_samples=None)).run()
    with pytest.raises(ValueError, match="checkpoint_path"):
        Prequential(learner, SEA(n_samples=10)).run(checkpoint_every=2)
    r = Prequential(mlp_learner(), SEA(n_samples=10), batch_size=2)
    r.run(1)
    with pytest.raises(ValueError, match="batch_size"):
        Prequential(mlp_learner(), SEA(n_samples=10), batch_size=3).load_state_dict(r.state_dict())


def test_infinite_stream_with_steps():
    runner = Prequential(mlp_learner(), SEA(n_samples=None), batch_size=4)
    result = runner.run(5)
    assert result.n_rows == 20 and result.n_steps == 5
    assert "accuracy" in result.table()


def test_figures_reach_tensorboard_images(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    class Pictures:
        name = "pics"

        def on_batch(self, batch):
            return None

        def figures(self):
            fig = plt.figure()
            fig.gca().plot([0, 1], [1, 0])
            return {"pics/curve": fig}

    sink = TensorBoardSink(tmp_path / "tb")
    runner = Prequential(mlp_learner(), SEA(n_samples=40, seed=0), batch_size=4,
                         plugins=[Pictures()], sinks=[sink], figure_every=20)
    runner.run()
    runner.close()
    acc = EventAccumulator(str(tmp_path / "tb" / "run"), size_guidance={"images": 0})
    acc.Reload()
    assert [e.step for e in acc.Images("pics/curve")] == [20, 40]  # every 20 rows
    assert plt.get_fignums() == []  # the runner closed them
    with pytest.raises(ValueError, match="figure_every"):
        Prequential(mlp_learner(), SEA(n_samples=4), figure_every=0)


def test_plot_importance(tmp_path):
    from torchstream.viz import plot_importance

    h = History()
    for step in range(20):
        h.log_scalars(step, {"metrics/accuracy/window": 0.5 + step / 100,
                             "ipfi/a": step / 10, "ipfi/b": 1 - step / 20})
    fig = plot_importance(h, "ipfi", batch_size=10, drift_positions=[100],
                          detected_positions=[130], path=tmp_path / "imp.png")
    assert (tmp_path / "imp.png").stat().st_size > 1000
    top, bottom = fig.axes
    assert [line.get_label() for line in bottom.get_lines()][:2] == ["a", "b"]
    assert bottom.get_lines()[0].get_xdata()[-1] == 190
    with pytest.raises(ValueError, match="isage"):
        plot_importance(h, "isage")
