"""Tests of the synthetic streams and their drift composition."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from torchstream.streams.base import Stream
from torchstream.streams.synthetic import (
    SEA,
    STAGGER,
    SYNTHETIC,
    Agrawal,
    ConceptDrift,
    Friedman,
    Hyperplane,
    agrawal_drift,
    make_synthetic,
)

N = 300  # rows per stream in the generic tests (Agrawal is the slow one, ~80 us a row)

FACTORIES = {
    "agrawal": lambda seed, n: Agrawal(3, seed=seed, n_samples=n),
    "agrawal-balanced": lambda seed, n: Agrawal(
        0, seed=seed, n_samples=n, balance_classes=True, perturbation=0.1
    ),
    "sea": lambda seed, n: SEA(1, seed=seed, n_samples=n, noise=0.1),
    "stagger": lambda seed, n: STAGGER(1, seed=seed, n_samples=n),
    "stagger-ordinal": lambda seed, n: STAGGER(2, seed=seed, n_samples=n, encoding="ordinal"),
    "hyperplane": lambda seed, n: Hyperplane(5, 2, mag_change=0.01, seed=seed, n_samples=n),
    "friedman": lambda seed, n: Friedman(seed=seed, n_samples=n),
    "drift": lambda seed, n: ConceptDrift(
        SEA(0, seed=seed, n_samples=None),
        SEA(3, seed=seed + 1, n_samples=None),
        position=n // 2,
        width=20,
        seed=seed,
        n_samples=n,
    ),
}


def rows_of(stream: Stream) -> list:
    return list(stream)


# ---------------------------------------------------------------------- every stream
@pytest.mark.parametrize("kind", list(FACTORIES))
def test_rows_match_schema_and_length(kind):
    stream = FACTORIES[kind](0, N)
    rows = rows_of(stream)
    assert len(stream) == N == len(rows)
    names = set(stream.schema.names)
    for x, y in rows:
        assert isinstance(x, dict) and set(x) == names
        if stream.task == "classification":
            assert y in stream.classes
        else:
            assert isinstance(y, float)


@pytest.mark.parametrize("kind", list(FACTORIES))
def test_deterministic_and_seeded(kind):
    stream = FACTORIES[kind](0, N)
    assert rows_of(stream) == rows_of(stream)  # two passes over one stream
    assert rows_of(stream) == rows_of(FACTORIES[kind](0, N))  # same seed, new stream
    assert rows_of(stream) != rows_of(FACTORIES[kind](1, N))


@pytest.mark.parametrize("kind", list(FACTORIES))
def test_batches_shapes_and_dtypes(kind):
    stream = FACTORIES[kind](0, N)
    batches = list(stream.batches(32))
    assert len(batches) == stream.n_batches(32) == math.ceil(N / 32)
    assert sum(len(y) for _, y in batches) == N
    for i, (X, y) in enumerate(batches):
        b = 32 if i < len(batches) - 1 else N - 32 * (len(batches) - 1)
        assert X.shape == (b, stream.n_features) and X.dtype == torch.float32
        assert y.shape == (b,)
        if stream.task == "classification":
            assert y.dtype == torch.long and 0 <= int(y.min()) and int(y.max()) < 2
        else:
            assert y.dtype == torch.float32
        assert torch.isfinite(X).all()


def test_take_and_infinite_streams():
    stream = SEA(seed=0, n_samples=None)
    with pytest.raises(TypeError):
        len(stream)
    assert list(stream.take(0).batches(32)) == []
    assert len(list(stream.take(7))) == 7
    assert list(stream.take(7)) == list(itertools.islice(stream, 7))
    assert list(Agrawal(n_samples=0)) == []


def test_seed_none_fixes_one_seed_per_stream():
    stream = Friedman(seed=None, n_samples=20)
    assert rows_of(stream) == rows_of(stream)


# ---------------------------------------------------------------------- generator details
def test_agrawal_features_are_numeric():
    stream = Agrawal(n_samples=5)
    assert stream.schema.names == Agrawal.FEATURES
    assert all(f.kind == "numeric" for f in stream.schema.features)
    assert stream.n_features == 9 and stream.classes == [0, 1]


def test_sea_keys_renamed_and_thresholds():
    for variant, threshold in enumerate((8, 9, 7, 9.5)):
        for x, y in SEA(variant, seed=3, n_samples=200):
            assert list(x) == ["x0", "x1", "x2"]
            assert y is (x["x0"] + x["x1"] > threshold)
    assert SEA().classes == [False, True]


def test_stagger_onehot_is_valid_and_labels_follow_concepts():
    stream = STAGGER(0, seed=5, n_samples=200)
    assert stream.n_features == 9
    X = torch.cat([X for X, _ in stream.batches(64)])
    assert set(X.unique().tolist()) <= {0.0, 1.0}
    for name in ("size", "color", "shape"):
        block = X[:, stream.schema.feature_columns(name)]
        assert block.shape[1] == 3 and (block.sum(dim=1) == 1).all()
    assert stream.schema.decode(X) == [x for x, _ in stream]
    concepts = {
        0: lambda x: x["size"] == 0 and x["color"] == 0,  # small and red
        1: lambda x: x["color"] == 2 or x["shape"] == 0,  # green or circle
        2: lambda x: x["size"] in (1, 2),  # medium or large
    }
    for f, concept in concepts.items():
        for x, y in STAGGER(f, seed=1, n_samples=100):
            assert y == int(concept(x))
    assert STAGGER(encoding="ordinal").n_features == 3


def test_hyperplane_has_no_single_drift_position():
    stream = Hyperplane(n_features=4, mag_change=0.5, seed=0, n_samples=10)
    assert stream.drift_positions == ()
    assert stream.schema.names == ("x0", "x1", "x2", "x3")


def test_friedman_is_regression():
    stream = Friedman(n_samples=10)
    assert stream.task == "regression" and stream.classes is None
    assert stream.schema.names == tuple(f"x{i}" for i in range(10))


# ---------------------------------------------------------------------- drift composition
def sources(rows, a_rows, b_rows):
    """For each row, whether it is the next unread row of b (True) or of a (False)."""
    ia = ib = 0
    out = []
    for row in rows:
        if ia < len(a_rows) and row == a_rows[ia]:
            out.append(False)
            ia += 1
        else:
            assert ib < len(b_rows) and row == b_rows[ib], "row is neither a's nor b's next row"
            out.append(True)
            ib += 1
    return out


def test_abrupt_drift_switches_exactly_at_position():
    a = Agrawal(0, seed=1, n_samples=None)
    b = Agrawal(0, seed=2, n_samples=None)
    position, n = 150, 400
    rows = rows_of(ConceptDrift(a, b, position=position, n_samples=n))
    assert rows[:position] == rows_of(a.take(position))
    assert rows[position:] == rows_of(b.take(n - position))
    drift = ConceptDrift(a, b, position=position, n_samples=n)
    assert drift.probability(position - 1) == 0.0 and drift.probability(position) == 1.0


def sigmoid(t, position, width):
    return 1.0 / (1.0 + math.exp(-4.0 * (t - position) / width))


def test_gradual_drift_follows_the_sigmoid():
    position, width, n, window = 2000, 800, 4000, 200
    a = Friedman(seed=1, n_samples=None)
    b = Friedman(seed=2, n_samples=None)
    drift = ConceptDrift(a, b, position=position, width=width, seed=7, n_samples=n)
    from_b = sources(rows_of(drift), rows_of(a.take(n)), rows_of(b.take(n)))
    for start in range(0, n, window):
        ps = [sigmoid(t, position, width) for t in range(start, start + window)]
        expected = sum(ps) / window
        observed = sum(from_b[start : start + window]) / window
        # The count of b rows in a window is a sum of independent Bernoulli(p_t) draws, with
        # standard deviation sqrt(sum p_t (1 - p_t)) (about sqrt(p (1 - p) / n) as a
        # fraction). 4 sigma is exceeded with probability < 1e-4 per window; one extra row of
        # slack covers the windows where p is so small that sigma is below one row.
        sigma = math.sqrt(sum(p * (1 - p) for p in ps)) / window
        assert abs(observed - expected) <= 4 * sigma + 1 / window, (start, observed, expected)
    ts = list(range(0, n, 37))
    assert drift.probability(position) == pytest.approx(0.5)
    assert drift.probability(ts).tolist() == pytest.approx(
        [sigmoid(t, position, width) for t in ts]
    )


def test_nested_composition():
    a, b, c = (SEA(0, seed=s, n_samples=None) for s in (1, 2, 3))
    inner = ConceptDrift(a, b, position=100)
    outer = ConceptDrift(inner, c, position=250, n_samples=400, seed=1)
    assert inner.n_samples is None and inner.drift_positions == (100,)
    assert outer.drift_positions == (100, 250) and len(outer) == 400
    rows = rows_of(outer)
    assert rows[:100] == rows_of(a.take(100))
    assert rows[100:250] == rows_of(b.take(150))
    assert rows[250:] == rows_of(c.take(150))
    # Drifts of b are shifted by the position; drifts past the end are dropped.
    late = ConceptDrift(a, ConceptDrift(b, c, position=50), position=100, n_samples=300)
    assert late.drift_positions == (100, 150)
    assert ConceptDrift(a, ConceptDrift(b, c, 500), 100, n_samples=300).drift_positions == (100,)
    # Drifts of a after the position are never seen.
    assert ConceptDrift(inner, c, position=80, n_samples=200).drift_positions == (80,)


def test_agrawal_drift_is_visible():
    position, n = 1000, 2000
    stream = agrawal_drift(n_samples=n, position=position, seed=0)
    assert len(stream) == n and stream.drift_positions == (position,)

    def function_0(x):  # river: class 1 when age < 40 or age >= 60, class 0 otherwise
        return int(x["age"] < 40 or x["age"] >= 60)

    agree = [function_0(x) == y for x, y in stream]
    before = sum(agree[:position]) / position
    after = sum(agree[position:]) / (n - position)
    assert before == 1.0
    # Function 2 agrees with function 0 on about 47% of the rows (sd ~1.6% over 1000 rows).
    assert after < 0.6


def test_concept_drift_length_and_supply():
    a = SEA(0, seed=1, n_samples=100)
    b = SEA(3, seed=2, n_samples=120)
    assert len(ConceptDrift(a, b, position=50)) == 100  # the shorter one by default
    assert len(ConceptDrift(a, SEA(3, n_samples=None), position=50)) == 100
    assert ConceptDrift(SEA(n_samples=None), SEA(n_samples=None), 10).n_samples is None
    ok = ConceptDrift(a, b, position=50, n_samples=170)  # a gives 50 rows, b gives 120
    assert len(rows_of(ok)) == 170
    with pytest.raises(ValueError, match="row 170 would be row 120 of b"):
        ConceptDrift(a, b, position=50, n_samples=171)
    with pytest.raises(ValueError, match="of a, which has only 100 rows"):
        ConceptDrift(a, b, position=110, n_samples=115)


def test_concept_drift_classes_and_task():
    stream = ConceptDrift(SEA(seed=1), SEA(seed=2), position=10)
    assert stream.task == "classification" and stream.classes == [False, True]
    regression = ConceptDrift(Friedman(seed=1), Friedman(seed=2), position=10)
    assert regression.task == "regression" and regression.classes is None


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: Agrawal(10), "classification_function"),
        (lambda: Agrawal(perturbation=1.5), "perturbation"),
        (lambda: STAGGER(3), "classification_function"),
        (lambda: STAGGER(encoding="binary"), "encoding"),
        (lambda: SEA(4), "variant"),
        (lambda: SEA(noise=-0.1), "noise"),
        (lambda: Hyperplane(n_features=0), "n_features"),
        (lambda: Hyperplane(n_features=3, n_drift_features=4), "n_drift_features"),
        (lambda: Hyperplane(mag_change=2.0), "mag_change"),
        (lambda: Hyperplane(sigma=-1), "sigma"),
        (lambda: Hyperplane(noise_percentage=1.1), "noise_percentage"),
        (lambda: Friedman(n_samples=-1), "n_samples"),
        (lambda: Friedman(seed="a"), "seed"),
        (lambda: ConceptDrift(SEA(), SEA(), position=10, seed=-1), "seed"),
        (lambda: ConceptDrift(SEA(), SEA(), position=0), "position"),
        (lambda: ConceptDrift(SEA(), SEA(), position=1.5), "position"),
        (lambda: ConceptDrift(SEA(), SEA(), position=10, width=0), "width"),
        (lambda: ConceptDrift(SEA(), SEA(), position=10_000), r"position \(10000\)"),
        (lambda: ConceptDrift(SEA(), Friedman(), position=10), "feature names differ"),
        (lambda: ConceptDrift(STAGGER(), STAGGER(encoding="ordinal"), 10), "encoding"),
        (lambda: ConceptDrift(Hyperplane(), Friedman(), position=10), "same task"),
        (lambda: ConceptDrift(SEA(), Hyperplane(n_features=3), position=10), "same classes"),
        (lambda: make_synthetic("sine"), "known: agrawal, agrawal-drift, sea"),
        (lambda: make_synthetic("sea", n_samples=-5), "n_samples"),
    ],
)
def test_bad_arguments(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_concept_drift_needs_streams():
    with pytest.raises(TypeError, match="b must be a Stream"):
        ConceptDrift(SEA(), [1, 2], position=1)


# ---------------------------------------------------------------------- registry
@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_registry(name):
    stream = make_synthetic(name, n_samples=150, seed=3)
    assert isinstance(stream, Stream) and stream.name == name
    assert len(rows_of(stream)) == len(stream) == 150
    if name.endswith("-drift"):
        assert stream.drift_positions and all(0 < p < 150 for p in stream.drift_positions)
    assert rows_of(stream) == rows_of(make_synthetic(name, n_samples=150, seed=3))


def test_registry_defaults():
    stream = make_synthetic("agrawal-drift")
    assert len(stream) == 10_000 and stream.drift_positions == (5_000,)
    assert make_synthetic("stagger-drift").drift_positions == (3_333, 6_666)
