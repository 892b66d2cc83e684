"""IncrementalPFI(compile=True): the compiled step gives the estimates of the eager path under a
fixed seed (float32 models within 1e-6 relative, float64 within 1e-12), resumes from a
checkpoint bit for bit, raises the eager path's errors (naming the row and column) and leaves
the explainer unchanged when a check fails; where it cannot compile it warns and runs eagerly.

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

import torchstream.explain.ipfi as ipfi_module
from torchstream.explain._fused import _checks
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.learners.tasks import OnlineRegressor
from torchstream.models import MLP

from _compiled_cases import D, N_BATCHES, mlp, stream



def assert_same(eager: IncrementalPFI, compiled: IncrementalPFI, dtype: torch.dtype) -> None:
    """The estimates agree (1e-6 relative in float32, 1e-12 in float64), and so do the counters
    and the stored rows."""
    rtol = 1e-6 if dtype == torch.float32 else 1e-12
    for a, b in [(eager.importance, compiled.importance),
                 (eager.importance_raw, compiled.importance_raw),
                 (eager.smoother.sq_dev, compiled.smoother.sq_dev)]:
        scale = float(a.abs().max())
        torch.testing.assert_close(b, a, rtol=rtol, atol=rtol * scale)
    assert compiled.n_explained == eager.n_explained > 0
    assert compiled.n_batches == eager.n_batches
    assert torch.equal(compiled.storage.rows, eager.storage.rows)


# (B, K, loss, dtype): regression and classification, B = 1 and 8, K = 1 and 5, both dtypes
CONFIGS = [
    (1, 1, "mse", torch.float32),
    (8, 5, "mse", torch.float64),
    (1, 5, "cross_entropy", torch.float32),
    (8, 1, "cross_entropy", torch.float64),
]


def make(b: int, k: int, loss: str, dtype: torch.dtype, compile: bool,
         seed: int = 3) -> IncrementalPFI:
    classes = loss == "cross_entropy"
    model = mlp(3 if classes else 1, dtype, softmax=classes)
    return IncrementalPFI(model, loss, D, alpha=0.05, storage_size=20, n_samples=k, seed=seed,
                          compile=compile)


@pytest.fixture(scope="module", params=CONFIGS, ids=lambda c: f"B{c[0]}-K{c[1]}-{c[2]}-{c[3]}")
def side_by_side(request: pytest.FixtureRequest, compiler_works: None):
    b, k, loss, dtype = request.param
    eager, compiled = make(b, k, loss, dtype, False), make(b, k, loss, dtype, True)
    batches = stream(b, dtype, loss == "cross_entropy")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no silent or announced fallback
        for X, y in batches:
            eager.explain(X, y)
            compiled.explain(X, y)
    return request.param, eager, compiled, batches


def test_compiled_equals_eager(side_by_side):
    (b, k, loss, dtype), eager, compiled, _ = side_by_side
    assert compiled.compile_off_reason is None
    assert compiled.compile_seconds > 0.0  # the compiled step ran (and was timed once)
    assert compiled._compiled_keys == {
        (b, dtype, torch.int64 if loss == "cross_entropy" else dtype, torch.device("cpu"),
         (20, D), dtype, True)
    }
    assert_same(eager, compiled, dtype)


def test_compiled_checkpoint_resume_is_bit_exact(side_by_side):
    (b, k, loss, dtype), _, compiled, batches = side_by_side
    split = 3
    first = make(b, k, loss, dtype, True)
    for X, y in batches[:split]:
        first.explain(X, y)
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    resumed = make(b, k, loss, dtype, True, seed=99)
    resumed.load_state_dict(torch.load(buf, weights_only=True))
    for X, y in batches[split:]:
        resumed.explain(X, y)
    assert resumed.compile_off_reason is None and resumed.compile_seconds > 0.0
    assert torch.equal(resumed.importance, compiled.importance)
    assert torch.equal(resumed.importance_raw, compiled.importance_raw)
    assert torch.equal(resumed.half_width(), compiled.half_width())
    assert resumed.n_explained == compiled.n_explained


def _error(fn: Callable[[], None]) -> str:
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_failed_checks_raise_the_eager_errors_and_change_nothing(side_by_side):
    (b, k, loss, dtype), eager, compiled, batches = side_by_side
    X, y = batches[-1]
    bad_x = X.clone()
    bad_x[b - 1, 2] = float("nan")
    cases = [(bad_x, y)]
    if loss == "cross_entropy":  # class 3 of a 3-class model
        bad_y = y.clone()
        bad_y[0] = 3
        cases.append((X, bad_y))
    else:
        bad_y = y.clone()
        bad_y[0] = float("inf")
        cases.append((X, bad_y))
    for Xb, yb in cases:
        before = compiled.state_dict()
        message = _error(lambda: compiled.explain(Xb, yb))
        assert message == _error(lambda: eager.explain(Xb, yb))
        assert f"at step {N_BATCHES}" in message
        after = compiled.state_dict()
        assert torch.equal(after["generator"], before["generator"])
        assert torch.equal(after["storage"]["generator"], before["storage"]["generator"])
        assert torch.equal(after["smoother"]["raw"], before["smoother"]["raw"])
        assert after["n_batches"] == before["n_batches"]
    assert f"batch row {b - 1}, column 2 ('x2') is nan" in _error(
        lambda: compiled.explain(bad_x, y))
    assert compiled.compile_off_reason is None


def test_plugin_learner_network_compiled_equals_eager(compiler_works):
    """The plug-in case: ``batch.learner`` (a learner that keeps learning) is explained through
    its ``network`` module."""

    def run(compile: bool) -> IncrementalPFI:
        learner = OnlineRegressor(lambda d, k: MLP(d, k), lr=0.01, seed=1, n_features=D,
                                  scale_inputs=True)
        explainer = IncrementalPFI(None, "mse", D, alpha=0.05, storage_size=20, seed=3,
                                   compile=compile)
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


def test_flag_rejects_nonfinite_outputs_and_labels_out_of_range():
    """The flag of the fused step (run eagerly here): finite ``X``, ``y`` and outputs; labels
    integers in ``0..k-1`` for a class loss."""
    cfg = make(1, 1, "cross_entropy", torch.float64, False)._step_config(2, torch.float64)
    X = torch.zeros(2, D)
    out = torch.full((6, 3), 1 / 3)
    assert bool(_checks(X, torch.tensor([0, 2]), out, cfg))
    assert not bool(_checks(X, torch.tensor([0, 3]), out, cfg))  # class 3 of 3
    assert not bool(_checks(X, torch.tensor([-1, 0]), out, cfg))
    assert not bool(_checks(X, torch.tensor([0.0, 1.5]), out, cfg))
    bad_out = out.clone()
    bad_out[4, 1] = float("inf")
    assert not bool(_checks(X, torch.tensor([0, 2]), bad_out, cfg))
    assert bool(_checks(X, torch.tensor([0, 1]), torch.full((6,), 0.5), cfg))  # [n]: k = 2
    assert not bool(_checks(X, torch.tensor([0, 2]), torch.full((6,), 0.5), cfg))
    mse = make(1, 1, "mse", torch.float64, False)._step_config(2, torch.float64)
    assert bool(_checks(X, torch.tensor([0.5, -7.0]), torch.zeros(6), mse))  # values, no labels
    assert not bool(_checks(X, torch.tensor([0.5, float("nan")]), torch.zeros(6), mse))
    assert not bool(_checks(X, torch.tensor([0.5, 1.0]), torch.tensor([0.0] * 5 + [float("nan")]),
                            mse))
    nan_x = X.clone()
    nan_x[1, 3] = float("nan")
    assert not bool(_checks(nan_x, torch.tensor([0.5, 1.0]), torch.zeros(6), mse))


# ---------------------------------------------------------------------------------- fallback
def linear_fn(Z: torch.Tensor) -> torch.Tensor:
    return Z @ torch.tensor([1.0, -2.0, 0.0, 0.5], dtype=Z.dtype)


def _run_fn(model_fn: Callable[[torch.Tensor], torch.Tensor], compile: bool) -> IncrementalPFI:
    explainer = IncrementalPFI(model_fn, "mse", D, alpha=0.05, storage_size=20, n_samples=2,
                               seed=3, compile=compile)
    for X, y in stream(4, torch.float64, False):
        explainer.explain(X, y)
    return explainer


def test_plain_function_warns_once_and_equals_eager():
    eager = _run_fn(linear_fn, False)
    with pytest.warns(RuntimeWarning, match="not a torch module") as record:
        compiled = _run_fn(linear_fn, True)
    assert len(record) == 1
    assert "function" in str(compiled.compile_off_reason)
    assert compiled.compile_seconds == 0.0
    assert torch.equal(compiled.importance, eager.importance)
    assert torch.equal(compiled.half_width(), eager.half_width())


def test_compile_failure_warns_and_runs_eagerly(monkeypatch: pytest.MonkeyPatch):
    """A compile that fails (as without a C compiler) is said once; the batch it failed on and
    all later ones run eagerly, with the same random draws."""

    def failing_step() -> Callable[..., object]:
        def step(*args: object) -> object:
            raise RuntimeError("no working C compiler")
        return step

    monkeypatch.setattr(ipfi_module, "compiled_step", failing_step)
    module = mlp(1, torch.float64)
    eager = _run_fn(module, False)
    with pytest.warns(RuntimeWarning, match="torch.compile failed .*no working C compiler"):
        compiled = _run_fn(module, True)
    assert torch.equal(compiled.importance, eager.importance)
    assert torch.equal(compiled.half_width(), eager.half_width())


def test_chunk_size_turns_compile_off_with_a_warning():
    with pytest.warns(RuntimeWarning, match="chunk_size"):
        explainer = IncrementalPFI(mlp(1, torch.float64), "mse", D, chunk_size=8, compile=True)
    assert "chunk_size" in str(explainer.compile_off_reason)
