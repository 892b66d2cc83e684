"""Tests of the in-memory streams: CSV files (the shared real data sets), numpy, pandas, river
datasets, and the batching contract shared by ``TableStream`` and the generic ``Stream``."""

from __future__ import annotations

import collections
import csv
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from torchstream.schema import MISSING, Feature, Schema
from torchstream.streams import (
    Stream,
    TableStream,
    data_path,
    from_numpy,
    from_pandas,
    from_river,
    infer_task,
    read_csv,
)

NAN = float("nan")


# ---------------------------------------------------------------------- real data sets
@dataclass
class Loaded:
    stream: TableStream
    header: list[str]
    raw: list[list[str]]  # the data lines, read independently with the csv module

    def col(self, name: str) -> list[str]:
        j = self.header.index(name)
        return [r[j] for r in self.raw]

    def value(self, row: int, column: str) -> float:
        """The encoded value of ``column`` (an encoded column name) in ``row``."""
        return float(self.stream.X[row, self.stream.schema.columns.index(column)])


def _load(name: str, target: str, **kwargs: Any) -> Loaded:
    path = data_path(name)
    if not path.exists():
        pytest.skip(f"data file {name} not found at {path} (set TORCHSTREAM_DATA to its folder)")
    with path.open(newline="") as fh:
        header, *raw = list(csv.reader(fh))
    return Loaded(read_csv(path, target, **kwargs), header, raw)


@pytest.fixture(scope="module")
def electricity() -> Loaded:
    return _load("electricity.csv", "class")


@pytest.fixture(scope="module")
def spambase() -> Loaded:
    return _load("spambase.csv", "class")


BIKE_DROP = ["instant", "dteday", "casual", "registered"]


@pytest.fixture(scope="module")
def bike() -> Loaded:
    return _load("bike_hour.csv", "cnt", drop=BIKE_DROP)


@pytest.fixture(scope="module")
def housing() -> Loaded:
    return _load("california_housing.csv", "median_house_value")


@pytest.fixture(scope="module")
def adult() -> Loaded:
    return _load("adult.csv", "income")


def test_data_path_honours_env(monkeypatch, tmp_path, data_dir):
    # conftest points $TORCHSTREAM_DATA at the shared data folder
    assert data_path("electricity.csv") == data_dir / "electricity.csv"
    monkeypatch.setenv("TORCHSTREAM_DATA", str(tmp_path))
    assert data_path("x.csv") == tmp_path / "x.csv"
    monkeypatch.delenv("TORCHSTREAM_DATA")
    monkeypatch.chdir(tmp_path)
    assert data_path("x.csv") == tmp_path.parent / "shared" / "data" / "x.csv"


def _check_numeric_rows(d: Loaded, target: str, rows: list[int], skip: tuple[str, ...] = ()):
    for i in rows:
        for j, name in enumerate(d.header):
            if name == target or name in skip or d.raw[i][j] == "":
                continue
            assert d.value(i, name) == float(d.raw[i][j]), (i, name)


def _check_class_counts(d: Loaded, target: str) -> collections.Counter:
    raw_counts = collections.Counter(d.col(target))
    s = d.stream
    counts = torch.bincount(s.y, minlength=s.n_classes).tolist()
    assert {str(c): n for c, n in zip(s.classes, counts)} == dict(raw_counts)
    return raw_counts


def test_electricity(electricity):
    d, s = electricity, electricity.stream
    assert len(s) == len(d.raw) == 45_312 and s.name == "electricity"
    assert s.task == "classification" and s.classes == [0, 1]
    assert s.schema.columns == tuple(d.header[:-1]) and s.n_features == 8
    assert all(f.kind == "numeric" and not f.nullable for f in s.schema.features)
    assert s.X.shape == (45_312, 8) and s.X.dtype == torch.float64 and s.y.dtype == torch.long
    _check_numeric_rows(d, "class", [0, 1, 12_345, 45_311])
    counts = _check_class_counts(d, "class")
    assert counts["0"] + counts["1"] == 45_312
    # the batch path on real data: all rows, in order
    parts = list(s.batches(10_000, dtype=torch.float64))
    assert [len(x) for x, _ in parts] == [10_000] * 4 + [5_312]
    assert torch.equal(torch.cat([x for x, _ in parts]), s.X)
    assert torch.equal(torch.cat([y for _, y in parts]), s.y)


def test_spambase(spambase):
    d, s = spambase, spambase.stream
    assert len(s) == 4_601 and s.n_features == 57 and s.schema.n_features == 57
    assert s.task == "classification" and s.classes == [0, 1]
    _check_numeric_rows(d, "class", [0, 1, 2_000, 4_600])
    assert dict(_check_class_counts(d, "class")) == {"0": 2_788, "1": 1_813}


def test_bike_hour(bike):
    d, s = bike, bike.stream
    assert len(s) == 17_379 and s.task == "regression" and s.classes is None
    expected = [h for h in d.header if h not in BIKE_DROP and h != "cnt"]
    assert len(expected) == 12 and list(s.schema.columns) == expected
    _check_numeric_rows(d, "cnt", [0, 1, 9_999, 17_378], skip=tuple(BIKE_DROP))
    assert s.y.dtype == torch.float32
    assert s.y.tolist() == [float(v) for v in d.col("cnt")]


def test_california_housing(housing):
    d, s = housing, housing.stream
    schema = s.schema
    assert len(s) == 20_640 and s.task == "regression"
    by = {f.name: f for f in schema.features}
    assert schema.n_features == 9
    bedrooms = by["total_bedrooms"]
    assert bedrooms.kind == "numeric" and bedrooms.nullable
    assert [f.name for f in schema.features if f.nullable] == ["total_bedrooms"]
    raw_beds = d.col("total_bedrooms")
    assert bedrooms.fill_value == 0.0  # a lone row encoded by the schema
    ocean = by["ocean_proximity"]
    assert ocean.kind == "categorical" and not ocean.nullable
    assert len(ocean.categories) == 5 and set(ocean.categories) == set(d.col("ocean_proximity"))
    assert ocean.categories[0] == d.raw[0][-1]  # order of first appearance
    assert schema.n_columns == 8 + 1 + 5
    # the missing indicator counts the empty cells
    indicator = s.X[:, schema.columns.index("total_bedrooms:missing")]
    n_empty = raw_beds.count("")
    assert n_empty > 0 and int(indicator.sum()) == n_empty
    assert indicator.nonzero().flatten().tolist() == [i for i, v in enumerate(raw_beds) if v == ""]
    first_missing = raw_beds.index("")
    earlier = [float(v) for v in raw_beds[:first_missing]]  # causal: the mean of earlier rows
    assert d.value(first_missing, "total_bedrooms") == pytest.approx(sum(earlier) / len(earlier))
    assert d.value(first_missing, "total_bedrooms:missing") == 1.0
    rows = [0, 1, first_missing, 20_639]
    _check_numeric_rows(d, "median_house_value", rows, skip=("ocean_proximity",))
    for i in rows:
        onehot = s.X[i, schema.feature_columns("ocean_proximity")]
        assert onehot.sum() == 1.0 and d.value(i, f"ocean_proximity={d.raw[i][-1]}") == 1.0
        assert d.value(i, "total_bedrooms:missing") == float(raw_beds[i] == "")
    assert s.y.tolist() == [float(v) for v in d.col("median_house_value")]
    # the raw rows keep None for the missing cells
    row, label = next(itertools.islice(iter(s), first_missing, None))
    assert row["total_bedrooms"] is None and label == int(float(d.raw[first_missing][8]))


def test_adult(adult):
    d, s = adult, adult.stream
    schema = s.schema
    assert len(s) == 32_561 and s.task == "classification"
    assert s.classes == ["<=50K", ">50K"]
    assert dict(_check_class_counts(d, "income")) == {"<=50K": 24_720, ">50K": 7_841}
    assert schema.n_features == 14 and list(schema.names) == d.header[:-1]
    categorical = [f.name for f in schema.features if f.kind == "categorical"]
    assert categorical == [
        "workclass",
        "education",
        "marital_status",
        "occupation",
        "relationship",
        "race",
        "sex",
        "native_country",
    ]
    with_q = [h for h in d.header if "?" in d.col(h)]
    assert [f.name for f in schema.features if f.nullable] == with_q
    assert set(with_q) == {"workclass", "occupation", "native_country"}
    assert schema.n_columns == sum(
        1 if f.kind == "numeric" else len(f.categories) + f.nullable for f in schema.features
    )
    for f in schema.features:
        raw = d.col(f.name)
        if f.kind == "categorical":
            assert "?" not in f.categories
            assert set(f.categories) == set(raw) - {"?"}
            if f.nullable:  # one '<missing>' per '?' cell
                n_missing = int(s.X[:, schema.columns.index(f"{f.name}={MISSING}")].sum())
                assert n_missing == raw.count("?") > 0
    rows = [0, 1, 27, 32_560]  # row 27 has '?' for workclass and occupation
    assert d.raw[27][1] == "?"
    for i in rows:
        for j, name in enumerate(d.header[:-1]):
            v = d.raw[i][j]
            block = s.X[i, schema.feature_columns(name)]
            if schema.features[j].kind == "numeric":
                assert block.tolist() == [float(v)]
            else:
                col = f"{name}={MISSING if v == '?' else v}"
                assert block.sum() == 1.0 and d.value(i, col) == 1.0, (i, name)
    row, label = next(itertools.islice(iter(s), 27, None))
    assert row["workclass"] is None and row["age"] == float(d.raw[27][0])
    assert label == d.raw[27][-1]


# ---------------------------------------------------------------------- CSV: bad input
def write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def numeric_lines(n: int, start: int = 0) -> str:
    return "".join(f"{i},{i % 3},{i % 2}\n" for i in range(start, start + n))


def test_read_csv_small_file_kinds_and_values(tmp_path):
    p = write(tmp_path, "a,b,c,y\n1, red ,x,yes\n?,blue,NA,no\n3.5,red,x,yes\n")
    s = read_csv(p, "y", missing=("?", "NA"))
    assert s.schema.features == (
        Feature("a", nullable=True, fill_value=0.0),  # fill_value: a row encoded on its own
        Feature("b", "categorical", ("red", "blue")),  # values are stripped
        Feature("c", "categorical", ("x",), nullable=True),
    )
    assert s.classes == ["no", "yes"] and s.y.tolist() == [1, 0, 1]
    # the missing 'a' of row 1 gets the mean of the earlier rows (row 0), never of row 2
    assert s.X.tolist() == [[1, 0, 1, 0, 1, 0], [1.0, 1, 0, 1, 0, 1], [3.5, 0, 1, 0, 1, 0]]
    assert [r for r, _ in s] == [
        {"a": 1.0, "b": "red", "c": "x"},
        {"a": None, "b": "blue", "c": None},
        {"a": 3.5, "b": "red", "c": "x"},
    ]


def test_read_csv_options(tmp_path):
    p = write(tmp_path, "a;b;y\n" + "".join(f"{i};{i * 10};{i / 2}\n" for i in range(6)))
    s = read_csv(p, "y", delimiter=";", nrows=4, categorical=["b"], name="semi")
    assert len(s) == 4 and s.name == "semi" and s.task == "regression"
    assert s.schema.features[1] == Feature("b", "categorical", ("0", "10", "20", "30"))
    assert s.y.tolist() == [0.0, 0.5, 1.0, 1.5]
    s = read_csv(p, "y", delimiter=";", drop=["a"], task="classification")
    assert s.schema.names == ("b",) and s.classes == [0, 0.5, 1, 1.5, 2, 2.5]
    s = read_csv(write(tmp_path, "a,y\n1,3\n\n2,4\n\n"), "y")  # blank lines are skipped
    assert s.X.tolist() == [[1.0], [2.0]] and s.classes == [3, 4]


def test_read_csv_mostly_text_column_is_categorical(tmp_path):
    p = write(tmp_path, "a,y\n1,0\nx,1\ny,0\nz,1\n")
    with pytest.raises(ValueError, match=r"line 2, column 'a': numeric value '1' in a column of "
                                         r"strings — 1 number and 3 strings such as 'x', 'y', 'z'"):
        read_csv(p, "y")  # numbers and strings in one column: declared, never guessed
    s = read_csv(p, "y", categorical=["a"])
    assert s.schema.features[0] == Feature("a", "categorical", ("1", "x", "y", "z"))
    with pytest.raises(ValueError, match=r"line 3, column 'a': non-numeric value 'x'"):
        read_csv(p, "y", numeric=["a"])


def test_ragged_line(tmp_path):
    p = write(tmp_path, "a,b,y\n1,2,0\n3,4\n5,6,1\n")
    with pytest.raises(ValueError, match=r"t\.csv, line 3: 2 fields, expected 3"):
        read_csv(p, "y")
    p = write(tmp_path, "a,b,y\n1,2,0\n3,4,1,9\n")
    with pytest.raises(ValueError, match=r"line 3: 4 fields, expected 3"):
        read_csv(p, "y")


def test_non_numeric_value_in_numeric_column(tmp_path):
    text = "a,b,y\n" + numeric_lines(6) + "7,abc,1\n" + numeric_lines(6, 7)
    with pytest.raises(
        ValueError, match=r"t\.csv, line 8, column 'b': non-numeric value 'abc' in a numeric column"
    ):
        read_csv(write(tmp_path, text), "y")
    # declared categorical, the column is kept
    s = read_csv(write(tmp_path, text), "y", categorical=["b"])
    assert s.schema.features[1].kind == "categorical" and "abc" in s.schema.features[1].categories


def test_line_numbers_count_blank_lines(tmp_path):
    text = "a,b,y\n\n" + numeric_lines(3) + "\n\n" + numeric_lines(9, 3) + "12,abc,0\n"
    with pytest.raises(ValueError, match=r"line 17, column 'b': non-numeric value 'abc'"):
        read_csv(write(tmp_path, text), "y")
    assert text.splitlines()[16] == "12,abc,0"
    with pytest.raises(ValueError, match=r"line 5, column 'a': non-finite value 'inf'"):
        read_csv(write(tmp_path, "a,y\n1,0\n\n\ninf,1\n"), "y")
    with pytest.raises(ValueError, match=r"line 4: missing value in the target column 'y'"):
        read_csv(write(tmp_path, "a,y\n1,0\n\n2,\n"), "y")


@pytest.mark.parametrize("token", ["", "?", "NA", " ? ", "nan"])
def test_missing_target(tmp_path, token):
    p = write(tmp_path, f"a,y\n1,0\n2,1\n3,{token}\n")
    with pytest.raises(ValueError, match=r"t\.csv, line 4: missing value in the target column 'y'"):
        read_csv(p, "y")


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "1e999", "-NaN"])
def test_non_finite_value(tmp_path, value):
    p = write(tmp_path, f"a,b,y\n1,2,0\n3,{value},1\n")
    with pytest.raises(ValueError, match=rf"line 3, column 'b': non-finite value '{value}'"):
        read_csv(p, "y")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": "z"}, r"target names unknown columns \['z'\]"),
        ({"target": "y", "drop": ["a", "q"]}, r"drop names unknown columns \['q'\]"),
        ({"target": "y", "categorical": ["c"]}, r"categorical names unknown columns \['c'\]"),
        ({"target": "y", "numeric": ["n"]}, r"numeric names unknown columns \['n'\]"),
    ],
)
def test_unknown_column_names(tmp_path, kwargs, message):
    p = write(tmp_path, "a,b,y\n1,2,0\n")
    with pytest.raises(ValueError, match=message + r" \(columns: \['a', 'b', 'y'\]\)"):
        read_csv(p, **kwargs)


def test_empty_header_only_duplicate_header_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"t\.csv: the file is empty"):
        read_csv(write(tmp_path, ""), "y")
    with pytest.raises(ValueError, match=r"t\.csv: no data rows after the header"):
        read_csv(write(tmp_path, "a,b,y\n"), "y")
    with pytest.raises(ValueError, match=r"t\.csv: no data rows after the header"):
        read_csv(write(tmp_path, "a,b,y\n\n\n"), "y")
    with pytest.raises(ValueError, match=r"t\.csv: duplicate column names \['a'\]"):
        read_csv(write(tmp_path, "a,b,a,y\n1,2,3,0\n"), "y")
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        read_csv(tmp_path / "nope.csv", "y")


def test_numeric_forces_error_for_categorical_looking_column(tmp_path):
    p = write(tmp_path, "color,y\nred,0\nblue,1\n3,0\n")
    with pytest.raises(ValueError, match=r"line 4, column 'color': numeric value '3' in a column"):
        read_csv(p, "y")
    assert read_csv(p, "y", categorical=["color"]).schema.features[0].kind == "categorical"
    with pytest.raises(
        ValueError,
        match=r"line 2, column 'color': non-numeric value 'red' .*"
        r"\(2 such values\)",
    ):
        read_csv(p, "y", numeric=["color"])


# ---------------------------------------------------------------------- numpy
def test_from_numpy():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    y = rng.integers(0, 3, size=50)
    s = from_numpy(X, y, name="np")
    assert len(s) == 50 and s.n_features == 3 and s.name == "np"
    assert s.schema.columns == ("x0", "x1", "x2")
    assert s.task == "classification" and s.classes == [0, 1, 2]
    assert torch.equal(s.X, torch.from_numpy(X)) and s.y.tolist() == y.tolist()
    named = from_numpy(torch.from_numpy(X), torch.from_numpy(X[:, 0]), feature_names=["a", "b", 7])
    assert named.schema.names == ("a", "b", 7) and named.task == "regression"
    assert named.y.tolist() == pytest.approx(X[:, 0].tolist())
    forced = from_numpy(X, y, task="regression")
    assert forced.task == "regression" and forced.y.dtype == torch.float32
    bools = from_numpy(X, y > 0)
    assert bools.classes == [False, True] and bools.y.tolist() == (y > 0).astype(int).tolist()


def test_from_numpy_errors():
    X = np.zeros((4, 3))
    with pytest.raises(ValueError, match=r"X must be 2-dimensional"):
        from_numpy(np.zeros(4), np.zeros(4))
    with pytest.raises(ValueError, match=r"y must have shape \[4\]"):
        from_numpy(X, np.zeros(5))
    with pytest.raises(ValueError, match=r"y must have shape \[4\]"):
        from_numpy(X, np.zeros((4, 1)))
    with pytest.raises(ValueError, match=r"feature_names has 2 names for 3 columns"):
        from_numpy(X, np.zeros(4), feature_names=["a", "b"])
    with pytest.raises(ValueError, match=r"X must be numeric"):
        from_numpy(np.array([["a", "b"], ["c", "d"]]), np.zeros(2))
    for bad in (NAN, float("inf")):
        Xb = X.copy()
        Xb[2, 1] = bad
        with pytest.raises(ValueError, match=r"row 2, column 1: non-finite value"):
            from_numpy(Xb, np.zeros(4))
    with pytest.raises(ValueError, match=r"row 1: regression target nan is not finite"):
        from_numpy(X, np.array([0.5, NAN, 1.5, 2.5]))


# ---------------------------------------------------------------------- pandas
def test_from_pandas():
    frame = pd.DataFrame(
        {
            "num": [1.0, 2.0, NAN, 4.0],
            "count": [1, 2, 3, 4],
            "color": ["red", "blue", None, "red"],
            "flag": [True, False, True, True],
            "drop_me": ["x"] * 4,
            "label": ["b", "a", "b", "c"],
        }
    )
    s = from_pandas(frame, "label", drop=["drop_me"], name="pd")
    by = {f.name: f for f in s.schema.features}
    assert list(by) == ["num", "count", "color", "flag"]
    assert by["num"] == Feature("num", nullable=True, fill_value=0.0)
    assert by["count"] == Feature("count", fill_value=2.5)
    assert by["color"] == Feature("color", "categorical", ("red", "blue"), nullable=True)
    assert by["flag"] == Feature("flag", "categorical", (True, False))
    assert s.task == "classification" and s.classes == ["a", "b", "c"]
    assert s.y.tolist() == [1, 0, 1, 2]
    expected = s.schema.encode(frame.drop(columns=["label", "drop_me"]), dtype=torch.float64)
    expected[2, 0] = 1.5  # the missing 'num' of row 2: the mean of rows 0 and 1, never of row 3
    assert torch.equal(s.X, expected)
    assert s.X[2].tolist() == [1.5, 1, 3, 0, 0, 1, 1, 0]
    rows = [r for r, _ in s]
    assert rows[2]["num"] is None and rows[2]["color"] is None
    cat = from_pandas(frame.astype({"color": "category"}), "label", categorical=["count"])
    assert cat.schema.features[1] == Feature("count", "categorical", (1, 2, 3, 4))
    assert cat.schema.features[2].kind == "categorical"


def test_from_pandas_errors():
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "y": [0.5, NAN, 1.0]})
    with pytest.raises(ValueError, match=r"row 1: missing value in the target column 'y'"):
        from_pandas(frame, "y")
    frame = pd.DataFrame({"a": [1.0, 2.0], "y": ["u", None]})
    with pytest.raises(ValueError, match=r"row 1: missing value in the target column 'y'"):
        from_pandas(frame, "y")
    with pytest.raises(ValueError, match=r"target column 'z' not in the frame's columns"):
        from_pandas(frame, "z")
    with pytest.raises(ValueError, match=r"cannot drop unknown columns \['q'\]"):
        from_pandas(frame, "y", drop=["q"])
    frame = pd.DataFrame({"a": [1.0, float("inf")], "y": [0, 1]})
    with pytest.raises(ValueError, match=r"row 1, column 'a': infinite"):
        from_pandas(frame, "y")


# ---------------------------------------------------------------------- river
def test_from_river_phishing():
    datasets = pytest.importorskip("river.datasets")
    ds = datasets.Phishing()
    s = from_river(ds)
    assert len(s) == 1_250 and s.n_features == 9 and s.schema.n_features == 9
    assert s.task == "classification" and s.classes == [False, True] and s.name == "Phishing"
    rows, labels = zip(*ds)
    assert s.y.tolist() == [int(v) for v in labels]
    assert s.X.tolist() == [[float(r[n]) for n in s.schema.names] for r in rows]
    assert len(from_river(ds, n_samples=100)) == 100


def test_from_river_trump_approval_regression():
    datasets = pytest.importorskip("river.datasets")
    ds = datasets.TrumpApproval()
    s = from_river(ds)
    assert len(s) == 1_001 and s.task == "regression" and s.classes is None
    assert s.n_features == 6
    labels = [y for _, y in ds]
    assert s.y.tolist() == pytest.approx(labels)


def test_from_river_plain_iterable():
    data = [({"a": i, "c": "xy"[i % 2]}, i % 3 == 0) for i in range(10)]
    s = from_river(data, name="plain")
    assert s.name == "plain" and s.task == "classification" and s.classes == [False, True]
    assert s.schema.columns == ("a", "c=x", "c=y")
    assert [r for r, _ in s] == [r for r, _ in data]
    with pytest.raises(ValueError, match="has no rows"):
        from_river([])


# ---------------------------------------------------------------------- batches
def table(task: str = "classification", n: int = 10) -> TableStream:
    rows = [
        {"x": float(i), "opt": None if i % 4 == 0 else i / 2, "c": "abc"[i % 3]} for i in range(n)
    ]
    if task == "classification":
        labels: list[Any] = ["no" if i % 3 else "yes" for i in range(n)]
    else:
        labels = [i * 1.5 for i in range(n)]
    schema = Schema.infer(rows)
    return TableStream(schema.encode(rows, dtype=torch.float64), labels, schema, rows=rows)


class RowStream(Stream):
    """The generic row-based path: a minimal ``Stream`` over another stream's rows."""

    def __init__(self, base: Stream, *, fixed_classes: bool = True) -> None:
        super().__init__(
            base.schema,
            task=base.task,
            classes=base.classes if fixed_classes else None,
            n_samples=base.n_samples,
        )
        self.base = base

    def _rows(self) -> Iterator[tuple[dict, Any]]:
        return iter(self.base)


def test_tablestream_batch_sizes():
    s = table()
    assert len(s) == 10 and s.n_batches(3) == 4 and s.n_batches(3, start=8) == 1
    assert [len(x) for x, _ in s.batches(3)] == [3, 3, 3, 1]
    assert [len(y) for _, y in s.batches(3)] == [3, 3, 3, 1]
    assert [len(x) for x, _ in s.batches(10)] == [10]
    assert [len(x) for x, _ in s.batches(100)] == [10]
    assert [len(x) for x, _ in s.batches(3, start=2, stop=8)] == [3, 3]
    assert [len(x) for x, _ in s.batches(4, start=1, stop=8)] == [4, 3]
    assert [len(x) for x, _ in s.batches(3, stop=100)] == [3, 3, 3, 1]
    assert list(s.batches(3, start=10)) == [] and list(s.batches(3, start=5, stop=5)) == []
    for bad in (0, -1, 2.0):
        with pytest.raises(ValueError, match="batch size must be a positive integer"):
            next(s.batches(bad))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="start must be >= 0"):
        next(s.batches(2, start=-1))


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_tablestream_batches_equal_row_by_row_encoding(task):
    s = table(task, n=11)
    rows = list(s)
    X = torch.cat([x for x, _ in s.batches(4)])
    assert X.dtype == torch.float32
    assert torch.equal(X, s.schema.encode([r for r, _ in rows]))
    assert torch.equal(torch.stack([s.schema.encode_one(r) for r, _ in rows]), X)
    y = torch.cat([y for _, y in s.batches(4)])
    assert torch.equal(y, s.encode_targets([lab for _, lab in rows]))
    if task == "classification":
        assert y.dtype == torch.long and s.classes == ["no", "yes"]
        assert y.tolist() == [s.classes.index(lab) for _, lab in rows]
    else:
        assert y.dtype == torch.float32 and y.tolist() == [lab for _, lab in rows]
    sub = list(s.batches(2, start=3, stop=8))
    assert torch.equal(torch.cat([x for x, _ in sub]), X[3:8])
    assert torch.equal(torch.cat([y for _, y in sub]), y[3:8])


DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
    ),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_batches_dtype_and_device(device, dtype):
    s = table()
    for stream in (s, RowStream(s)):
        X, y = next(stream.batches(4, dtype=dtype, device=device))
        assert X.dtype == dtype and X.device.type == device and y.device.type == device
        assert y.dtype == torch.long
        assert torch.equal(X.cpu(), s.X[:4].to(dtype))


def test_iterating_twice_gives_the_same_rows():
    for s in (table(), from_numpy(np.arange(12.0).reshape(6, 2), np.arange(6) % 2)):
        first, second = list(s), list(s)
        assert first == second and len(first) == len(s)
        assert [len(list(s.batches(4))) for _ in range(2)] == [s.n_batches(4)] * 2
    plain = from_numpy(np.arange(6.0).reshape(3, 2), np.array([0, 1, 0]), feature_names=["a", "b"])
    assert list(plain) == [
        ({"a": 0.0, "b": 1.0}, 0),
        ({"a": 2.0, "b": 3.0}, 1),
        ({"a": 4.0, "b": 5.0}, 0),
    ]


def test_take():
    s = table(n=10)
    t = s.take(4)
    assert len(t) == 4 and t.n_samples == 4 and t.classes == s.classes
    assert list(t) == list(s)[:4]
    assert [len(x) for x, _ in t.batches(3)] == [3, 1]
    assert torch.equal(torch.cat([x for x, _ in t.batches(3)]), s.X[:4].float())
    assert [len(x) for x, _ in t.batches(3, start=2)] == [2]
    assert [len(x) for x, _ in t.batches(3, stop=100)] == [3, 1]
    assert [len(x) for x, _ in t.batches(3, start=1, stop=3)] == [2]
    assert len(s.take(100)) == 10 and len(s.take(0)) == 0 and list(s.take(0).batches(2)) == []
    assert len(t.take(2)) == 2 and list(t.take(2)) == list(s)[:2]
    with pytest.raises(ValueError, match=r"take\(n\) needs n >= 0"):
        s.take(-1)


def test_tablestream_properties_and_errors():
    s = table()
    assert s.X.dtype == torch.float64 and s.X.shape == (10, s.schema.n_columns)
    assert s.n_features == s.schema.n_columns and s.n_classes == 2
    assert repr(s).startswith("TableStream(name='TableStream', task='classification', n_samples=10")
    with pytest.raises(ValueError, match=r"X must have shape \[n, 6\]"):
        TableStream(torch.zeros(3, 5), [0, 1, 0], s.schema)
    with pytest.raises(ValueError, match="X has 3 rows but there are 2 labels"):
        TableStream(torch.zeros(3, 6), [0, 1], s.schema)
    with pytest.raises(ValueError, match="2 raw rows for 3 labels"):
        TableStream(torch.zeros(3, 6), [0, 1, 0], s.schema, rows=[{}, {}])
    with pytest.raises(ValueError, match=r"row 1: label 'maybe' is not one of the stream's"):
        TableStream(torch.zeros(2, 6), ["no", "maybe"], s.schema, classes=["no", "yes"])
    empty = TableStream(torch.zeros(0, 6), [], s.schema)
    assert len(empty) == 0 and empty.task == "regression" and list(empty.batches(3)) == []


@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize(
    ("size", "start", "stop"),
    [
        (3, 0, None),
        (4, 0, None),
        (1, 0, 5),
        (3, 2, 9),
        (5, 7, None),
        (2, 0, 100),
        (3, 10, None),
        (20, 0, None),
    ],
)
def test_generic_stream_batches_match_tablestream(task, size, start, stop):
    s = table(task, n=11)
    generic = RowStream(s)
    assert len(generic) == 11 and generic.n_batches(size, start) == s.n_batches(size, start)
    got = list(generic.batches(size, start=start, stop=stop))
    want = list(s.batches(size, start=start, stop=stop))
    assert len(got) == len(want)
    for (xg, yg), (xw, yw) in zip(got, want):
        assert torch.equal(xg, xw) and torch.equal(yg, yw)
        assert xg.dtype == xw.dtype and yg.dtype == yw.dtype


def test_generic_stream_with_open_classes_registers_labels_before_start():
    s = table(n=11)
    open_ = RowStream(s, fixed_classes=False)
    assert open_.classes == []
    y_tail = torch.cat([y for _, y in open_.batches(3, start=2)])
    # rows 0 and 1 ("yes", "no") were registered first, so the codes agree with first appearance
    assert open_.classes == ["yes", "no"]
    labels = [lab for _, lab in s][2:]
    assert y_tail.tolist() == [open_.classes.index(lab) for lab in labels]


def test_generic_stream_errors_name_the_row():
    class Bad(Stream):
        def __init__(self, rows, labels, **kw):
            super().__init__(Schema(["a"]), n_samples=len(rows), **kw)
            self.data = list(zip(rows, labels))

        def _rows(self):
            return iter(self.data)

    rows = [{"a": 1.0}, {"a": 2.0}, {"a": "x"}, {"a": 4.0}]
    with pytest.raises(ValueError, match=r"row 2, column 'a': non-numeric value 'x'"):
        list(Bad(rows, [0, 1, 0, 1], task="classification").batches(2))
    rows[2] = {"a": 3.0}
    with pytest.raises(ValueError, match=r"row 3: regression target 'q' is not a number"):
        list(Bad(rows, [0.5, 1.5, 2.5, "q"], task="regression").batches(2))
    with pytest.raises(ValueError, match=r"row 1: regression target inf is not finite"):
        list(Bad(rows, [0.5, float("inf"), 2.5, 1.0], task="regression").batches(4))
    with pytest.raises(ValueError, match=r"row 3: label 2 is not one of the stream's classes"):
        list(Bad(rows, [0, 1, 0, 2], task="classification", classes=[0, 1]).batches(2))
    with pytest.raises(ValueError, match="task must be"):
        Bad(rows, [0] * 4, task="ranking")


def test_infinite_stream_has_no_length():
    class Forever(Stream):
        def _rows(self):
            return (({"a": float(i)}, i % 2) for i in itertools.count())

    s = Forever(Schema(["a"]), task="classification")
    with pytest.raises(TypeError, match="infinite"):
        len(s)
    assert s.n_batches(5) is None
    assert [y.tolist() for _, y in itertools.islice(s.batches(3), 2)] == [[0, 1, 0], [1, 0, 1]]
    assert s.classes == [0, 1]
    t = s.take(7)
    assert len(t) == 7 and [len(x) for x, _ in t.batches(3)] == [3, 3, 1]


# ---------------------------------------------------------------------- labels: bools vs ints
class Labels(Stream):
    def __init__(self, **kw):
        super().__init__(Schema(["a"]), task="classification", **kw)


def test_fixed_bool_classes_reject_int_labels():
    s = Labels(classes=(False, True))
    assert s.encode_targets([True, False, np.True_]).tolist() == [1, 0, 1]
    with pytest.raises(
        ValueError,
        match=r"row 6: label 1 is not one of the stream's classes "
        r"\[False, True\]",
    ):
        s.encode_targets([True, 1], first_row=5)
    with pytest.raises(ValueError, match=r"row 0: label 0 is not one"):
        s.encode_targets([0])
    ints = Labels(classes=(0, 1))
    assert ints.encode_targets([1, 0, 1.0]).tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match=r"label True is not one of the stream's classes \[0, 1\]"):
        ints.encode_targets([True])


def test_open_classes_keep_bools_and_ints_apart():
    s = Labels()
    assert s.encode_targets([True, 1, False, 0, 1.0, np.False_]).tolist() == [0, 1, 2, 3, 1, 2]
    assert s.classes == [True, 1, False, 0]
    assert [type(c) for c in s.classes] == [bool, int, bool, int]


def test_tablestream_bool_and_int_labels():
    schema = Schema(["a"])
    s = TableStream(torch.zeros(4, 1), [True, 1, False, True], schema)
    assert s.task == "classification" and s.classes == [False, True, 1]
    assert s.y.tolist() == [1, 2, 0, 1]


# ---------------------------------------------------------------------- infer_task
@pytest.mark.parametrize(
    ("labels", "kwargs", "task"),
    [
        (["a", "b"], {}, "classification"),
        ([1, 2, "b"], {}, "classification"),
        ([True, False], {}, "classification"),
        ([0, 1, 1, 0], {}, "classification"),
        ([0.0, 1.0, 2.0], {}, "classification"),
        (list(range(20)), {}, "classification"),
        (list(range(21)), {}, "regression"),
        (list(range(5)), {"max_classes": 4}, "regression"),
        (list(range(5)), {"max_classes": 5}, "classification"),
        ([0.5, 1.0], {}, "regression"),
        ([1, 2, NAN], {}, "regression"),
        ([np.int64(1), np.int64(3)], {}, "classification"),
        ([np.float64(0.25)], {}, "regression"),
    ],
)
def test_infer_task(labels, kwargs, task):
    assert infer_task(labels, **kwargs) == task


@pytest.mark.parametrize(
    "name, target, n_features, task",
    [("electricity", "class", 8, "classification"), ("spambase", "class", 57, "classification"),
     ("bike", "cnt", 12, "regression"), ("california", "median_house_value", 9, "regression"),
     ("adult", "income", 14, "classification")],
)
def test_shared_data_recipes(name, target, n_features, task):
    from torchstream.streams import SHARED_DATA, shared_data

    file = SHARED_DATA[name][0]
    if not data_path(file).exists():
        pytest.skip(f"data file {file} not on this machine")
    header = next(csv.reader(data_path(file).open()))
    stream = shared_data(name)
    assert stream.task == task and len(stream.schema.features) == n_features
    names = {f.name for f in stream.schema.features}
    assert target not in names and names <= set(header)
    if name == "bike":  # casual + registered = cnt: never a feature
        assert not names & {"casual", "registered", "instant", "dteday"}
    if name == "california":  # drop= removes further columns
        fewer = shared_data(name, drop=["ocean_proximity"]).schema.features
        assert {f.name for f in fewer} == names - {"ocean_proximity"}


def test_shared_data_unknown_name():
    from torchstream.streams import shared_data

    with pytest.raises(ValueError, match="unknown shared data set 'iris'; known: adult, bike"):
        shared_data("iris")
