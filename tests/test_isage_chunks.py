"""iSAGE builds and evaluates its imputed rows in chunks: the draws, and so the estimates, do
not depend on the chunk size, for every removal the class supports (joint / product marginal
imputation, feature groups, a custom imputer, observational removal; both empty predictions;
one or several inner samples). The imputed rows equal a direct reference built from the same
random draws (exact, signed zeros included), and no buffer outgrows one chunk."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Literal

import pytest
import torch

import torchstream.explain.isage as isage_module
from torchstream.explain.imputers import MarginalImputer
from torchstream.explain.isage import CHUNK_BYTES, COMPILED_BYTES, IncrementalSAGE

F64 = torch.float64
D = 7


@pytest.fixture(params=["where", "bitwise"])
def select(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a chunk takes the present features from the batch: a comparison and
    ``torch.where`` (small chunks), and the bitwise select (large chunks; forced here)."""
    if request.param == "bitwise":
        monkeypatch.setattr(isage_module, "_BITWISE_MIN", 0)
    return str(request.param)
GROUPS = {"a": [0, 3], "b": [1], "c": [2, 4, 6], "d": [5]}


class ProtocolImputer(MarginalImputer):
    """The built-in imputer behind the generic ``impute(x, mask, storage)`` protocol."""


def rowwise(dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
    """A model whose output for a row does not depend on the other rows of the call, bit for
    bit (an element-wise product and a sum along each row)."""
    w = torch.linspace(-1.5, 2.0, D, dtype=dtype)

    def model(Z: torch.Tensor) -> torch.Tensor:
        return (Z * w).sum(-1) + 0.5 * Z[:, 0] * Z[:, 1]

    return model


def row_major(calls: list[torch.Tensor], b: int) -> torch.Tensor:
    """The model inputs of one batch as ``[batch; imputed rows in row-major (b, r) order]``:
    one call holds the batch and the imputed rows group-major (``[1 + R, B, d]``); chunked
    calls hold the batch, then the imputed rows row-major."""
    if len(calls) > 1:
        return torch.cat(calls)
    (Z,) = calls
    d = Z.shape[1]
    return torch.cat([Z[:b], Z[b:].view(-1, b, d).transpose(0, 1).reshape(-1, d)])


def run(chunk: int | None, dtype: torch.dtype = F64,
        calls: list[list[torch.Tensor]] | None = None,
        model: Callable[[torch.Tensor], torch.Tensor] | None = None,
        **kw: Any) -> IncrementalSAGE:
    """Four batches of 9 rows (the first only fills the storage); ``calls`` gets the model
    inputs of each explained batch."""
    f = model if model is not None else rowwise(dtype)

    def recorded(Z: torch.Tensor) -> torch.Tensor:
        if calls is not None:
            calls[-1].append(Z.clone())
        return f(Z)

    isage = IncrementalSAGE(recorded, "mse", D, alpha=0.1, storage_size=20, chunk_size=chunk,
                            seed=5, **kw)
    g = torch.Generator().manual_seed(11)
    for _ in range(4):
        X = torch.randn(9, D, generator=g, dtype=F64).to(dtype)
        y = (X[:, 0] - 2 * X[:, 4] + 0.3 * torch.randn(9, generator=g, dtype=F64)).to(dtype)
        if calls is not None and isage.n_batches:
            calls.append([])
        isage.explain(X, y)
    return isage


REMOVALS: list[dict[str, Any]] = [
    {"imputer": "joint"},
    {"imputer": "product"},
    {"imputer": "joint", "feature_groups": GROUPS},
    {"imputer": "product", "feature_groups": GROUPS},
    {"imputer": ProtocolImputer("product")},
    {"removal": "observational"},
    {"removal": "observational", "feature_groups": GROUPS},
]


@pytest.mark.parametrize(
    ("removal", "empty", "m"),
    list(itertools.product(REMOVALS, ("ema", "imputed"), (1, 3))),
    ids=lambda v: str(v) if not isinstance(v, dict) else "-".join(
        f"{k}={'groups' if k == 'feature_groups' else getattr(x, 'mode', x)}"
        for k, x in v.items()),
)
def test_chunked_equals_unchunked_bit_for_bit(removal: dict[str, Any], empty: str,
                                              m: int, select: str) -> None:
    kw = {**removal, "empty_prediction": empty, "n_samples": m}
    whole_calls: list[list[torch.Tensor]] = []
    whole = run(None, calls=whole_calls, **kw)
    expected_rows = 9 * (1 + (whole.n_explained_features - (0 if empty == "imputed" else 1)) * m)
    # small d: the whole expanded batch is one call by default
    assert [[Z.shape[0] for Z in batch] for batch in whole_calls] == [[expected_rows]] * 3
    for chunk in (1, 5, 13, expected_rows - 1, expected_rows):
        calls: list[list[torch.Tensor]] = []
        part = run(chunk, calls=calls, **kw)
        assert len(calls) == 3 and max(Z.shape[0] for c in calls for Z in c) <= chunk
        # the same rows reach the model (the batch, then its imputed rows)
        for got, want in zip(calls, whole_calls, strict=True):
            assert torch.equal(row_major(got, 9), row_major(want, 9))
        assert torch.equal(part.importance, whole.importance)
        assert torch.equal(part.importance_raw, whole.importance_raw)
        assert torch.equal(part.half_width(), whole.half_width())
        if empty == "ema":
            assert part.y_empty is not None and whole.y_empty is not None
            assert torch.equal(part.y_empty, whole.y_empty)
        assert torch.equal(part.generator.get_state(), whole.generator.get_state())
        assert part.storage.generator is not None
        assert torch.equal(part.storage.generator.get_state(),
                           whole.storage.generator.get_state())


@pytest.mark.parametrize("removal", REMOVALS[:4])
def test_chunked_mlp_in_float32_agrees_to_rounding(removal: dict[str, Any]) -> None:
    """A matrix-product model may round a row differently with a different number of rows
    per call: the estimates then agree to float32 rounding."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(D, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    for p in net.parameters():
        p.requires_grad_(False)
    whole = run(None, torch.float32, model=net, **removal)
    for chunk in (3, 17):
        part = run(chunk, torch.float32, model=net, **removal)
        torch.testing.assert_close(part.importance, whole.importance, rtol=1e-5, atol=1e-5)


def reference_rows(isage: IncrementalSAGE, X: torch.Tensor) -> torch.Tensor:
    """The imputed rows of the next batch (row-major ``(b, r)``, EMA empty prediction, one
    inner sample, no groups) written out directly from copies of the generators: permutation
    ranks from ``torch.rand``, then the slots, one per row (joint) or per value (product)."""
    b, d = X.shape
    gen = torch.Generator()
    gen.set_state(isage.generator.get_state())
    rank = torch.empty(b, d, dtype=torch.long)
    perm = torch.rand(b, d, generator=gen).argsort(dim=1, stable=True)
    rank.scatter_(1, perm, torch.arange(d).expand(b, d))
    storage = isage.storage
    slots = torch.Generator()
    slots.set_state(storage.generator.get_state())
    stored = storage.rows.clone()
    imputer = isage.imputer
    assert isinstance(imputer, MarginalImputer)
    joint = imputer.mode == "joint"
    n = b * (d - 1) * (1 if joint else d)
    idx = torch.randint(0, len(storage), (n,), generator=slots)
    out = torch.empty(b, d - 1, d, dtype=X.dtype)
    for i in range(b):
        for r in range(d - 1):  # coalition size r + 1
            for j in range(d):
                t = i * (d - 1) + r
                row = idx[t] if joint else idx[t * d + j]
                out[i, r, j] = X[i, j] if rank[i, j] < r + 1 else stored[row, j]
    return out.view(b * (d - 1), d)


@pytest.mark.parametrize(("mode", "dtype"), list(itertools.product(
    ("joint", "product"), (torch.float32, F64))))
def test_imputed_rows_equal_a_direct_reference(mode: Literal["joint", "product"],
                                               dtype: torch.dtype, select: str) -> None:
    """Bit for bit, with signed zeros, huge and tiny values in the batch and the storage."""
    special = torch.tensor([0.0, -0.0, 3e38, -3e38, 1e-40, -7.5, 2.0], dtype=F64).to(dtype)
    g = torch.Generator().manual_seed(2)
    for chunk in (None, 4, 11):
        calls: list[torch.Tensor] = []

        def model(Z: torch.Tensor) -> torch.Tensor:
            calls.append(Z.clone())
            return torch.zeros(Z.shape[0], dtype=Z.dtype)

        isage = IncrementalSAGE(model, "mse", D, alpha=0.1, imputer=mode, storage_size=12,
                                chunk_size=chunk, seed=1)
        isage.explain(special[torch.randperm(D * 12, generator=g) % D].view(12, D),
                      torch.zeros(12, dtype=dtype))
        for _ in range(2):
            X = special[torch.randint(0, D, (6, D), generator=g)]
            calls.clear()
            expected = reference_rows(isage, X)
            isage.explain(X, torch.zeros(6, dtype=dtype))
            got = row_major(calls, 6)
            assert torch.equal(got[:6], X)
            imputed = got[6:]
            assert torch.equal(imputed.view(torch.int32 if dtype == torch.float32
                                            else torch.int64),
                               expected.view(torch.int32 if dtype == torch.float32
                                             else torch.int64))


def test_default_chunk_follows_the_memory_budget() -> None:
    d = 1000
    calls: list[int] = []

    def model(Z: torch.Tensor) -> torch.Tensor:
        calls.append(Z.shape[0])
        return Z[:, 0]

    isage = IncrementalSAGE(model, "mse", d, alpha=0.1, storage_size=5, seed=0)
    g = torch.Generator().manual_seed(0)
    X = torch.randn(4, d, generator=g)
    assert isage.chunk_rows(X) == CHUNK_BYTES // (d * 4)
    assert isage.chunk_rows(X.double()) == CHUNK_BYTES // (d * 8)
    # another device (a GPU) takes the larger budget: fewer model calls, each a launch round
    assert isage.chunk_rows(torch.empty(4, d, device="meta")) == COMPILED_BYTES // (d * 4)
    isage.explain(X, X[:, 0])
    isage.explain(X, X[:, 0])
    rows = CHUNK_BYTES // (d * 4)
    n = 4 * (d - 1)
    assert calls == [4] + [rows] * (n // rows) + ([n % rows] if n % rows else [])
    # the reused buffers hold one chunk, not the B (d - 1) x d expanded batch
    assert isage._buf is not None and isage._buf.numel() == rows * d
    assert isage._scratch_buf is not None and isage._scratch_buf.numel() <= rows * d
    assert isage.n_explained == 4
