"""IncrementalPDP(compile=True): the compiled step gives the plot of the eager path (float32
models within 1e-6 relative, float64 within 1e-12) for a numeric feature on a moving grid
(rolling and quantile), a one-hot feature and a nullable numeric, B = 1 and B = 4, a
classifier's class column and a regressor's value; it resumes from a checkpoint bit for bit,
raises the eager path's errors (naming the row) and leaves the explainer unchanged when a check
fails; where it cannot compile it warns and runs eagerly.

The tests that compile are skipped, with the reason, where ``torch.compile`` cannot compile a
tiny function on this machine (no C compiler); each configuration compiles once (a
module-scoped fixture runs the eager and compiled explainers side by side).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import torchstream.explain.ipdp as ipdp_module
from torchstream.explain._fused_ipdp import IpdpConfig, ipdp_step
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.learners.tasks import OnlineRegressor
from torchstream.models import MLP

import _compiled_cases as compiled_cases

#: x0, x1 numeric, "job" a one-hot block of 3, "v" a nullable numeric (value, indicator).
NAMES = ["x0", "x1", "job=A", "job=B", "job=C", "v", "v:missing"]
GROUPS = {"x0": [0], "x1": [1], "job": [2, 3, 4], "v": [5, 6]}
D = len(NAMES)
N_ROWS = 24
GRID = 5


def mlp(out: int, dtype: torch.dtype, softmax: bool = False) -> nn.Module:
    return compiled_cases.mlp(out, dtype, softmax, d=D, activation=nn.Tanh)


def rows(dtype: torch.dtype) -> torch.Tensor:
    """``N_ROWS`` valid rows; x0 drifts (its range moves), a third of "v" is missing."""
    g = torch.Generator().manual_seed(5)
    t = torch.arange(N_ROWS, dtype=torch.float64)
    x0 = torch.randn(N_ROWS, generator=g, dtype=torch.float64) * (1 + t / 12) + t / 6
    x1 = torch.randn(N_ROWS, generator=g, dtype=torch.float64)
    job = nn.functional.one_hot(torch.randint(0, 3, (N_ROWS,), generator=g), 3).double()
    missing = (torch.rand(N_ROWS, generator=g) < 0.3).double()
    v = torch.randn(N_ROWS, generator=g, dtype=torch.float64) * (1 - missing)
    return torch.cat([x0[:, None], x1[:, None], job, v[:, None], missing[:, None]], 1).to(dtype)


def batches(b: int, dtype: torch.dtype) -> list[torch.Tensor]:
    X = rows(dtype)
    return [X[i : i + b] for i in range(0, N_ROWS, b)]


# (B, feature, task, dtype, grid): the three kinds of feature, B = 1 and 4, both dtypes
CONFIGS = [
    (4, "x0", "regressor", torch.float64, "rolling"),
    (1, "x0", "classifier", torch.float32, "quantile"),
    (4, "job", "classifier", torch.float64, "rolling"),
    (1, "v", "regressor", torch.float32, "rolling"),
]


def make(b: int, feature: str, task: str, dtype: torch.dtype, grid: str, compile: bool,
         model: Callable[[torch.Tensor], torch.Tensor] | None = None) -> IncrementalPDP:
    classes = task == "classifier"
    if model is None:
        model = mlp(3 if classes else 1, dtype, softmax=classes)
    groups = None if feature == "x0" else GROUPS
    return IncrementalPDP(
        model, feature, feature_names=NAMES, feature_groups=groups, grid_size=GRID,
        alpha=0.1, grid=grid, window=8, storage_size=8, entrance_prob=0.7, seed=3,  # type: ignore[arg-type]
        output_index=2 if feature == "job" else None, n_ice=3, history_every=5,
        compile=compile,
    )


def n_points(feature: str) -> int:
    return {"x0": GRID, "job": 3, "v": GRID + 1}[feature]


def assert_same_state(a: object, b: object) -> None:
    """Two states (nested dicts, sequences, tensors, numbers) are equal, tensors bit for bit
    (NaN where NaN)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        torch.testing.assert_close(b, a, rtol=0, atol=0, equal_nan=True)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for key in a:
            assert_same_state(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_state(x, y)
    else:
        assert a == b


def assert_same(eager: IncrementalPDP, compiled: IncrementalPDP, dtype: torch.dtype) -> None:
    """The plots agree (1e-6 relative in float32, 1e-12 in float64); the counters, the range
    storage and the running mean of the present values are equal."""
    rtol = 1e-6 if dtype == torch.float32 else 1e-12
    pairs = [(eager.grid, compiled.grid), (eager.pd, compiled.pd),
             (eager._ema.raw, compiled._ema.raw), (eager._ema.sq_dev, compiled._ema.sq_dev),
             (eager.ice, compiled.ice), (eager.ice_grid, compiled.ice_grid)]
    for a, b in pairs:
        scale = float(a.nan_to_num().abs().max())
        torch.testing.assert_close(b, a, rtol=rtol, atol=rtol * scale, equal_nan=True)
    assert compiled.n_explained == eager.n_explained > 0
    assert (compiled.n_seen, compiled.n_batches) == (eager.n_seen, eager.n_batches)
    assert compiled._present_sum == eager._present_sum
    assert compiled._present_n == eager._present_n
    assert_same_state(eager.state_dict()["storage"], compiled.state_dict()["storage"])
    assert len(compiled.history) == len(eager.history) > 0


@pytest.fixture(scope="module", params=CONFIGS, ids=lambda c: f"B{c[0]}-{c[1]}-{c[2]}-{c[3]}")
def side_by_side(request: pytest.FixtureRequest, compiler_works: None):
    b, feature, task, dtype, grid = request.param
    eager = make(b, feature, task, dtype, grid, False)
    compiled = make(b, feature, task, dtype, grid, True)
    grids = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no silent or announced fallback
        for X in batches(b, dtype):
            eager.explain(X)
            compiled.explain(X)
            grids.append(compiled.grid.nan_to_num())
    return request.param, eager, compiled, grids


def test_compiled_equals_eager(side_by_side):
    (b, feature, task, dtype, grid), eager, compiled, grids = side_by_side
    assert compiled.compile_off_reason is None
    assert compiled.compile_seconds > 0.0  # the compiled step ran (and was timed once)
    assert compiled._compiled_keys == {
        (b, n_points(feature), dtype, torch.device("cpu"), True)
    }
    assert_same(eager, compiled, dtype)
    if feature != "job":  # the grid moved while the compiled step ran
        assert not torch.equal(grids[-1], grids[len(grids) // 2])


def test_compiled_checkpoint_resume_is_bit_exact(side_by_side):
    (b, feature, task, dtype, grid), _, compiled, _ = side_by_side
    stream = batches(b, dtype)
    split = len(stream) // 2
    first = make(b, feature, task, dtype, grid, True)
    for X in stream[:split]:
        first.explain(X)
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    resumed = make(b, feature, task, dtype, grid, True)
    resumed.load_state_dict(torch.load(buf, weights_only=True))
    for X in stream[split:]:
        resumed.explain(X)
    assert resumed.compile_off_reason is None and resumed.compile_seconds > 0.0
    assert_same_state(resumed.state_dict(), compiled.state_dict())  # EMAs, ICE, storage, ...
    assert torch.equal(resumed.pd, compiled.pd)


def _error(fn: Callable[[], None]) -> str:
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_failed_checks_raise_the_eager_errors_and_change_nothing(side_by_side):
    (b, feature, task, dtype, grid), eager, compiled, _ = side_by_side
    X = batches(b, dtype)[-1]
    bad_x = X.clone()
    bad_x[b - 1, 1] = float("nan")
    cases = [(bad_x, f"batch row {b - 1}, column 1 is nan")]
    if feature == "job":
        not_onehot = X.clone()
        not_onehot[0, 2:5] = torch.tensor([1.0, 1.0, 0.0])
        cases.append((not_onehot, "batch row 0, the one-hot columns [2, 3, 4] of 'job'"))
    if feature == "v":
        bad_indicator = X.clone()
        bad_indicator[0, 6] = 0.5
        cases.append((bad_indicator, "batch row 0, column 6 ('v', a missing-value indicator)"))
    n_batches = eager.n_batches
    for Xb, expected in cases:
        before = compiled.state_dict()
        message = _error(lambda: compiled.explain(Xb))
        assert message == _error(lambda: eager.explain(Xb))
        assert expected in message and f"at step {n_batches}" in message
        assert_same_state(before, compiled.state_dict())
    assert compiled.compile_off_reason is None


def test_plugin_learner_network_compiled_equals_eager(compiler_works):
    """The plug-in case: ``batch.learner`` (a learner that keeps learning) is explained through
    its ``network`` module."""
    X_all = rows(torch.float32)
    y_all = 2 * X_all[:, 0] - X_all[:, 1]

    def run(compile: bool) -> IncrementalPDP:
        learner = OnlineRegressor(lambda d, k: MLP(d, k), lr=0.01, seed=1, n_features=D,
                                  scale_inputs=True)
        explainer = IncrementalPDP(None, "x1", feature_names=NAMES, grid_size=GRID, alpha=0.1,
                                   window=8, history_every=5, compile=compile)
        for i in range(0, N_ROWS, 4):
            X, y = X_all[i : i + 4], y_all[i : i + 4]
            learner.learn(X, y)
            explainer.on_batch(SimpleNamespace(X=X, y=y, learner=learner))  # type: ignore[arg-type]
        return explainer

    eager = run(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        compiled = run(True)
    assert compiled.compile_off_reason is None and compiled.compile_seconds > 0.0
    assert_same(eager, compiled, torch.float32)


def test_function_of_a_module_is_compiled_and_a_bad_output_raises_the_eager_error(
        compiler_works):
    """``lambda Z: net(Z)[:, 0] + ...`` is traced as it is; an output that is not finite (here
    where x1 is 0) makes the flag fail and the batch is redone eagerly, which raises."""
    net = mlp(2, torch.float64)

    def fn(Z: torch.Tensor) -> torch.Tensor:
        return net(Z)[:, 0] + 0.1 / Z[:, 1]

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        eager = make(4, "x0", "regressor", torch.float64, "rolling", False, model=fn)
        compiled = make(4, "x0", "regressor", torch.float64, "rolling", True, model=fn)
        for X in batches(4, torch.float64):
            eager.explain(X)
            compiled.explain(X)
    assert compiled.compile_off_reason is None and compiled.compile_seconds > 0.0
    assert_same(eager, compiled, torch.float64)
    bad = batches(4, torch.float64)[0].clone()
    bad[2, 1] = 0.0
    before = compiled.state_dict()
    message = _error(lambda: compiled.explain(bad))
    assert message == _error(lambda: eager.explain(bad))
    assert "model_fn returned inf" in message and "batch row 2" in message
    assert_same_state(before, compiled.state_dict())


def test_flag_rejects_nonfinite_outputs_and_outputs_of_a_wrong_shape():
    """The flag of the fused step (run eagerly here)."""
    cfg = IpdpConfig("numeric", 0, -1, (0,), 3, 0, None, torch.float64, 0.5, True, 0.25)
    X = torch.randn(2, D, dtype=torch.float64)
    z = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)
    state = (torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64),
             torch.tensor(0.5, dtype=torch.float64))
    plan = (torch.tensor([[0.0, 0.0], [0.5, 0.0]], dtype=torch.float64),
            torch.tensor([[1.0], [0.5]], dtype=torch.float64),
            torch.tensor([[0.25, 0.5]], dtype=torch.float64))

    def ok(model: Callable[[torch.Tensor], torch.Tensor], cfg: IpdpConfig = cfg) -> bool:
        return bool(ipdp_step(model, X, z, *state, plan, cfg).ok)

    assert ok(lambda Z: Z[:, 0] * 2)
    res = ipdp_step(lambda Z: Z[:, 0] * 2, X, z, *state, plan, cfg)
    assert torch.equal(res.ice, (2 * z).expand(2, 3))  # the ICE curves of the points
    # the EMA with alpha 1/2 from raw 0, n = 1: 0.25 * row 0 + 0.5 * row 1
    assert torch.allclose(res.raw, 0.75 * torch.stack([z, 2 * z]))
    assert not ok(lambda Z: Z[:, 0] / 0.0)  # inf
    assert not ok(lambda Z: torch.stack([Z[:, 0], Z[:, 0]], 1)[:-1])  # wrong length
    assert ok(lambda Z: torch.stack([Z[:, 0], Z[:, 1]], 1))  # [n, 2]: column 1
    assert not ok(lambda Z: torch.stack([Z[:, 0], Z[:, 1]], 1), cfg._replace(output_index=2))
    assert not ok(lambda Z: Z[:, 0], cfg._replace(output_index=0))  # [n] with an index
    nan_x = X.clone()
    nan_x[1, 3] = float("nan")
    assert not bool(ipdp_step(lambda Z: Z[:, 0], nan_x, z, *state, plan, cfg).ok)


# ---------------------------------------------------------------------------------- fallback
class NotAFunction:
    """A model that is neither a function nor a module."""

    def __call__(self, Z: torch.Tensor) -> torch.Tensor:
        return Z[:, 0] ** 2 - Z[:, 1]


def _run(model: Callable[[torch.Tensor], torch.Tensor], compile: bool) -> IncrementalPDP:
    explainer = make(4, "x0", "regressor", torch.float64, "rolling", compile, model=model)
    for X in batches(4, torch.float64):
        explainer.explain(X)
    return explainer


def _assert_equal(eager: IncrementalPDP, compiled: IncrementalPDP) -> None:
    assert torch.equal(compiled.pd, eager.pd) and torch.equal(compiled.grid, eager.grid)
    assert torch.equal(compiled.ice, eager.ice)


def test_other_callable_warns_once_and_equals_eager():
    eager = _run(NotAFunction(), False)
    with pytest.warns(RuntimeWarning, match="not a torch module") as record:
        compiled = _run(NotAFunction(), True)
    assert len(record) == 1
    assert "NotAFunction" in str(compiled.compile_off_reason)
    assert compiled.compile_seconds == 0.0
    _assert_equal(eager, compiled)


def test_untraceable_function_warns_and_runs_eagerly(compiler_works):
    """A function that leaves torch (here through a Python list) cannot be compiled as one
    graph: said once, and every batch runs eagerly."""

    def listy(Z: torch.Tensor) -> torch.Tensor:
        return torch.tensor([v * v for v in Z[:, 0].tolist()], dtype=Z.dtype)

    eager = _run(listy, False)
    with pytest.warns(RuntimeWarning, match="torch.compile failed") as record:
        compiled = _run(listy, True)
    assert len(record) == 1
    _assert_equal(eager, compiled)


def test_compile_failure_warns_and_runs_eagerly(monkeypatch: pytest.MonkeyPatch):
    """A compile that fails (as without a C compiler) is said once; the batch it failed on and
    all later ones run eagerly."""

    def failing_step() -> Callable[..., object]:
        def step(*args: object) -> object:
            raise RuntimeError("no working C compiler")
        return step

    monkeypatch.setattr(ipdp_module, "compiled_ipdp_step", failing_step)
    module = mlp(1, torch.float64)
    eager = _run(module, False)
    with pytest.warns(RuntimeWarning, match="torch.compile failed .*no working C compiler"):
        compiled = _run(module, True)
    _assert_equal(eager, compiled)


def test_chunk_size_turns_compile_off_with_a_warning():
    with pytest.warns(RuntimeWarning, match="chunk_size"):
        explainer = IncrementalPDP(mlp(1, torch.float64), 0, chunk_size=8, compile=True)
    assert "chunk_size" in str(explainer.compile_off_reason)
