"""The k-fold strategy honours its seed (and the run's), and its generator resumes exactly."""

from __future__ import annotations

import pytest
import torch

from torchstream.evaluate.runner import Evaluator
from torchstream.evaluate.strategies import DistributedKFold, derived_seed, get_strategy
from torchstream.learners import OnlineClassifier
from torchstream.models import MLP
from torchstream.streams import SEA

MODES = ["cross", "split", "bootstrap"]
X, Y = torch.zeros(3, 2), torch.zeros(3)


def _plans(strategy, n=40, start=0):
    """The (testers, train weights of row 0) of ``n`` steps."""
    out = []
    for t in range(start, start + n):
        p = strategy.plan(t, X, Y, last=False)
        out.append((p.testers.tolist(), p.train_weights[0].tolist()))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_same_seed_same_draws_other_seed_other_draws(mode):
    a = _plans(DistributedKFold(4, mode=mode, seed=5))
    assert a == _plans(DistributedKFold(4, mode=mode, seed=5))
    # 40 steps: two seeds give the same draws with probability <= 4^-40 (cross, split)
    assert a != _plans(DistributedKFold(4, mode=mode, seed=6))
    unseeded = DistributedKFold(4, mode=mode, seed=None)
    assert isinstance(unseeded.seed, int) and f"seed={unseeded.seed}" in repr(unseeded)
    assert _plans(unseeded) == _plans(DistributedKFold(4, mode=mode, seed=unseeded.seed))


def test_run_seed_reaches_a_named_kfold():
    s = get_strategy("kfold", run_seed=3, k=4)
    assert s.seed == derived_seed(3, "kfold") != 3
    assert get_strategy("kfold", run_seed=3, k=4, seed=7).seed == 7  # its own seed wins
    # the label-delay generator of the run is seeded with 3: the k-fold draws are not its draws
    g = torch.Generator().manual_seed(3)
    picks = [int(torch.randint(4, (1,), generator=g)) for _ in range(40)]
    testers = [p[0].index(True) for p in _plans(get_strategy("kfold", run_seed=3, k=4))]
    assert testers != picks
    assert testers == [p[0].index(True) for p in _plans(DistributedKFold(4, seed=s.seed))]
    with pytest.raises(ValueError, match="seed must be None or an integer"):
        DistributedKFold(3, seed=1.5)


def _evaluator(seed, mode="cross"):
    learner = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(4,)), lr=0.05, seed=0)
    return Evaluator(learner, SEA(seed=5, n_samples=300), strategy="kfold",
                     strategy_args={"k": 3, "mode": mode}, batch_size=10, seed=seed)


def _testers(result):
    """Per step, the instances that tested (their accuracy is recorded)."""
    frame = result.to_frame()
    tested = frame[frame["accuracy"].notna()]
    return tested.groupby("step")["instance"].apply(tuple).tolist()


@pytest.mark.parametrize("mode", MODES)
def test_two_runs_with_the_same_seed_are_identical(mode):
    a, b, c = (_evaluator(s, mode).run() for s in (1, 1, 2))
    cols = ["step", "instance", "accuracy", "log_loss"]
    assert a.to_frame()[cols].equals(b.to_frame()[cols])
    assert a.metrics == b.metrics
    assert _testers(a) == _testers(b) != _testers(c)
    if mode != "bootstrap":  # bootstrap: steps where every w_i > 0 test nobody
        assert len(_testers(a)) == 30


@pytest.mark.parametrize("mode", MODES)
def test_generator_state_resumes_exactly(mode, tmp_path):
    s = DistributedKFold(5, mode=mode, seed=11)
    _plans(s, 17)
    path = tmp_path / "kfold.pt"
    torch.save(s.state_dict(), path)
    state = torch.load(path, weights_only=True)  # tensors, numbers and strings only
    t = DistributedKFold(5, mode=mode, seed=11)
    t.load_state_dict(state)
    expected = _plans(s, 50, 17)
    assert _plans(t, 50, 17) == expected
    for kw, key in (({"k": 4, "seed": 11}, "k: state 5"), ({"k": 5, "seed": 12}, "seed: state 11")):
        other = DistributedKFold(mode=mode, **kw)
        before = other.generator.get_state()
        with pytest.raises(ValueError, match=key):
            other.load_state_dict(state)
        assert torch.equal(other.generator.get_state(), before)  # refused: left untouched
    # another process: another seed from the OS
    unseeded = DistributedKFold(5, mode=mode, seed=None)
    unseeded.load_state_dict(state)
    assert unseeded.seed == 11 and _plans(unseeded, 50, 17) == expected


def test_evaluator_state_carries_the_strategy_generator():
    """A run stopped after 12 steps and continued from its state equals the whole run."""
    whole = _evaluator(4, "bootstrap").run()
    first = _evaluator(4, "bootstrap")
    first.run(steps=12)
    second = _evaluator(4, "bootstrap")
    second.load_state_dict(first.state_dict())
    gen = second.strategy.generator.get_state()
    assert torch.equal(gen, first.strategy.generator.get_state())
    rest = second.run()
    cols = ["step", "instance", "accuracy", "log_loss"]
    assert rest.to_frame()[cols].equals(whole.to_frame()[cols])
    assert rest.metrics == whole.metrics
