"""The CSV front door: every decision about a file's columns is stated or is an error naming the
file, the line and the column (kinds, task, dates, identifiers, leaks, encoding, quoting,
causal imputation, the stated inference)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from torchstream.cli import build_parser, main, make_stream
from torchstream.schema import Feature, running_mean_fill
from torchstream.streams import data_path, read_csv
from torchstream.streams.csv_reader import MISSING_TOKENS, read_header
from torchstream.streams.table import TableStream


def write(tmp_path: Path, text: str | bytes, name: str = "t.csv") -> Path:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def cycle(n: int, k: int = 3) -> list[int]:
    """``n`` small integers that repeat (never a row number, never unique)."""
    return [i % k for i in range(n)]


def shared(name: str) -> Path:
    path = data_path(name)
    if not path.exists():
        pytest.skip(f"{name} not on this machine")
    return path


# ---------------------------------------------------------------------- bytes and quoting
def test_bom_is_removed_and_the_first_column_can_be_the_target(tmp_path):
    p = write(tmp_path, "\ufeffy,a\n1,2\n0,3\n1,5\n".encode())
    s = read_csv(p, "y")
    assert read_header(p) == ["y", "a"]
    assert s.schema.columns == ("a",) and s.y.tolist() == [1, 0, 1]
    assert s.inference.bom and "BOM removed" in s.inference.describe()


def test_rfc4180_quoting_in_header_and_fields(tmp_path):
    text = ('"a,1","b ""q""",y\n'
            '1,"x,z",0\n'
            '2,"two\nlines",1\n'
            '3,"x,z",0\n'
            '4,plain,1\n')
    p = write(tmp_path, text)
    assert read_header(p) == ["a,1", 'b "q"', "y"]
    s = read_csv(p, "y")
    assert s.schema.features[1] == Feature('b "q"', "categorical", ("x,z", "two\nlines", "plain"))
    assert s.X[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]
    # the record that spans two lines moves the line numbers of the later records
    bad = write(tmp_path, text + "5,plain,2.5\n" + "".join(f"{i},plain,1\n" for i in range(40)))
    with pytest.raises(ValueError, match=r"t\.csv, line 7: target '2\.5' is not an integer"):
        read_csv(bad, "y")


def test_encoding_error_names_file_line_and_column(tmp_path):
    p = write(tmp_path, "id,city,y\n1,Bern,1\n2,Z\xfcrich,0\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"t\.csv, line 3, column 'city' \(character 4\): "
                                         r"byte\(s\) fc are not valid utf-8.*encoding="):
        read_csv(p, "y")
    s = read_csv(p, "y", encoding="latin-1")
    assert s.schema.features[1].categories == ("Bern", "Zürich")
    assert s.inference.encoding == "iso8859-1"


def test_directory_unreadable_file_and_missing_file(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"is a directory, not a CSV file"):
        read_csv(tmp_path, "y")
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        read_csv(tmp_path / "nope.csv", "y")
    p = write(tmp_path, "a,y\n1,0\n")

    def refuse(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(ValueError, match=r"t\.csv: cannot read the file \(Permission denied\)"):
        read_csv(p, "y")


def test_huge_field_and_unclosed_quote_are_errors_with_the_line(tmp_path):
    big = "x" * 131_072
    p = write(tmp_path, f"a,b,y\n1,foo,0\n2,{big},1\n3,foo,0\n")
    with pytest.raises(ValueError, match=r"line 3, column 'b': a field of 131,072 characters, "
                                         r"longer than max_field=100,000"):
        read_csv(p, "y")
    assert read_csv(p, "y", max_field=200_000).schema.features[1].categories == ("foo", big)
    p = write(tmp_path, 'a,b,y\n1,2,0\n3,"4,1\n5,6,1\n')
    with pytest.raises(ValueError, match=r"t\.csv, line 3: a quote in this record is never closed"):
        read_csv(p, "y")
    p = write(tmp_path, 'a,b,y\n1,2,0\n3,5",1\n5,6",1\n')  # the quote means inches
    with pytest.raises(ValueError, match=r"line 3: a quote inside an unquoted field"):
        read_csv(p, "y")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b,y\r\n1,2,0\r\n3,4\r\n5,6,1\r\n", r"line 3: 2 fields, expected 3: '3,4'"),
        ("a,b,y\n1,2,0,7\n3,4,1\n", r"line 2: 4 fields, expected 3"),
        ('a,b,y\n1,"2,0\n",0\n3,4\n', r"line 4: 2 fields, expected 3"),
    ],
)
def test_records_of_the_wrong_width(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_csv(write(tmp_path, text), "y")


# ---------------------------------------------------------------------- column kinds
def test_mixed_column_is_an_error_with_counts_and_examples(tmp_path):
    values = [str(i % 97) for i in range(4_123)] + ["foo"] * 600 + ["n/a"] * 305
    order = np.random.default_rng(0).permutation(len(values))
    col = [values[i] for i in order]
    first = next(i for i, v in enumerate(col) if v in ("foo", "n/a"))
    p = write(tmp_path, "a,y\n" + "".join(f"{v},{i % 2}\n" for i, v in enumerate(col)))
    with pytest.raises(ValueError) as e:
        read_csv(p, "y")
    assert str(e.value) == (
        f"{p}, line {first + 2}, column 'a': non-numeric value {col[first]!r} in a numeric column "
        "— 4,123 numbers and 905 strings such as 'foo', 'n/a'; declare it categorical or "
        "numeric, or list the strings as missing values")
    s = read_csv(p, "y", missing=(*MISSING_TOKENS, "foo", "n/a"))
    f = s.schema.features[0]
    assert f.kind == "numeric" and f.nullable
    assert int(s.X[:, 1].sum()) == 905  # the indicator column
    assert read_csv(p, "y", categorical=["a"]).schema.features[0].kind == "categorical"
    with pytest.raises(ValueError, match=rf"line {first + 2}, column 'a': non-numeric value "
                                         rf"{col[first]!r} in a numeric column "
                                         r"\(905 such values\)"):
        read_csv(p, "y", numeric=["a"])


def test_datetime_columns_become_stated_parts_or_are_left_out(tmp_path):
    dates = ["2024-03-15", "2024-03-16 10:30", "", "2024/12/31T23:59:59"]
    p = write(tmp_path, "d,x,y\n" + "".join(f"{d},{i % 2},{i % 2}\n" for i, d in enumerate(dates)))
    s = read_csv(p, "y")
    names = ["d:year", "d:month", "d:day", "d:weekday", "d:hour", "d:minute"]
    assert [f.name for f in s.schema.features] == [*names, "x"]
    assert all(f.nullable for f in s.schema.features[:6])
    values = s.X[:, [s.schema.columns.index(n) for n in names]]
    assert values[0].tolist() == [2024, 3, 15, 4, 0, 0]  # a Friday
    assert values[1].tolist() == [2024, 3, 16, 5, 10, 30]
    assert values[2].tolist() == [2024, 3, 15.5, 4.5, 5, 15]  # missing: mean of rows 0 and 1
    assert values[3].tolist() == [2024, 12, 31, 1, 23, 59]
    col = next(c for c in s.inference.columns if c.name == "d")
    assert col.kind == "datetime" and col.role == "feature"
    assert "numeric parts year, month, day, weekday, hour, minute" in col.note
    dropped = read_csv(p, "y", dates="drop")
    assert [f.name for f in dropped.schema.features] == ["x"]
    assert "left out (dates='drop')" in dropped.inference.describe()
    cat = read_csv(p, "y", categorical=["d"])
    assert cat.schema.features[0].categories == ("2024-03-15", "2024-03-16 10:30",
                                                 "2024/12/31T23:59:59")
    with pytest.raises(ValueError, match=r"line 3, column 'd': '2023-02-30' is not a valid date"):
        read_csv(write(tmp_path, "d,y\n2024-01-01,0\n2023-02-30,1\n"), "y")
    with pytest.raises(ValueError, match=r"line 3, column 'd': value 'soon' in a column of dates "
                                         r"— 2 dates and 1 other string such as 'soon'"):
        read_csv(write(tmp_path, "d,y\n2024-01-01,0\nsoon,1\n2024-01-02,0\n"), "y")


def test_identifiers_and_empty_columns_are_left_out_and_said(tmp_path):
    n = 12
    rows = "".join(f"{100 + i},user{i},{i % 3},,{i % 2}\n" for i in range(n))
    p = write(tmp_path, "rowid,key,x,empty,y\n" + rows)
    s = read_csv(p, "y")
    assert [f.name for f in s.schema.features] == ["x"]
    kinds = {c.name: (c.kind, c.role) for c in s.inference.columns}
    assert kinds == {"rowid": ("identifier", "left out"), "key": ("identifier", "left out"),
                     "x": ("numeric", "feature"), "empty": ("empty", "left out"),
                     "y": ("target", "target")}
    text = s.inference.describe()
    assert "the row number (consecutive integers 100..111)" in text
    assert "a different string on every row" in text and "every value is missing" in text
    kept = read_csv(p, "y", numeric=["rowid"], categorical=["key"])
    assert [f.name for f in kept.schema.features] == ["rowid", "key", "x"]
    assert kept.X[:, 0].tolist() == [100.0 + i for i in range(n)]
    # fewer than 10 rows are too few to call a column an identifier
    assert read_csv(p, "y", nrows=9).schema.names == ("rowid", "key", "x")


def test_numbers_with_separators_are_numbers_said_never_identifiers_or_categories(tmp_path):
    """A quoted "12,345.6" on every row was left out as an identifier, and decimal commas
    "3,14" became one-hot columns: both are numbers, read one way for the column and said
    with a line and a value, in features and in the target."""
    g = np.random.default_rng(0)
    amount = g.uniform(1_000, 999_999, 60).round(1)
    ratio = g.uniform(0, 10, 60).round(2)
    rows = [f'"{a:,.1f}","{str(r).replace(".", ",")}",{i % 2}' for i, (a, r) in
            enumerate(zip(amount, ratio))]
    p = write(tmp_path, "amount,ratio,y\n" + "\n".join(rows) + "\n")
    s = read_csv(p, "y")
    assert s.schema.columns == ("amount", "ratio")  # not 1 + 59 one-hot columns, none left out
    assert s.X[:, 0].tolist() == amount.tolist() and s.X[:, 1].tolist() == ratio.tolist()
    notes = {c.name: c.note for c in s.inference.columns}
    assert notes["amount"].endswith(f"numbers written with ',' separating thousands "
                                    f"('{amount[0]:,.1f}' on line 2 is {amount[0]:g})")
    assert f"',' as the decimal mark ('{str(ratio[0]).replace('.', ',')}' on line 2" \
        in notes["ratio"]
    target = write(tmp_path, "x,y\n" + "".join(f'{i % 3},"{v:,.1f}"\n'
                                                for i, v in enumerate(amount)), "target.csv")
    t = read_csv(target, "y")
    assert t.task == "regression" and t.y.double().allclose(torch.tensor(amount))
    assert "separating thousands" in t.inference.task_rule
    european = write(tmp_path, 'x,y\n"1.234,5",0\n"12,25",1\n7,0\n', "eu.csv")
    assert read_csv(european, "y").X[:, 0].tolist() == [1234.5, 12.25, 7.0]


@pytest.mark.parametrize("values, message", [
    (['"1,234"', '"5,678"', "12"],
     (r"line 2, column 'a': '1,234' is 1234 with ',' separating thousands or 1.234 with ',' as "
      r"the decimal mark, and no value of the column tells which")),
    (['"12,345.6"', '"3,14"', "7"],
     (r"line 2, column 'a': numbers written with ',' both separating thousands and as the "
      r"decimal mark \('12,345.6' and '3,14'\)")),
    (['"3,14"', "2.5", "7"],
     r"line 2, column 'a': numbers written with ',' both .*beside numbers with a decimal point"),
    (['"3,14"', "abc", '"2,71"'],
     (r"line 3, column 'a': non-numeric value 'abc' in a numeric column — 2 numbers and 1 "
      r"string")),
])
def test_numbers_with_separators_that_cannot_be_read_one_way_are_errors(tmp_path, values,
                                                                         message):
    rows = "".join(f"{v},{i % 2}\n" for i, v in enumerate(values))
    with pytest.raises(ValueError, match=message):
        read_csv(write(tmp_path, "a,y\n" + rows), "y")
    # declared categorical, the text is kept as categories
    assert read_csv(write(tmp_path, "a,y\n" + rows), "y",
                    categorical=["a"]).schema.features[0].kind == "categorical"


def test_too_many_categories_is_an_error_unless_declared(tmp_path):
    text = "c,y\n" + "".join(f"v{i % 40},{i % 2}\n" for i in range(80))
    p = write(tmp_path, text)
    with pytest.raises(ValueError, match=r"column 'c': 40 distinct strings in 80 rows, more than "
                                         r"max_categories=30"):
        read_csv(p, "y", max_categories=30)
    assert len(read_csv(p, "y", max_categories=30, categorical=["c"]).schema.columns) == 40


# ---------------------------------------------------------------------- the target
def _target_file(tmp_path: Path, labels: list[str]) -> Path:
    return write(tmp_path, "x,y\n" + "".join(f"{i % 5},{v}\n" for i, v in enumerate(labels)))


@pytest.mark.parametrize(
    ("labels", "task", "classes", "rule"),
    [
        (["yes", "no", "yes"], "classification", ["no", "yes"], "the labels are strings"),
        (["True", "False"], "classification", ["False", "True"], "the labels are strings"),
        (["0", "1", "1.0", "2"], "classification", [0, 1, 2], "integer values, 3 distinct "
                                                              "(at most 20)"),
        ([str(i) for i in range(21)], "regression", None, "integer values, 21 distinct "
                                                          "(more than 20)"),
        (["0.5", "1.25", "3"], "regression", None, "numbers with fractions"),
    ],
)
def test_task_rule(tmp_path, labels, task, classes, rule):
    s = read_csv(_target_file(tmp_path, labels), "y")
    assert s.task == task and s.classes == classes
    assert rule in s.inference.task_rule
    if task == "regression":
        assert s.y.tolist() == [float(v) for v in labels]


def test_target_values_that_disagree_with_the_rule(tmp_path):
    labels = [str(i % 2) for i in range(40)]
    p = _target_file(tmp_path, [*labels[:20], "abc", *labels[20:]])
    with pytest.raises(ValueError, match=r"line 22: target 'abc' is not a number — column 'y' "
                                         r"holds 40 numbers and 1 string such as 'abc'"):
        read_csv(p, "y")
    s = read_csv(p, "y", task="classification")  # declared: every value is a label
    assert s.classes == ["0", "1", "abc"] and s.inference.task_rule == "declared classification"
    with pytest.raises(ValueError, match=r"line 22: target 'abc' is not a number, but the task is "
                                         r"regression \(1 such values\)"):
        read_csv(p, "y", task="regression")
    p = _target_file(tmp_path, [*labels[:5], "0.5", *labels[5:]])
    with pytest.raises(ValueError, match=r"line 7: target '0\.5' is not an integer — column 'y' "
                                         r"holds 40 integers with 2 distinct values \(class "
                                         r"labels\?\) and 1 non-integer such as '0\.5'"):
        read_csv(p, "y")
    s = read_csv(p, "y", task="regression")
    assert s.task == "regression" and s.y[5].item() == 0.5
    many = _target_file(tmp_path, [*labels, *["0.5"] * 3])  # 3 of 43 rows: more than 5 %
    assert read_csv(many, "y").task == "regression"


def test_leaking_columns_are_an_error_unless_declared(tmp_path):
    rows = "".join(f"{i % 7},{i % 3},{i % 5},{i % 7 + i % 3}\n" for i in range(30))
    p = write(tmp_path, "a,b,c,y\n" + rows)
    with pytest.raises(ValueError, match=r"'a' \+ 'b' sum to the target 'y' on every row.*"
                                         r"--drop a b"):
        read_csv(p, "y")
    s = read_csv(p, "y", numeric=["a", "b"])
    assert s.schema.names == ("a", "b", "c") and s.task == "classification"
    assert "kept as declared although 'a' + 'b' sum to the target" in s.inference.describe()
    assert read_csv(p, "y", drop=["b"]).schema.names == ("a", "c")
    copy = write(tmp_path, "a,c,y\n" + "".join(f"{'uv'[i % 2]},{i % 5},{'uv'[i % 2]}\n"
                                               for i in range(30)))
    with pytest.raises(ValueError, match=r"'a' equals the target 'y' on every row"):
        read_csv(copy, "y")


def test_affine_copies_and_sums_within_float_rounding_leak(tmp_path):
    """Exact float equality let through a column equal to 2 * y (or a * y + b, or y written
    with 7 digits) and decimal columns that sum to the target only up to rounding (0.1 + 0.2
    is not 0.3 in floats); a feature merely close to y (noise 1e-3) is no leak."""
    g = np.random.default_rng(1)
    y = g.uniform(0, 100, 40).round(3)
    parts = g.uniform(0, 1, 40).round(3)
    cases = {
        "double": (2 * y, (r"'x' equals 2 \* the target 'y' on every row \(within float "
                           r"rounding\).*--drop x")),
        "affine": (-0.5 * y + 3, r"'x' equals -0.5 \* the target 'y' \+ 3 on every row"),
        "rounded": (np.array([float(f"{v:.7g}") for v in y * 1.0000001]),
                    r"'x' equals the target 'y' on every row"),
    }
    for name, (x, message) in cases.items():
        text = "x,z,y\n" + "".join(f"{a!r},{i % 7},{b!r}\n" for i, (a, b) in
                                   enumerate(zip(x.tolist(), y.tolist())))
        p = write(tmp_path, text, f"{name}.csv")
        with pytest.raises(ValueError, match=message):
            read_csv(p, "y")
        kept = read_csv(p, "y", numeric=["x"])
        assert kept.schema.names == ("x", "z")
        assert "kept as declared although 'x' equals" in kept.inference.describe()
    total = (parts + (y - parts)).round(3)  # two decimal columns and their sum as written
    assert not np.array_equal(parts + (y - parts).round(3), total)  # rounding: not exact
    text = "a,b,y\n" + "".join(f"{a!r},{b!r},{t!r}\n" for a, b, t in
                               zip(parts.tolist(), (y - parts).round(3).tolist(), total.tolist()))
    with pytest.raises(ValueError, match=r"'a' \+ 'b' sum to the target 'y' on every row"):
        read_csv(write(tmp_path, text, "sum.csv"), "y")
    noisy = y + g.normal(0, 1e-3, 40)
    text = "x,y\n" + "".join(f"{a!r},{b!r}\n" for a, b in zip(noisy.tolist(), y.tolist()))
    assert read_csv(write(tmp_path, text, "noisy.csv"), "y").schema.names == ("x",)


def test_bike_hour_generic_read(tmp_path):
    path = shared("bike_hour.csv")
    with pytest.raises(ValueError, match=r"'casual' \+ 'registered' sum to the target 'cnt'"):
        read_csv(path, "cnt")
    s = read_csv(path, "cnt", drop=["casual", "registered"])
    assert s.n_features == 16  # not 746 one-hot date columns
    inf = {c.name: c for c in s.inference.columns}
    assert inf["instant"].kind == "identifier" and inf["instant"].role == "left out"
    assert inf["dteday"].encoded == ("dteday:year", "dteday:month", "dteday:day", "dteday:weekday")
    assert s.X[0, :4].tolist() == [2011, 1, 1, 5]  # 2011-01-01 was a Saturday (Monday = 0)


# ---------------------------------------------------------------------- causal imputation
def test_running_mean_fill_by_hand():
    x = np.array([9.0, 2.0, 9.0, 4.0, 6.0, 9.0, 1.0])
    miss = np.array([1, 0, 1, 0, 0, 1, 0], dtype=bool)
    assert running_mean_fill(x, miss).tolist() == [0.0, 2.0, 2.0, 4.0, 6.0, 4.0, 1.0]
    assert running_mean_fill(x, np.zeros(7, bool)).tolist() == x.tolist()


def test_missing_values_never_use_later_rows(tmp_path):
    a = ["", "2", "?", "4", "6", "NA", "1", "", "8", "3"]
    p = write(tmp_path, "a,b,y\n" + "".join(f"{v},{i % 4},{i % 2}\n" for i, v in enumerate(a)))
    s = read_csv(p, "y")
    assert s.schema.features[0] == Feature("a", nullable=True, fill_value=0.0)
    assert s.X[:, 0].tolist() == [0.0, 2, 2, 4, 6, 4, 1, 13 / 4, 8, 3]
    assert s.X[:, 1].tolist() == [1.0, 0, 1, 0, 0, 1, 0, 1, 0, 0]
    # the first k rows encode alike whatever follows them: no statistic of later rows
    # (k = 1 holds no value of 'a': an empty column, left out)
    for k in range(2, len(a)):
        assert torch.equal(read_csv(p, "y", nrows=k).X[:, :2], s.X[:k, :2])
    other = write(tmp_path, "a,b,y\n" + "".join(
        f"{v if i < 5 else 1000},{i % 4},{i % 2}\n" for i, v in enumerate(a)), "u.csv")
    assert torch.equal(read_csv(other, "y").X[:5], s.X[:5])


def test_raw_rows_and_schema_agree_with_the_tensor(tmp_path):
    p = write(tmp_path, "n,c,y\n1.5,red,a\n2,?,b\n3,blue,a\n4,red,b\n")
    s = read_csv(p, "y")
    rows = [r for r, _ in s]
    assert rows == [{"n": 1.5, "c": "red"}, {"n": 2.0, "c": None}, {"n": 3.0, "c": "blue"},
                    {"n": 4.0, "c": "red"}]
    assert torch.equal(s.schema.encode(rows, dtype=torch.float64), s.X)
    assert [lab for _, lab in s] == ["a", "b", "a", "b"] and s.y.tolist() == [0, 1, 0, 1]


# ---------------------------------------------------------------------- the stated inference
def test_inference_describe_and_to_dict(tmp_path):
    rows = "".join(f"{i},{'xy'[i % 2]},{'' if i == 3 else i % 4},{i},{'ab'[i % 3 == 0]}\n"
                   for i in range(12))
    p = write(tmp_path, "idx,c,n,gone,label\n" + rows)
    s = read_csv(p, "label", drop=["gone"])
    inf = s.inference
    assert inf.n_rows == 12 and inf.task == "classification" and inf.classes == ("a", "b")
    assert inf.class_counts == (8, 4)
    assert [c.role for c in inf.columns] == ["left out", "feature", "feature", "dropped", "target"]
    assert [c.name for c in inf.left_out] == ["idx", "gone"]
    n = next(c for c in inf.columns if c.name == "n")
    assert n.encoded == ("n", "n:missing") and n.n_missing == 1
    text = inf.describe()
    for part in ("12 rows, 5 columns", "target 'label': classification", "classes (2): 'a' 8, "
                 "'b' 4", "idx", "identifier", "dropped (drop=)", "n:missing",
                 "mean of its values in the earlier rows", "2 feature columns -> 4 encoded"):
        assert part in text, part
    data = json.loads(json.dumps(inf.to_dict()))
    assert data["task"] == "classification" and data["classes"] == ["a", "b"]
    assert data["n_encoded"] == s.n_features == 4
    assert [c["kind"] for c in data["columns"]] == ["identifier", "categorical", "numeric", "-",
                                                    "target"]


def test_real_files_state_their_columns():
    s = read_csv(shared("adult.csv"), "income")
    d = s.inference.to_dict()
    kinds = {c["name"]: c["kind"] for c in d["columns"]}
    assert kinds["workclass"] == "categorical" and kinds["age"] == "numeric"
    assert d["classes"] == ["<=50K", ">50K"] and d["class_counts"] == [24_720, 7_841]
    assert s.inference.left_out == []
    e = read_csv(shared("electricity.csv"), "class")
    assert e.inference.task_rule == "integer values, 2 distinct (at most 20): classification"


# ---------------------------------------------------------------------- stream and CLI
def test_table_stream_checks_given_targets():
    from torchstream.schema import Schema

    schema = Schema(["a"])
    X = torch.zeros(3, 1)
    s = TableStream(X, ["u", "v", "u"], schema, classes=["u", "v"],
                    targets=torch.tensor([0, 1, 0]))
    assert s.y.tolist() == [0, 1, 0]
    with pytest.raises(ValueError, match=r"class codes must lie in \[0, 2\)"):
        TableStream(X, ["u", "v", "u"], schema, classes=["u", "v"], targets=torch.tensor([0, 2, 0]))
    with pytest.raises(ValueError, match=r"targets must have shape \[3\]"):
        TableStream(X, [1.0, 2.0, 3.0], schema, task="regression", targets=torch.zeros(2))


def test_cli_default_target_and_overrides(tmp_path):
    rows = "".join(f"{i % 3},2024-01-{i + 1:02d},{'n/a' if i == 4 else i % 5},{i % 2}\n"
                   for i in range(12))
    p = write(tmp_path, ('\ufeffa,d,v,"label, final"\n' + rows).encode())
    parse = build_parser().parse_args
    with pytest.raises(ValueError, match=r"column 'v': non-numeric value 'n/a'"):
        make_stream(parse(["run", "--stream", str(p)]))
    s = make_stream(parse(["run", "--stream", str(p), "--missing", "n/a", "--dates", "drop"]))
    assert s.inference.target == "label, final" and s.schema.names == ("a", "v")
    s = make_stream(parse(["run", "--stream", str(p), "--categorical", "v", "--numeric", "a",
                           "--task", "regression", "--drop", "d"]))
    assert s.task == "regression" and s.schema.features[1].kind == "categorical"
    with pytest.raises(ValueError, match="is a directory"):
        make_stream(parse(["run", "--stream", str(tmp_path)]))


def test_run_prints_the_inferred_schema_and_saves_it_beside_the_logs(tmp_path, capsys):
    data = tmp_path / "d.csv"
    rows = [f"{i % 7},2024-01-{i % 28 + 1:02d},{'abc'[i % 3]},id{i},{i % 2}" for i in range(60)]
    data.write_text("a,when,c,key,y\n" + "\n".join(rows) + "\n")
    logdir = tmp_path / "logs"
    assert main(["run", "--stream", str(data), "--explain", "none", "--no-progress",
                 "--logdir", str(logdir)]) == 0
    out = capsys.readouterr().out
    head = out[: out.index("stream  ")]  # stated before the run starts
    assert "target 'y': classification" in head
    assert "when:year" in head and "identifier" in head and "key" in head
    saved = json.loads((logdir / "schema.json").read_text())
    assert saved == json.loads(json.dumps(saved))
    assert "key" in json.dumps(saved) and "when" in json.dumps(saved)
