"""``feature_incremental=True`` grows at amortised O(new columns): the input layer keeps spare
zero columns and doubles when outgrown, the optimiser is rebuilt only then, the schema grows
without a loop over the old features, and a grown learner resumes bit for bit."""

from __future__ import annotations

import copy
import math
from functools import partial

import pytest
import torch

from torchstream import OnlineLearner, OnlineRegressor
from torchstream.learners.training import grow_input_layer, input_layer
from torchstream.models import MLP
from torchstream.schema import Schema

HIDDEN = 8


def rows(n: int, new: int = 2) -> list[tuple[dict[str, float], float]]:
    """Row ``r`` holds the keys of row ``r - 1`` and ``new`` keys never seen before."""
    g = torch.Generator().manual_seed(0)
    values = torch.randn(n * new, generator=g).tolist()
    return [({f"f{j}": values[j] for j in range(max(0, (r - 1) * new), (r + 1) * new)},
             values[r]) for r in range(n)]


def learner() -> OnlineLearner:
    return OnlineRegressor(partial(MLP, hidden=(HIDDEN,)), feature_incremental=True, seed=0)


def test_growth_reallocates_log_times_and_copies_linear_columns(monkeypatch):
    """1,000 rows adding 2 keys each (2,000 features): the input weight is reallocated (and
    the optimiser rebuilt) only when its columns double, 10 times from 2; the columns copied
    by all reallocations sum to less than the final capacity (a geometric series), where one
    reallocation per row copied 1,000,000 columns; no Schema is built from the whole feature
    list per row."""
    model = learner()
    built = [0]
    init = Schema.__init__

    def counting(self: Schema, *args: object, **kwargs: object) -> None:
        built[0] += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(Schema, "__init__", counting)
    weights: list[torch.nn.Parameter] = []
    optimizers: list[torch.optim.Optimizer] = []
    for x, y in rows(1000):
        model.learn_one(x, y)
        w = input_layer(model.module).weight
        if not weights or w is not weights[-1]:
            weights.append(w)
        if not optimizers or model.optimizer is not optimizers[-1]:
            optimizers.append(model.optimizer)
    capacities = [w.shape[1] for w in weights]
    assert model.n_features == 2000 and input_layer(model.module).in_features == 2000
    assert capacities == [2 * 2**k for k in range(11)]  # 2, 4, ..., 2048
    assert len(optimizers) == len(weights)
    assert sum(capacities[:-1]) < capacities[-1]  # the columns copied: 2046 of 2048
    assert built[0] == 1  # the schema inferred from the first row; then with_numeric
    spare = input_layer(model.module).weight[:, 2000:]
    assert spare.shape == (HIDDEN, 48) and not spare.any()  # spare columns stay exactly 0
    assert not model.optimizer.state[weights[-1]]["exp_avg"][:, 2000:].any()


def test_spare_columns_change_no_output_and_get_no_update():
    """Within the spare columns a new feature needs no new parameter: the prediction of a row
    is the same before and after the growth, and the step after it leaves the spare columns
    at 0 (their input is padded with 0)."""
    model = learner()
    for x, y in rows(3):  # 6 features, capacity 8
        model.learn_one(x, y)
    w = input_layer(model.module).weight
    assert w.shape[1] == 8
    x = {f"f{j}": 0.5 for j in range(6)}
    before = model.predict_one(x)
    model.learn_one({**x, "g": 1.0}, 0.0)  # 7 features: within the capacity
    assert input_layer(model.module).weight is w and model.n_features == 7
    assert not w[:, 7:].any()
    model2 = learner()
    for x2, y2 in rows(3):
        model2.learn_one(x2, y2)
    model2._add_features(["g"])
    assert model2.predict_one(x) == before  # growth alone changes no output
    assert model2.predict_one({**x, "g": 5.0}) == before  # the new column's weight is 0


def test_grow_input_layer_doubles_and_pads():
    layer = torch.nn.Linear(3, 2)
    torch.nn.init.ones_(layer.weight)
    old, new = grow_input_layer(layer, 4)  # type: ignore[misc]
    assert new.shape == (2, 6) and layer.in_features == 4
    assert torch.equal(new[:, :3], old) and not new[:, 3:].any()
    assert grow_input_layer(layer, 6) is None and layer.weight is new
    x = torch.arange(6.0).reshape(1, 6)
    assert torch.equal(layer(x[:, :4]), layer(torch.cat([x[:, :4], torch.zeros(1, 2)], 1)))
    assert grow_input_layer(layer, 7)[1].shape == (2, 12)  # type: ignore[index]
    with pytest.raises(ValueError, match="cannot shrink"):
        grow_input_layer(layer, 5)


@pytest.mark.parametrize("at", [5, 37])  # spare columns at the checkpoint: 6 of 16, 54 of 128
def test_a_grown_learner_resumes_bit_for_bit(at):
    """Saved with spare columns, loaded into a fresh learner, both go on growing (through
    more doublings) with equal predictions and equal module and optimiser states."""
    data = rows(150)
    model = learner()
    for x, y in data[:at]:
        model.learn_one(x, y)
    state = copy.deepcopy(model.state_dict())  # as a checkpoint holds it: no shared tensors
    resumed = learner()
    resumed.load_state_dict(state)
    assert input_layer(resumed.module).weight.shape == input_layer(model.module).weight.shape
    for x, y in data[at:]:
        assert resumed.predict_one(x) == model.predict_one(x)
        model.learn_one(x, y)
        resumed.learn_one(x, y)
    a, b = model.state_dict(), resumed.state_dict()
    for k, v in a["module"].items():
        assert torch.equal(b["module"][k], v), k
    for s, t in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values()):
        assert all(torch.equal(torch.as_tensor(s[k]), torch.as_tensor(t[k])) for k in s)
    assert model.n_features == 300 and math.isfinite(model.last_loss)
