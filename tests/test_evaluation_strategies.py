"""The evaluation loop's strategies (evaluation spec §1, checks C1, C2, C9, C12-C15): prequential,
periodic holdout, distributed k-fold, label delay, pre-training, several predictors, per-step
records, checkpoints and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from torchstream.evaluate import (
    Accuracy,
    DistributedKFold,
    Evaluator,
    PeriodicHoldout,
    Prequential,
)
from torchstream.learners import OnlineClassifier, RiverLearner
from torchstream.models import MLP
from torchstream.streams import SEA, from_numpy, from_river


class Constant:
    """Always predicts class 0; records every row it is trained on."""

    task = "classification"

    def __init__(self) -> None:
        self.trained: list[torch.Tensor] = []

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(X.shape[0], 2)
        out[:, 0] = 1
        return out

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        self.trained.append(X[:, 0].clone())

    def state_dict(self) -> dict:
        return {"trained": list(self.trained)}

    def load_state_dict(self, state: dict) -> None:
        self.trained = list(state["trained"])


class Memoriser(Constant):
    """Returns the label of a row seen in training, else an impossible third class."""

    def __init__(self) -> None:
        super().__init__()
        self.memory: dict[float, int] = {}

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(X.shape[0], 3)
        for i, v in enumerate(X[:, 0].tolist()):
            out[i, self.memory.get(v, 2)] = 1
        return out

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        super().learn(X, y)
        self.memory.update(zip(X[:, 0].tolist(), y.tolist()))


def stream_700_of_1000(seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.array([0] * 700 + [1] * 300)
    rng.shuffle(y)
    X = np.arange(1000, dtype=np.float64).reshape(-1, 1)  # row index as the only feature
    return from_numpy(X, y, task="classification")


def test_c1_constant_predictor_pooled_and_per_step():
    stream = stream_700_of_1000()
    result = Prequential(Constant(), stream, batch_size=1, metrics=[Accuracy()]).run()
    assert result.metrics["accuracy"] == pytest.approx(0.7, abs=1e-12)
    steps = result.to_frame()
    assert steps["accuracy"].mean() == pytest.approx(0.7, abs=1e-12)
    result = Prequential(Constant(), stream, batch_size=30, metrics=[Accuracy()]).run()
    steps = result.to_frame()
    assert len(steps) == 34  # 33 full batches and one of 10
    assert result.metrics["accuracy"] == pytest.approx(0.7, abs=1e-12)  # pooled over rows
    assert "accuracy" in steps  # per-step (batch) scores are reported separately


def test_c2_test_then_train_order():
    stream = stream_700_of_1000()
    result = Prequential(Memoriser(), stream, batch_size=7, metrics=[Accuracy()]).run()
    assert result.metrics["accuracy"] == 0.0  # trained before testing would give 1.0


def test_c9_pretraining_offset_in_batch_start_and_records():
    stream = stream_700_of_1000()
    learner = Constant()
    seen = []

    class Spy:
        def on_batch(self, batch):
            seen.append(batch.start)

    result = Evaluator(learner, stream, batch_size=10, n_pretrain=100, plugins=[Spy()]).run()
    assert result.n_steps == 90 and result.n_rows == 1000
    assert learner.trained[0].tolist() == list(range(100))  # pre-training: rows 0..99 at once
    assert seen[40] == 500  # step 40 covers observations 500..509, not 400..409
    assert result.to_frame()["start"].iloc[40] == 500


def test_c12_kfold_modes():
    X = torch.zeros(4, 2)
    y = torch.zeros(4)
    for mode, testers in (("cross", 1), ("split", 9)):
        s = DistributedKFold(10, mode=mode, seed=0)
        for step in range(200):
            p = s.plan(step, X, y, last=False)
            assert int(p.testers.sum()) == testers
            assert torch.all(p.train_weights[:, p.testers] == 0)  # testers never train
            assert torch.all(p.train_weights[:, ~p.testers] == 1)
    s = DistributedKFold(10, mode="bootstrap", seed=0)
    weights = torch.stack([s.plan(t, X, y, last=False).train_weights[0] for t in range(10_000)])
    zero = (weights == 0).double().mean().item()
    # P(Poisson(1) = 0) = e^-1; 100k Bernoulli draws: sd = sqrt(.368 * .632 / 1e5) = 0.0015.
    assert abs(zero - math.exp(-1)) < 0.0075
    assert abs(weights.double().mean().item() - 1) < 0.02  # Poisson(1) mean, sd 0.0032


def test_c12_kfold_end_to_end_trains_only_the_non_testers():
    stream = stream_700_of_1000()
    ev = Evaluator(Constant(), stream, strategy=DistributedKFold(4, mode="cross", seed=1),
                   batch_size=50, metrics=[Accuracy()])
    result = ev.run()
    frame = result.to_frame()
    assert len(frame) == 20 * 4  # one record per step and instance
    tested = frame.groupby("step")["accuracy"].apply(lambda s: int(s.notna().sum()))
    assert (tested == 1).all()
    trained_rows = [sum(len(t) for t in inst.trained) for inst in ev.instances["learner"]]
    assert sum(trained_rows) == 3 * 1000  # every batch trains k - 1 = 3 instances
    assert "accuracy_std" in result.metrics
    assert result.metrics["accuracy"] == pytest.approx(0.7, abs=0.05)


def test_c13_holdout_never_trains_on_holdout_rows_and_tests_periodically():
    stream = stream_700_of_1000()
    learner = Constant()
    strategy = PeriodicHoldout(test_interval=10, holdout_size=20, replace_every=7)
    ev = Evaluator(learner, stream, strategy=strategy, batch_size=10, metrics=[Accuracy()])
    result = ev.run()
    frame = result.to_frame()
    tested_steps = frame.loc[frame["accuracy"].notna(), "step"].tolist()
    assert tested_steps == [*range(0, 100, 10), 99]  # every 10th and the last
    holdout_rows = set(range(20)) | {i for i in range(20, 1000) if (i + 1) % 7 == 0}
    trained = set(torch.cat(learner.trained).long().tolist())
    assert not trained & holdout_rows  # the leak check
    assert trained | holdout_rows == set(range(1000))
    assert strategy.holdout_X.shape[0] == 20  # size stays fixed under replacement
    # the holdout set holds the most recent chosen rows
    assert strategy.holdout_X[:, 0].long().tolist() == sorted(holdout_rows)[-20:]


def test_c14_label_delay_trains_on_rows_from_five_steps_before():
    stream = stream_700_of_1000()
    learner = Constant()
    ev = Evaluator(learner, stream, batch_size=10, label_delay=(5, 6), metrics=[Accuracy()])
    ev.run()
    assert len(learner.trained) == 100 - 5  # steps 0-4 train nothing
    assert learner.trained[0].long().tolist() == list(range(10))  # step 5 trains step 0's rows
    assert sum(len(t) for t in learner.trained) == 1000 - 5 * 10  # no final flush


def test_c15_several_predictors_same_rows_and_reproducible():
    stream = SEA(seed=3, n_samples=300)

    def make():
        return {
            "mlp": OnlineClassifier(lambda d, k: MLP(d, k, hidden=(8,)), lr=0.05, seed=0),
            "constant": Constant(),
        }

    r1 = Evaluator(make(), stream, batch_size=20).run()
    r2 = Evaluator(make(), stream, batch_size=20).run()
    f1, f2 = r1.to_frame(), r2.to_frame()
    assert len(f1) == 15 * 2
    assert f1.equals(f2.assign(test_seconds=f1["test_seconds"],
                               train_seconds=f1["train_seconds"]))
    assert set(r1.summary().index) == {"mlp", "constant"}
    assert r1.metrics["mlp/accuracy"] > r1.metrics["constant/accuracy"]
    assert "mlp" in r1.table() and "constant" in r1.table()


def test_river_data_set_end_to_end_with_each_strategy():
    from river import datasets, tree

    stream = from_river(datasets.Phishing(), n_samples=400)
    for strategy in ("prequential", PeriodicHoldout(5, replace_every=10),
                     DistributedKFold(3, mode="bootstrap", seed=0)):
        learner = RiverLearner.for_stream(tree.HoeffdingTreeClassifier(), stream)
        result = Evaluator(learner, stream, strategy=strategy, batch_size=10,
                           n_pretrain=50).run()
        assert 0.6 < result.metrics["accuracy"] <= 1.0, (strategy, result.metrics)


@pytest.mark.parametrize("strategy", ["prequential", "holdout", "kfold"])
def test_checkpoint_resume_is_exact(tmp_path, strategy):
    stream = SEA(seed=5, n_samples=400)
    args = {"kfold": {"k": 3, "seed": 2}, "holdout": {"test_interval": 3, "replace_every": 5},
            "prequential": {}}[strategy]

    def make():
        return Evaluator(OnlineClassifier(lambda d, k: MLP(d, k, hidden=(8,)), lr=0.05, seed=0),
                         stream, strategy=strategy, strategy_args=args, batch_size=10,
                         label_delay=(0, 3), seed=1)

    whole = make().run()
    first = make()
    first.run(steps=17)
    path = first.save(tmp_path / "run.pt")
    second = make()
    second.resume(path)
    rest = second.run()
    assert rest.metrics == whole.metrics
    cols = ["step", "predictor", "instance", "accuracy", "log_loss"]
    assert rest.to_frame()[cols].equals(whole.to_frame()[cols])


def test_bad_arguments():
    stream = stream_700_of_1000()
    with pytest.raises(ValueError, match="k"):
        DistributedKFold(1)
    with pytest.raises(ValueError, match="mode"):
        DistributedKFold(3, mode="loo")
    with pytest.raises(ValueError, match="test_interval"):
        PeriodicHoldout(0)
    with pytest.raises(ValueError, match="unknown strategy"):
        Evaluator(Constant(), stream, strategy="bootstrap")
    with pytest.raises(ValueError, match="exclusive"):
        Evaluator(Constant(), stream, label_delay=(5, 5))
    with pytest.raises(ValueError, match="n_pretrain"):
        Evaluator(Constant(), stream, n_pretrain=1000).run()
    with pytest.raises(ValueError, match="empty"):
        Evaluator({}, stream)
    with pytest.raises(TypeError, match="learn"):
        Evaluator({"f": lambda X: X}, stream)


class FiresAt:
    """A mocked detector plug-in that reports drift at fixed steps."""

    def __init__(self, steps):
        self.steps = set(steps)
        self.drift_detected = False

    def on_batch(self, batch):
        self.drift_detected = batch.step in self.steps


def test_c16_reset_on_drift():
    stream = stream_700_of_1000()
    learner = Constant()
    ev = Evaluator(learner, stream, batch_size=10, plugins=[FiresAt({10, 20})],
                   reset_on_drift=True)
    ev.run()
    assert ev.reset_steps == [10, 20]
    # the learner at the end was reset at step 20: it has learned batches 20..99 only
    assert len(ev.learner.trained) == 80
    assert ev.learner.trained[0].long().tolist() == list(range(200, 210))
    with pytest.raises(ValueError, match="unknown predictors"):
        Evaluator(learner, stream, reset_on_drift=["mlp"])


def test_c17_error_detector_polarity():
    """Correct for 50 steps, then always wrong: DDM (1 = error) alarms after step 50 only."""
    from river import drift

    from torchstream.drift import ErrorDetector

    y = np.array([0] * 500 + [1] * 500)
    stream = from_numpy(np.zeros((1000, 1)), y, task="classification")
    det = ErrorDetector(drift.binary.DDM())
    Evaluator(Constant(), stream, batch_size=10, plugins=[det]).run()
    assert det.drift_steps and min(det.drift_steps) >= 50
    assert det.alerts[0] >= 500


def test_noise_variability_plugin_in_the_loop():
    from torchstream.evaluate.noise import NoiseVariability

    stream = stream_700_of_1000()
    nv = NoiseVariability(n_samples=5, noise_scale=1.0, seed=0)
    Evaluator(Constant(), stream, batch_size=50, plugins=[nv]).run()
    assert nv.values == [0.0] * 20  # a model that ignores X is not moved by noise

    class Threshold(Constant):
        def __call__(self, X):
            p1 = (X[:, 0] > 500).double()
            return torch.stack([1 - p1, p1], 1)

    nv = NoiseVariability(n_samples=5, noise_scale=1000.0, seed=0)
    Evaluator(Threshold(), stream, batch_size=50, plugins=[nv]).run()
    assert np.mean(nv.values) != 0.0 and len(nv.values) == 20


def test_c18_step_measures_route_kwargs_and_reach_results():
    import warnings

    from sklearn.metrics import f1_score

    from torchstream.evaluate.measures import MetricSpec

    stream = stream_700_of_1000()
    spec = MetricSpec(f1_score, zero_division=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no UndefinedMetricWarning: zero_division reached f1
        result = Evaluator(Constant(), stream, batch_size=50, step_measures=[spec]).run()
    assert result.metrics["f1_score"] == 0.0  # never predicts the positive class
    assert (result.to_frame()["f1_score"] == 0.0).all()
    with pytest.raises(TypeError):
        MetricSpec(f1_score, zero_divison=0)  # misspelled: fails at construction
    with pytest.raises(ValueError, match="clash"):
        Evaluator(Constant(), stream, metrics=[Accuracy()],
                  step_measures=[MetricSpec(f1_score, name="accuracy")])


def test_feature_mask_reaches_test_and_training_rows():
    """A plug-in's transform (e.g. a feature-selection mask) applies to the rows the learner is
    tested on *and* trained on, pre-training included (float masked training rows only)."""

    class Mask:
        def transform(self, X, step):
            X = X.clone()
            X[:, 0] = -1.0
            return X

    class Spy(Constant):
        def __init__(self):
            super().__init__()
            self.tested = []

        def __call__(self, X):
            self.tested.append(X[:, 0].clone())
            return super().__call__(X)

    learner = Spy()
    Evaluator(learner, stream_700_of_1000(), batch_size=50, n_pretrain=100,
              plugins=[Mask()]).run()
    assert torch.all(torch.cat(learner.tested) == -1)
    assert torch.all(torch.cat(learner.trained) == -1)


def test_errors_inside_measures_propagate():
    def broken(y_true, y_pred):
        raise RuntimeError("measure failed")

    broken.name = "broken"
    with pytest.raises(RuntimeError, match="measure failed"):
        Evaluator(Constant(), stream_700_of_1000(), batch_size=50,
                  step_measures=[broken]).run()


def test_memory_per_step_and_model_complexity():
    stream = SEA(seed=3, n_samples=200)
    learner = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(8,)), lr=0.05, seed=0)
    result = Evaluator(learner, stream, batch_size=20, track_memory=True).run()
    frame = result.to_frame()
    assert (frame["memory_mb"] > 0).all() and len(frame) == 10
    # MLP 3 -> 8 -> 2 with biases: 3*8 + 8 + 8*2 + 2 = 50 parameters
    assert result.metrics["n_parameters"] == 50
    assert "n_parameters" not in Evaluator(Constant(), stream).run().metrics
