"""IncrementalSAGE(compile=True): the compiled step gives the estimates of the eager path under a
fixed seed (float32 models within 1e-6 relative, float64 within 1e-12), for both imputers, both
empty predictions, with and without feature groups; resumes from a checkpoint bit for bit,
raises the eager path's errors (naming the row) and leaves the explainer unchanged when a check
fails; where a configuration is not covered it warns and runs eagerly.

The tests that compile are skipped, with the reason, where ``torch.compile`` cannot compile a
tiny function on this machine (no C compiler); each configuration compiles once for the side by
side run (a module-scoped fixture) and once more for the resumed run.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

import torchstream.explain.isage as isage_module
from torchstream.explain._fused import StepConfig
from torchstream.explain._fused_isage import SageConfig, isage_step
from torchstream.explain.imputers import MarginalImputer
from torchstream.explain.isage import IncrementalSAGE
from torchstream.explain.storage import FreshSampler
from torchstream.learners.tasks import OnlineRegressor
from torchstream.losses import BROADCAST_LOSSES, get_loss
from torchstream.models import MLP

from _compiled_cases import D, N_BATCHES, mlp, stream

GROUPS = {"a": [0, 2], "b": [1], "c": [3]}


def assert_same(eager: IncrementalSAGE, compiled: IncrementalSAGE, dtype: torch.dtype) -> None:
    """The estimates and ``y_empty`` agree (1e-6 relative in float32, 1e-12 in float64), and so
    do the counters and the stored rows."""
    rtol = 1e-6 if dtype == torch.float32 else 1e-12
    pairs = [(eager.importance, compiled.importance),
             (eager.importance_raw, compiled.importance_raw),
             (eager.smoother.sq_dev, compiled.smoother.sq_dev)]
    if eager.y_empty is not None:
        assert compiled.y_empty is not None
        pairs.append((eager.y_empty, compiled.y_empty))
    else:
        assert compiled.y_empty is None
    for a, b in pairs:
        scale = float(a.abs().max())
        torch.testing.assert_close(b, a, rtol=rtol, atol=rtol * scale)
    assert compiled.n_explained == eager.n_explained > 0
    assert compiled.n_batches == eager.n_batches
    assert torch.equal(compiled.storage.rows, eager.storage.rows)


# (B, m, loss, dtype, imputer, empty prediction, groups, storage): B = 1 and 8, m = 1 and 3,
# regression and classification, both dtypes, both imputers, empty predictions and reservoirs,
# with and without groups
CONFIGS = [
    (1, 1, "mse", torch.float32, "joint", "ema", False, "geometric"),
    (8, 3, "mse", torch.float64, "product", "imputed", False, "geometric"),
    (1, 3, "cross_entropy", torch.float32, "product", "ema", True, "geometric"),
    (8, 1, "cross_entropy", torch.float64, "joint", "ema", True, "uniform"),
]
Config = tuple[int, int, str, torch.dtype, str, str, bool, str]


def make(config: Config, compile: bool, seed: int = 3) -> IncrementalSAGE:
    _, m, loss, dtype, imputer, empty, groups, storage = config
    classes = loss == "cross_entropy"
    model = mlp(3 if classes else 1, dtype, softmax=classes)
    return IncrementalSAGE(model, loss, D, alpha=0.05, storage=storage,  # type: ignore[arg-type]
                           storage_size=20, n_samples=m,
                           imputer=imputer, empty_prediction=empty,  # type: ignore[arg-type]
                           feature_groups=GROUPS if groups else None, seed=seed,
                           compile=compile)


def config_id(c: Config) -> str:
    return f"B{c[0]}-m{c[1]}-{c[2]}-{c[3]}-{c[4]}-{c[5]}-{c[7]}" + ("-groups" if c[6] else "")


@pytest.fixture(scope="module", params=CONFIGS, ids=config_id)
def side_by_side(request: pytest.FixtureRequest, compiler_works: None) -> tuple[Any, ...]:
    config = request.param
    eager, compiled = make(config, False), make(config, True)
    batches = stream(config[0], config[3], config[2] == "cross_entropy")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no silent or announced fallback
        for X, y in batches:
            eager.explain(X, y)
            compiled.explain(X, y)
    return config, eager, compiled, batches


def test_compiled_equals_eager(side_by_side: tuple[Any, ...]) -> None:
    (b, _, loss, dtype, *_), eager, compiled, _ = side_by_side
    assert compiled.compile_off_reason is None
    assert compiled.compile_seconds > 0.0  # the compiled step ran (and was timed once)
    assert compiled._compiled_keys == {
        (b, dtype, torch.int64 if loss == "cross_entropy" else dtype, torch.device("cpu"),
         (20, D), dtype, True)
    }
    assert_same(eager, compiled, dtype)


def test_compiled_checkpoint_resume_is_bit_exact(side_by_side: tuple[Any, ...]) -> None:
    config, _, compiled, batches = side_by_side
    split = 3
    first = make(config, True)
    for X, y in batches[:split]:
        first.explain(X, y)
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    resumed = make(config, True, seed=99)
    resumed.load_state_dict(torch.load(buf, weights_only=True))
    for X, y in batches[split:]:
        resumed.explain(X, y)
    assert resumed.compile_off_reason is None and resumed.compile_seconds > 0.0
    assert torch.equal(resumed.importance, compiled.importance)
    assert torch.equal(resumed.importance_raw, compiled.importance_raw)
    assert torch.equal(resumed.half_width(), compiled.half_width())
    if compiled.y_empty is not None:
        assert resumed.y_empty is not None and torch.equal(resumed.y_empty, compiled.y_empty)
    assert resumed.n_explained == compiled.n_explained


def _error(fn: Callable[[], None]) -> str:
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_failed_checks_raise_the_eager_errors_and_change_nothing(
    side_by_side: tuple[Any, ...],
) -> None:
    (b, _, loss, *_), eager, compiled, batches = side_by_side
    X, y = batches[-1]
    bad_x = X.clone()
    bad_x[b - 1, 2] = float("nan")
    bad_y = y.clone()
    if loss == "cross_entropy":  # class 3 of a 3-class model
        bad_y[0] = 3
    else:
        bad_y[0] = float("inf")
    for Xb, yb in [(bad_x, y), (X, bad_y)]:
        before = compiled.state_dict()
        message = _error(lambda: compiled.explain(Xb, yb))
        assert message == _error(lambda: eager.explain(Xb, yb))
        assert f"at step {N_BATCHES}" in message
        after = compiled.state_dict()
        assert torch.equal(after["generator"], before["generator"])
        assert torch.equal(after["storage"]["generator"], before["storage"]["generator"])
        assert torch.equal(after["smoother"]["raw"], before["smoother"]["raw"])
        assert after["n_batches"] == before["n_batches"]
        if before["y_empty"] is not None:
            assert torch.equal(after["y_empty"], before["y_empty"])
    assert f"batch row {b - 1}, column 2 ('x2') is nan" in _error(
        lambda: compiled.explain(bad_x, y))
    assert compiled.compile_off_reason is None


def test_plugin_learner_network_compiled_equals_eager(compiler_works: None) -> None:
    """The plug-in case: ``batch.learner`` (a learner that keeps learning) is explained through
    its ``network`` module."""

    def run(compile: bool) -> IncrementalSAGE:
        learner = OnlineRegressor(lambda d, k: MLP(d, k), lr=0.01, seed=1, n_features=D,
                                  scale_inputs=True)
        explainer = IncrementalSAGE(None, "mse", D, alpha=0.05, storage_size=20, n_samples=2,
                                    seed=3, compile=compile)
        for X, y in stream(1, torch.float32, False)[:5] * 2:
            learner.learn(X, y)
            explainer.on_batch(SimpleNamespace(X=X, y=y, learner=learner))  # type: ignore[arg-type]
        return explainer

    eager = run(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        compiled = run(True)
    assert compiled.compile_off_reason is None and compiled.compile_seconds > 0.0
    assert_same(eager, compiled, torch.float32)


def _hand_config(imputed_empty: bool) -> SageConfig:
    step = StepConfig(n_features=2, n_samples=1, broadcast_loss=BROADCAST_LOSSES["mse"],
                      loss_fn=get_loss("mse"), acc_dtype=torch.float64, labels="onehot",
                      alpha=0.5, ema=False, decay=1.0, n_groups=0)
    return SageConfig(step, product=False, imputed_empty=imputed_empty)


def test_step_by_hand() -> None:
    """The step itself (run eagerly): ``f(x) = x0 + 2 x1``, squared loss, ``y = 0``, the
    stored row ``(0, 0)``, ``x = (1, 1)``, the imputed empty prediction. Order (x0, x1): the
    chain's outputs are ``f(0, 0) = 0``, ``f(1, 0) = 1``, ``f(1, 1) = 3``, losses 0, 1, 9, so
    ``delta = (0 - 1, 1 - 9) = (-1, -8)``; order (x1, x0): ``0, f(0, 1) = 2, 3``, losses 0, 4,
    9, ``delta = (4 - 9, 0 - 4) = (-5, -4)``."""
    model = nn.Linear(2, 1, bias=False).double()
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, 2.0]]))
    X = torch.ones(2, 2, dtype=torch.float64)
    y = torch.zeros(2, dtype=torch.float64)
    u = torch.tensor([[0.2, 0.7], [0.7, 0.2]])  # permutations (x0, x1) and (x1, x0)
    data = torch.zeros(1, 2, dtype=torch.float64)
    idx = torch.zeros(4, dtype=torch.long)
    sizes = torch.tensor([0, 1])
    positions = torch.arange(2).expand(2, 2)
    raw = torch.zeros(2, dtype=torch.float64)
    rn = torch.zeros((), dtype=torch.float64)
    with torch.no_grad():
        res = isage_step(model, X, y, u, data, idx, sizes, positions, None, None, (), raw, raw,
                         rn, None, _hand_config(True))
    assert bool(res.ok)
    assert torch.equal(res.delta, torch.tensor([[-1.0, -8.0], [-5.0, -4.0]], dtype=torch.float64))
    # the EMA empty prediction with an output of another width than y_empty: flagged
    with torch.no_grad():
        res = isage_step(model, X, y, u, data, idx[:2], sizes[1:], positions, None,
                         torch.zeros(3, dtype=torch.float64), (), raw, raw, rn, None,
                         _hand_config(False))
    assert not bool(res.ok)
    bad = X.clone()
    bad[1, 0] = float("inf")
    with torch.no_grad():
        res = isage_step(model, bad, y, u, data, idx, sizes, positions, None, None, (), raw,
                         raw, rn, None, _hand_config(True))
    assert not bool(res.ok)


# ---------------------------------------------------------------------------------- fallback
def linear_fn(Z: torch.Tensor) -> torch.Tensor:
    return Z @ torch.tensor([1.0, -2.0, 0.0, 0.5], dtype=Z.dtype)


class HalfImputer(MarginalImputer):
    """A subclass of the built-in imputer (it may override ``impute``): not covered."""


def _run(compile: bool, model_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
         b: int = 4, **kwargs: Any) -> IncrementalSAGE:
    explainer = IncrementalSAGE(linear_fn if model_fn is None else model_fn, "mse", D,
                                alpha=0.05, storage_size=20, n_samples=2, seed=3,
                                compile=compile, **kwargs)
    for X, y in stream(b, torch.float64, False):
        explainer.explain(X, y)
    return explainer


def _fresh() -> FreshSampler:
    return FreshSampler(lambda n, g: torch.randn(n, D, generator=g, dtype=torch.float64), D,
                        seed=1)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"model_fn": linear_fn}, "not a torch module"),
        ({"model_fn": mlp(1, torch.float64), "chunk_size": 8}, "chunk_size"),
        ({"model_fn": mlp(1, torch.float64), "removal": "observational"}, "observational"),
        ({"model_fn": mlp(1, torch.float64), "imputer": HalfImputer()}, "HalfImputer"),
        ({"model_fn": mlp(1, torch.float64), "storage": _fresh}, "FreshSampler"),
    ],
    ids=["function", "chunk_size", "observational", "imputer", "storage"],
)
def test_uncovered_configuration_warns_once_and_equals_eager(
    kwargs: dict[str, Any], reason: str
) -> None:
    kwargs = dict(kwargs)
    if kwargs.get("storage") is _fresh:
        kwargs["storage"] = _fresh()
        eager_kwargs = dict(kwargs, storage=_fresh())
    else:
        eager_kwargs = kwargs
    eager = _run(False, **eager_kwargs)
    with pytest.warns(RuntimeWarning, match=reason) as record:
        compiled = _run(True, **kwargs)
    assert len([w for w in record if issubclass(w.category, RuntimeWarning)]) == 1
    assert reason in str(compiled.compile_off_reason)
    assert compiled.compile_seconds == 0.0
    assert torch.equal(compiled.importance, eager.importance)
    assert torch.equal(compiled.half_width(), eager.half_width())


def test_batch_beyond_the_compiled_budget_runs_eagerly_said_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch whose model input exceeds COMPILED_BYTES (here 20 rows) is explained eagerly,
    chunk by chunk, with one warning for the whole run; the path stays on for smaller ones."""
    monkeypatch.setattr(isage_module, "COMPILED_BYTES", 20 * D * 8)
    module = mlp(1, torch.float64)
    eager = _run(False, module)
    with pytest.warns(RuntimeWarning, match="28 model-input rows of 4 features") as record:
        compiled = _run(True, module)
    assert len([w for w in record if "COMPILED_BYTES" in str(w.message)]) == 1
    assert compiled.compile_off_reason is None and compiled.compile_seconds == 0.0
    assert torch.equal(compiled.importance, eager.importance)
    assert torch.equal(compiled.half_width(), eager.half_width())


def test_compile_failure_warns_and_runs_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile that fails (as without a C compiler) is said once; the batch it failed on and
    all later ones run eagerly, with the same random draws."""

    def failing_step() -> Callable[..., object]:
        def step(*args: object) -> object:
            raise RuntimeError("no working C compiler")
        return step

    monkeypatch.setattr(isage_module, "compiled_isage_step", failing_step)
    module = mlp(1, torch.float64)
    eager = _run(False, module)
    with pytest.warns(RuntimeWarning, match="torch.compile failed .*no working C compiler"):
        compiled = _run(True, module)
    assert torch.equal(compiled.importance, eager.importance)
    assert torch.equal(compiled.half_width(), eager.half_width())
    assert compiled.y_empty is not None and eager.y_empty is not None
    assert torch.equal(compiled.y_empty, eager.y_empty)
