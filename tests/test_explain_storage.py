"""Storages and the marginal imputer: sampling laws (spec §8 checks 6, 7, 8), batch = sequential
updates, bit-exact resume, imputation semantics and argument validation.

Statistical checks use fixed seeds (so they are deterministic) and tolerances of 5 standard
deviations computed from the exact variance of the statistic (binomial, geometric, negative
binomial, record counts, U-statistics), or chi-square quantiles at level 1e-6.
"""

from __future__ import annotations

import io
import math
from collections import Counter

import pytest
import torch
from scipy import stats

from torchstream.explain.imputers import MarginalImputer
from torchstream.explain.storage import (
    FrequencyStorage,
    FreshSampler,
    GeometricReservoir,
    RollingExtremes,
    UniformReservoir,
)

F64 = torch.float64


def stream(n: int, d: int = 1, start: int = 0) -> torch.Tensor:
    """Rows whose every feature is the stream index of the row."""
    return torch.arange(start, start + n, dtype=F64).unsqueeze(1).repeat(1, d)


def geometric_law(size: int, q: float, s: int) -> torch.Tensor:
    """Exact probability that a uniform draw from a geometric reservoir at time ``s`` (after
    ``s`` rows, indices 0..s-1) returns row ``r``, for ``r = 0..s-1`` ([PFI] sampling law,
    with insertion probability ``q``)."""
    p = q / size
    r = torch.arange(s, dtype=F64)
    law = p * (1 - p) ** (s - r - 1)
    law[:size] = (1 / size) * (1 - p) ** (s - size)  # rows of the initial fill
    return law


def collision_u_statistic(indices: list[int]) -> float:
    """Unbiased estimate of ``sum_r p_r^2`` from iid draws: the fraction of colliding pairs."""
    n = len(indices)
    return sum(c * (c - 1) for c in Counter(indices).values()) / (n * (n - 1))


def collision_sd(law: torch.Tensor, n: int) -> float:
    """Standard deviation of :func:`collision_u_statistic` (Hoeffding's U-statistic variance
    for the kernel ``1{X = Y}``)."""
    s2, s3 = float((law**2).sum()), float((law**3).sum())
    zeta1, zeta2 = s3 - s2**2, s2 - s2**2
    return math.sqrt(4 * (n - 2) / (n * (n - 1)) * zeta1 + 2 / (n * (n - 1)) * zeta2)


def chi2_ok(observed: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
    stat = float(((observed - expected) ** 2 / expected).sum())
    return stat, float(stats.chi2.ppf(1 - 1e-6, observed.numel() - 1))


# ---------------------------------------------------------------------------------- check 6
def test_check6_geometric_collision_formula_matches_the_exact_law():
    for size, s in [(10, 13), (10, 200), (7, 7), (100, 350)]:
        p = 1 / size
        formula = p / (2 - p) * (1 + (1 - p) ** (2 * (s - size) + 1))
        law = geometric_law(size, 1.0, s)
        assert float(law.sum()) == pytest.approx(1.0, abs=1e-12)
        assert float((law**2).sum()) == pytest.approx(formula, abs=1e-12)


def test_check6_geometric_reservoir_age_law_and_collisions():
    size, n_real, s1, s2 = 10, 2000, 13, 200
    early, late, same_slot = [], [], 0
    for seed in range(n_real):
        res = GeometricReservoir(size, 1, seed=seed)
        res.update(stream(s1))
        early.append(int(res.times[res.sample_indices(1)]))
        res.update(stream(s2 - s1, start=s1))
        late.append(int(res.times[res.sample_indices(1)]))
        i, j = res.sample_indices(2).tolist()
        same_slot += i == j

    # collision probability across independent realisations: Lemma 1 of [PFI]
    for idx, s in [(early, s1), (late, s2)]:
        law = geometric_law(size, 1.0, s)
        expected = float((law**2).sum())  # 0.0778 at s = 13, 1 / 19 = 0.0526 at s = 200
        tol = 5 * collision_sd(law, n_real)  # ~0.002 at s = 13
        assert abs(collision_u_statistic(idx) - expected) <= tol, (s, expected)
    # two draws from the SAME reservoir collide with probability 1 / L (binomial sd)
    assert abs(same_slot / n_real - 1 / size) <= 5 * math.sqrt(0.1 * 0.9 / n_real)

    # sampled age a = s - 1 - r is geometric(p = 1 / L): chi-square over a = 0..29 and a >= 30
    # (the tail bin holds the exact probability (1 - p)^30 of the truncated law)
    ages = torch.tensor([s2 - 1 - r for r in late])
    p = 1 / size
    a = torch.arange(30, dtype=F64)
    expected = torch.cat([p * (1 - p) ** a, torch.tensor([(1 - p) ** 30], dtype=F64)])
    observed = torch.bincount(ages.clamp(max=30), minlength=31).to(F64)
    stat, limit = chi2_ok(observed, n_real * expected)  # smallest expected count ~9
    assert stat <= limit, (stat, limit)
    # mean age L - 1 = 9 (geometric variance (1 - p) / p^2 = 90)
    assert abs(ages.double().mean().item() - (size - 1)) <= 5 * math.sqrt(90 / n_real)


def test_check6_geometric_reservoir_insert_prob_scales_the_mean_age():
    size, q, s, n_real = 10, 0.5, 400, 2000
    ages = []
    for seed in range(n_real):
        res = GeometricReservoir(size, 1, insert_prob=q, seed=10_000 + seed)
        res.update(stream(s))
        ages.append(s - 1 - int(res.times[res.sample_indices(1)]))
    law = geometric_law(size, q, s)
    age = s - 1 - torch.arange(s, dtype=F64)
    mean = float((law * age).sum())
    var = float((law * age**2).sum()) - mean**2  # ~ (1 - p) / p^2 = 380 for p = q / L = 0.05
    assert mean == pytest.approx(size / q - 1, abs=1e-6)  # 19; truncation is ~1e-9
    assert abs(sum(ages) / n_real - mean) <= 5 * math.sqrt(var / n_real)


# ---------------------------------------------------------------------------------- check 7
def test_check7_uniform_reservoir_inclusion_frequency_and_uniform_draws():
    size, n, n_real = 10, 50, 2000
    counts = torch.zeros(n)
    sampled = []
    for seed in range(n_real):
        res = UniformReservoir(size, 2, seed=seed)
        res.update(stream(n, 2))
        counts[res.times] += 1
        sampled.append(int(res.times[res.sample_indices(1)]))
    # each index is stored with probability L / n = 0.2: binomial(2000, 0.2) counts, sd 17.9
    # (5 sd per index; 50 indices => family-wise false-alarm rate ~3e-5)
    pi = size / n
    assert float((counts - n_real * pi).abs().max()) <= 5 * math.sqrt(n_real * pi * (1 - pi))
    # a draw from the reservoir hits each past row with probability 1 / n
    observed = torch.bincount(torch.tensor(sampled), minlength=n).to(F64)
    stat, limit = chi2_ok(observed, torch.full((n,), n_real / n, dtype=F64))
    assert stat <= limit, (stat, limit)


def test_uniform_reservoir_keeps_everything_until_full():
    res = UniformReservoir(8, 3, seed=0)
    res.update(stream(5, 3))
    assert res.times.tolist() == [0, 1, 2, 3, 4]
    assert torch.equal(res.rows, stream(5, 3))
    assert len(res) == 5 and res.n_seen == 5


# ---------------------------------------------------------------------------------- check 8
def brute_extremes(values: list[float], k: int) -> tuple[float, float]:
    window = values[-k:]
    return min(window), max(window)


@pytest.mark.parametrize("kind", ["random", "increasing", "decreasing", "ties"])
def test_check8a_rolling_extremes_equal_brute_force_every_step(kind):
    k, n = 7, 300
    g = torch.Generator().manual_seed(1)
    values = {
        "random": torch.randn(n, generator=g, dtype=F64),
        "increasing": torch.arange(n, dtype=F64),
        "decreasing": -torch.arange(n, dtype=F64),
        "ties": torch.randint(0, 3, (n,), generator=g).to(F64),
    }[kind]
    ext = RollingExtremes(k)
    seen: list[float] = []
    largest = [0, 0]
    for v in values.tolist():
        ext.update(torch.tensor([v], dtype=F64))
        seen.append(v)
        assert (ext.min, ext.max) == brute_extremes(seen, k)
        largest = [max(a, b) for a, b in zip(largest, ext.deque_sizes)]
        assert max(ext.deque_sizes) <= k
    if kind == "decreasing":  # worst case of [PDP] Fig. 7b: the max-deque holds the window
        assert ext.deque_sizes == (k, 1)
    if kind == "increasing":
        assert ext.deque_sizes == (1, k)
    assert largest[0] <= k and largest[1] <= k


def test_check8a_rolling_extremes_batches_equal_single_values():
    """Batches of every size (short ones run the deque loop, long ones the vectorised fold)
    give the same extremes and the same deques as value-by-value updates."""
    k = 300
    g = torch.Generator().manual_seed(2)
    values = torch.randn(6000, generator=g, dtype=F64)
    values[1000:1700] = torch.linspace(5, -5, 700, dtype=F64)  # long decreasing run
    sizes = [1, 5, 257, 50, 1000, 3, 400, 299, 300, 301, 2000]
    single, batched = RollingExtremes(k), RollingExtremes(k)
    pos = 0
    for size in sizes:
        chunk = values[pos : pos + size]
        for v in chunk:
            single.update(v.reshape(1))
        batched.update(chunk)
        pos += size
        assert (batched.min, batched.max) == brute_extremes(values[:pos].tolist(), k)
        assert batched.state_dict() == single.state_dict()
    assert pos == sum(sizes)


def test_check8b_rolling_extremes_mean_deque_size_is_harmonic_number():
    # After exactly k new values the deque holds the right-to-left strict records of k iid
    # values: mean H_k, variance H_k - H_k^(2) (sum of independent Bernoulli(1/i)). Each batch
    # of >= k values restarts the window, so the batches give independent counts.
    k, n_windows = 200, 1000
    h1 = sum(1 / i for i in range(1, k + 1))  # 5.878
    var = h1 - sum(1 / i**2 for i in range(1, k + 1))  # 4.24
    g = torch.Generator().manual_seed(3)
    ext = RollingExtremes(k)
    sizes = []
    for w in range(n_windows):
        b = k if w % 2 == 0 else k + 100  # deque loop and vectorised fold alike
        ext.update(torch.rand(b, generator=g, dtype=F64))
        sizes.append(ext.deque_sizes)
    sizes_t = torch.tensor(sizes, dtype=F64)
    tol = 5 * math.sqrt(var / n_windows)  # 0.33
    assert bool(((sizes_t.mean(0) - h1).abs() <= tol).all()), (sizes_t.mean(0), h1)


def test_check8c_frequency_storage_holds_the_last_included_values():
    size, n = 5, 200
    fs = FrequencyStorage(size, entrance_prob=0.3, seed=4)
    included = []
    for t in range(n):
        fs.update(torch.tensor([float(t)]))
        if fs.values[-1].item() == t:
            included.append(t)
        assert fs.values.tolist() == included[-size:]
        assert fs.times.tolist() == included[-size:]
    assert included[:size] == list(range(size))  # fill phase: the first L values always enter
    # ~P(E) of the rest entered (binomial(195, 0.3), sd 6.4)
    assert abs(len(included) - size - 0.3 * (n - size)) <= 5 * math.sqrt(195 * 0.3 * 0.7)


def test_check8c_frequency_storage_oldest_age():
    # The age s - 1 - t of the oldest of the L most recent inclusions is T - 1 with T the number
    # of Bernoulli(P(E)) trials up to the L-th success: mean L / P(E) - 1, var L (1 - P) / P^2.
    size, prob, s, n_real = 20, 0.25, 400, 500
    ages = []
    for seed in range(n_real):
        fs = FrequencyStorage(size, entrance_prob=prob, seed=seed)
        fs.update(torch.zeros(s))
        assert len(fs) == size
        ages.append(s - 1 - int(fs.times[0]))
    mean, var = size / prob - 1, size * (1 - prob) / prob**2  # 79, 240
    assert abs(sum(ages) / n_real - mean) <= 5 * math.sqrt(var / n_real)  # tol 3.5


def test_check8c_frequency_storage_quantiles_converge():
    # Empirical q-quantile of L iid U[0, 1] values: sd sqrt(q (1 - q) / L) (density 1).
    size = 2000
    fs = FrequencyStorage(size, entrance_prob=0.5, seed=5)
    g = torch.Generator().manual_seed(6)
    fs.update(torch.rand(20_000, generator=g, dtype=F64))
    q = torch.tensor([0.05, 0.5, 0.95], dtype=F64)
    tol = 5 * torch.sqrt(q * (1 - q) / size)
    assert bool(((fs.quantile(q) - q).abs() <= tol).all()), fs.quantile(q)
    assert fs.quantile(0.05).dim() == 0
    assert float(fs.quantile(0.05)) == float(fs.quantile(q)[0])


# ---------------------------------------------------------------------------------- batches
def make_storages(seed):
    return {
        "geometric": GeometricReservoir(12, 3, seed=seed),
        "geometric_q": GeometricReservoir(12, 3, insert_prob=0.3, seed=seed),
        "uniform": UniformReservoir(12, 3, seed=seed),
        "frequency": FrequencyStorage(12, entrance_prob=0.4, seed=seed),
    }


def feed(storage, X):
    storage.update(X[:, 0] if isinstance(storage, FrequencyStorage) else X)


def content(storage):
    if isinstance(storage, FrequencyStorage):
        return storage.values, storage.times
    return storage.rows, storage.times


@pytest.mark.parametrize("name", ["geometric", "geometric_q", "uniform", "frequency"])
def test_batch_update_equals_sequential_updates(name):
    g = torch.Generator().manual_seed(7)
    X = torch.randn(137, 3, generator=g, dtype=F64)
    single, chunked, whole = (make_storages(21)[name] for _ in range(3))
    for i in range(X.shape[0]):
        feed(single, X[i : i + 1])
    pos = 0
    for size in [5, 4, 9, 1, 0, 30, 88]:  # the second chunk crosses the end of the fill phase
        feed(chunked, X[pos : pos + size])
        pos += size
    assert pos == X.shape[0]
    feed(whole, X)
    for other in (chunked, whole):
        for a, b in zip(content(single), content(other)):
            assert torch.equal(a, b)
        assert other.n_seen == single.n_seen == 137
        assert torch.equal(other.generator.get_state(), single.generator.get_state())
    if name != "frequency":
        assert torch.equal(single.sample(9), whole.sample(9))


def test_sample_splits_consume_the_same_draws():
    a, b = GeometricReservoir(20, 2, seed=8), GeometricReservoir(20, 2, seed=8)
    a.update(stream(50, 2))
    b.update(stream(50, 2))
    assert torch.equal(torch.cat([a.sample(3), a.sample(0), a.sample(17)]), b.sample(20))
    assert torch.equal(a.sample_indices(5), b.sample_indices(5))
    assert torch.equal(a.sample(4), a.rows[b.sample_indices(4)])


def test_geometric_reservoir_replaces_every_row_once_full():
    res = GeometricReservoir(4, 1, seed=9)
    res.update(stream(4))
    assert res.times.tolist() == [0, 1, 2, 3]
    for t in range(4, 40):
        res.update(stream(1, start=t))
        assert t in res.times.tolist()  # insert_prob = 1: the new row always enters
    assert torch.equal(res.rows[:, 0], res.times.to(F64))


# ---------------------------------------------------------------------------------- state
@pytest.mark.parametrize("name", ["geometric", "geometric_q", "uniform", "frequency"])
def test_state_dict_resume_is_bit_exact(name):
    g = torch.Generator().manual_seed(10)
    X1, X2 = torch.randn(60, 3, generator=g, dtype=F64), torch.randn(40, 3, generator=g, dtype=F64)
    a = make_storages(1)[name]
    feed(a, X1)
    state = a.state_dict()
    saved = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in state.items()}
    buffer = io.BytesIO()
    torch.save(state, buffer)

    def continue_(storage):
        feed(storage, X2)
        out = [*content(storage)]
        if name == "frequency":
            out.append(storage.quantile(torch.tensor([0.1, 0.9], dtype=F64)))
        else:
            out.append(storage.sample(11))
        return out

    expected = continue_(a)
    for k, v in saved.items():  # the state is a snapshot, not a view of the live storage
        assert torch.equal(state[k], v) if isinstance(v, torch.Tensor) else state[k] == v
    for loaded in (state, torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)):
        b = make_storages(2)[name]  # a different seed: everything comes from the state
        b.load_state_dict(loaded)
        for x, y in zip(continue_(b), expected):
            assert torch.equal(x, y)
        assert b.seed == a.seed == 1


def test_rolling_extremes_and_fresh_sampler_resume():
    g = torch.Generator().manual_seed(11)
    values = torch.randn(500, generator=g, dtype=F64)
    a = RollingExtremes(50)
    a.update(values[:200])
    b = RollingExtremes(50)
    b.load_state_dict(a.state_dict())
    for ext in (a, b):
        ext.update(values[200:])
    assert (a.min, a.max, a.deque_sizes) == (b.min, b.max, b.deque_sizes)
    assert a.state_dict() == b.state_dict()
    with pytest.raises(ValueError, match="window"):
        RollingExtremes(49).load_state_dict(a.state_dict())

    def draw(n, generator):
        return torch.randn(n, 2, generator=generator, dtype=F64)

    f1 = FreshSampler(draw, 2, seed=3)
    f1.sample(5)
    f2 = FreshSampler(draw, 2, seed=4)
    f2.load_state_dict(f1.state_dict())
    assert torch.equal(f1.sample(7), f2.sample(7))


def test_load_state_dict_rejects_another_configuration():
    res = GeometricReservoir(12, 3, seed=0)
    res.update(stream(20, 3))
    with pytest.raises(ValueError, match="size"):
        GeometricReservoir(11, 3).load_state_dict(res.state_dict())
    with pytest.raises(ValueError, match="insert_prob"):
        GeometricReservoir(12, 3, insert_prob=0.5).load_state_dict(res.state_dict())
    with pytest.raises(ValueError, match="n_features"):
        GeometricReservoir(12, 2).load_state_dict(res.state_dict())
    with pytest.raises(ValueError, match="kind"):
        UniformReservoir(12, 3).load_state_dict(res.state_dict())
    with pytest.raises(ValueError, match="entrance_prob"):
        FrequencyStorage(12, entrance_prob=0.5).load_state_dict(FrequencyStorage(12).state_dict())


def test_seeds():
    a, b = GeometricReservoir(5, 1, seed=None), GeometricReservoir(5, 1, seed=None)
    assert isinstance(a.seed, int) and a.seed != b.seed  # drawn once from the OS (63 bits)
    c = GeometricReservoir(5, 1, seed=a.seed)
    for res in (a, c):
        res.update(stream(30))
    assert torch.equal(a.rows, c.rows) and torch.equal(a.sample(10), c.sample(10))


# ---------------------------------------------------------------------------------- imputer
def id_reservoir(n_rows=30, d=5, seed=0):
    """A full reservoir whose row i has all features equal to i."""
    res = GeometricReservoir(n_rows, d, seed=seed)
    res.update(stream(n_rows, d))
    return res


class SampleOnly:
    """Exposes only ``sample(n)`` of a storage (no ``sample_indices`` / ``rows``)."""

    def __init__(self, storage):
        self.storage = storage

    def sample(self, n):
        return self.storage.sample(n)


def random_mask(b, r, d, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, r, d, generator=g) < 0.4


@pytest.mark.parametrize("wrap", [False, True])
def test_joint_imputer_copies_all_absent_features_from_one_row(wrap):
    b, r, d, n_rows = 4, 6, 5, 30
    storage = id_reservoir(n_rows, d)
    x = -1.0 - torch.arange(b * d, dtype=F64).reshape(b, d)
    mask = random_mask(b, r, d, 12)
    x0, mask0 = x.clone(), mask.clone()
    out = MarginalImputer("joint").impute(x, mask, SampleOnly(storage) if wrap else storage)
    assert out.shape == (b, r, d) and out.dtype == F64
    assert torch.equal(x, x0) and torch.equal(mask, mask0)  # inputs untouched
    present = x.unsqueeze(1).expand(b, r, d)
    assert torch.equal(out[mask], present[mask])
    for i in range(b):
        for j in range(r):
            drawn = out[i, j][~mask[i, j]]
            if drawn.numel():
                assert bool((drawn == drawn[0]).all())  # one stored row per (b, r)
                assert 0 <= drawn[0] < n_rows and drawn[0] == drawn[0].round()


def test_product_imputer_draws_every_absent_feature_separately():
    b, r, d, n_rows = 8, 16, 5, 30
    x = -1.0 - torch.arange(b * d, dtype=F64).reshape(b, d)
    mask = random_mask(b, r, d, 13)
    x0 = x.clone()
    out = MarginalImputer("product").impute(x, mask, id_reservoir(n_rows, d, seed=1))
    assert torch.equal(x, x0)
    assert torch.equal(out[mask], x.unsqueeze(1).expand(b, r, d)[mask])
    absent = out[~mask]
    assert bool(((absent >= 0) & (absent < n_rows)).all())
    # with k >= 2 absent features, all equal has probability 30^-(k-1) <= 1/30 per (b, r)
    multi, constant = 0, 0
    for i in range(b):
        for j in range(r):
            drawn = out[i, j][~mask[i, j]]
            if drawn.numel() >= 2:
                multi += 1
                constant += bool((drawn == drawn[0]).all())
    assert multi >= 50 and constant <= 0.2 * multi  # expected <= 3.3 %
    # the index fast path gives exactly what sample(n) gives from the same generator state
    same = MarginalImputer("product").impute(x, mask, SampleOnly(id_reservoir(n_rows, d, seed=1)))
    assert torch.equal(out, same)


def test_imputer_with_fresh_sampler_and_dtypes():
    def draw(n, generator):  # rows with all features equal to one random integer
        return torch.randint(0, 1000, (n, 1), generator=generator).to(F64).repeat(1, 3)

    x = torch.zeros(2, 3, dtype=torch.float32)
    mask = torch.zeros(2, 50, 3, dtype=torch.bool)
    joint = MarginalImputer("joint").impute(x, mask, FreshSampler(draw, 3, seed=0))
    assert joint.dtype == torch.float32
    assert bool((joint == joint[..., :1]).all())
    product = MarginalImputer("product").impute(x, mask, FreshSampler(draw, 3, seed=0))
    assert not bool((product == product[..., :1]).all())
    full = MarginalImputer().impute(x, ~mask, FreshSampler(draw, 3, seed=0))
    assert torch.equal(full, x.unsqueeze(1).expand(2, 50, 3))


# ---------------------------------------------------------------------------------- validation
def test_constructor_validation():
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="size"):
            GeometricReservoir(bad, 2)
        with pytest.raises(ValueError, match="size"):
            UniformReservoir(bad, 2)
        with pytest.raises(ValueError, match="size"):
            FrequencyStorage(bad)
        with pytest.raises(ValueError, match="window"):
            RollingExtremes(bad)
        with pytest.raises(ValueError, match="n_features"):
            GeometricReservoir(3, bad)
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="insert_prob"):
            GeometricReservoir(3, 2, insert_prob=bad)
        with pytest.raises(ValueError, match="entrance_prob"):
            FrequencyStorage(3, entrance_prob=bad)
    for bad in ("0", 1.5, 2**64):
        with pytest.raises(ValueError, match="seed"):
            GeometricReservoir(3, 2, seed=bad)
    with pytest.raises(ValueError, match="mode"):
        MarginalImputer("conditional")
    with pytest.raises(TypeError, match="draw"):
        FreshSampler(None, 2)


def test_update_and_sample_validation():
    res = GeometricReservoir(3, 2, seed=0)
    with pytest.raises(ValueError, match="is empty"):
        res.sample(1)
    with pytest.raises(ValueError, match="is empty"):
        UniformReservoir(3, 2).sample_indices(1)
    with pytest.raises(ValueError, match=r"X must have shape \[B, d=2\]"):
        res.update(torch.zeros(4, 3))
    with pytest.raises(ValueError, match=r"X must have shape"):
        res.update(torch.zeros(2))
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite"):
            res.update(torch.tensor([[0.0, bad]]))
        with pytest.raises(ValueError, match="finite"):
            RollingExtremes(3).update(torch.tensor([bad]))
        with pytest.raises(ValueError, match="finite"):
            FrequencyStorage(3).update(torch.tensor([1.0, bad]))
    assert res.n_seen == 0 and len(res) == 0  # rejected batches change nothing
    res.update(torch.ones(2, 2))
    with pytest.raises(ValueError, match="n must"):
        res.sample(-1)
    fs = FrequencyStorage(3)
    with pytest.raises(ValueError, match="is empty"):
        fs.quantile(0.5)
    with pytest.raises(ValueError, match=r"values must have shape \[B\]"):
        fs.update(torch.zeros(2, 2))
    fs.update(torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="q must"):
        fs.quantile(1.5)
    ext = RollingExtremes(3)
    with pytest.raises(ValueError, match="is empty"):
        _ = ext.max
    with pytest.raises(ValueError, match="is empty"):
        _ = ext.min

    def bad_draw(n, generator):
        return torch.zeros(n, 3)

    with pytest.raises(ValueError, match=r"expected \[4, 2\]"):
        FreshSampler(bad_draw, 2, seed=0).sample(4)


def test_imputer_validation():
    imp = MarginalImputer()
    storage = id_reservoir(5, 3)
    x = torch.zeros(2, 3, dtype=F64)
    with pytest.raises(ValueError, match=r"x must"):
        imp.impute(torch.zeros(3), torch.ones(2, 1, 3, dtype=torch.bool), storage)
    with pytest.raises(ValueError, match=r"mask must have shape \[B=2, R, d=3\]"):
        imp.impute(x, torch.ones(2, 3, dtype=torch.bool), storage)
    with pytest.raises(ValueError, match=r"mask must have shape"):
        imp.impute(x, torch.ones(1, 4, 3, dtype=torch.bool), storage)
    with pytest.raises(ValueError, match="bool"):
        imp.impute(x, torch.ones(2, 4, 3), storage)

    def wrong(n, generator):
        return torch.zeros(n, 4)

    with pytest.raises(ValueError, match="storage.sample"):
        imp.impute(x, torch.zeros(2, 4, 3, dtype=torch.bool), SampleOnly(FreshSampler(wrong, 4)))
    with pytest.raises(ValueError, match="is empty"):
        imp.impute(x, torch.zeros(2, 4, 3, dtype=torch.bool), GeometricReservoir(3, 3))


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
        ),
    ],
)
def test_device_storage_equals_cpu(device):
    """Rows live on ``device``; the draws come from a CPU generator, so the content and the
    samples are the same as on the CPU."""
    g = torch.Generator().manual_seed(14)
    X = torch.randn(80, 3, generator=g, dtype=F64)
    for make in (
        lambda dev: GeometricReservoir(16, 3, insert_prob=0.7, seed=5, device=dev),
        lambda dev: UniformReservoir(16, 3, seed=5, device=dev),
    ):
        ref, res = make("cpu"), make(device)
        ref.update(X)
        res.update(X.to(device))
        assert res.rows.device.type == device
        assert torch.equal(res.rows.cpu(), ref.rows) and torch.equal(res.times.cpu(), ref.times)
        assert torch.equal(res.sample(7).cpu(), ref.sample(7))
        mask = random_mask(2, 4, 3, 15)
        for mode in ("joint", "product"):
            out = MarginalImputer(mode).impute(X[:2].to(device), mask.to(device), res)
            assert out.device.type == device
            assert torch.equal(out.cpu(), MarginalImputer(mode).impute(X[:2], mask, ref))
        copy = make("cpu")
        copy.load_state_dict(res.state_dict())
        assert torch.equal(copy.sample(5), res.sample(5).cpu())
    ref, fs = (
        FrequencyStorage(10, entrance_prob=0.5, seed=3),
        FrequencyStorage(10, entrance_prob=0.5, seed=3, device=device),
    )
    ref.update(X[:, 0])
    fs.update(X[:, 0].to(device))
    assert torch.equal(fs.values.cpu(), ref.values)
    assert torch.equal(fs.quantile(0.3).cpu(), ref.quantile(0.3))
    ext_ref, ext = RollingExtremes(9), RollingExtremes(9)
    ext_ref.update(X[:, 1])
    ext.update(X[:, 1].to(device))
    assert (ext.min, ext.max) == (ext_ref.min, ext_ref.max)


def test_integer_like_arguments():
    import numpy as np

    res = GeometricReservoir(np.int64(4), np.int32(2), seed=np.int64(3))
    res.update(stream(6, 2))
    assert res.sample(np.int64(3)).shape == (3, 2)
    assert res.size == 4 and isinstance(res.size, int) and res.seed == 3
