"""Tests of the feature schema: encoding policies, inference, errors, decoding, persistence."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from torchstream.schema import MISSING, OTHER, Feature, Schema, is_missing, match_key

NAN = float("nan")
INF = float("inf")


def t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


def mixed_schema(**kwargs) -> Schema:
    """num (plain), opt (nullable numeric), color (categorical), size (nullable categorical)."""
    return Schema(
        [
            Feature("num"),
            Feature("opt", nullable=True, fill_value=-1.5),
            Feature("color", "categorical", ("red", "green", "blue")),
            Feature("size", "categorical", ("S", "L"), nullable=True),
        ],
        **kwargs,
    )


# ---------------------------------------------------------------------- encoding
def test_numeric_encoding():
    schema = Schema(["a", "b"])
    assert schema.columns == ("a", "b")
    assert schema.n_features == 2 and schema.n_columns == 2
    X = schema.encode([{"a": 1, "b": 2.5}, {"b": -3, "a": 0.25}])  # key order does not matter
    assert X.dtype == torch.float32 and X.device.type == "cpu"
    assert torch.equal(X, t([[1.0, 2.5], [0.25, -3.0]]))
    X64 = schema.encode([{"a": 0.1, "b": 1e300}], dtype=torch.float64, device="cpu")
    assert X64.dtype == torch.float64 and X64.tolist() == [[0.1, 1e300]]


def test_numeric_encoding_accepts_numpy_scalars_bools_and_numeric_strings():
    schema = Schema(["a", "b", "c"])
    X = schema.encode(
        [{"a": np.float32(1.5), "b": np.int64(7), "c": True}, {"a": "2", "b": 0, "c": False}]
    )
    assert torch.equal(X, t([[1.5, 7.0, 1.0], [2.0, 0.0, 0.0]]))


def test_encode_one_and_empty():
    schema = mixed_schema()
    x = schema.encode_one({"num": 1, "opt": 2, "color": "blue", "size": "L"})
    assert x.shape == (schema.n_columns,)
    assert torch.equal(x, torch.tensor([1.0, 2.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]))
    assert schema.encode([]).shape == (0, schema.n_columns)
    assert Schema(["a"]).encode([]).shape == (0, 1)


def test_encode_rejects_a_single_dict():
    with pytest.raises(TypeError, match="encode_one"):
        Schema(["a"]).encode({"a": 1.0})


def test_categorical_onehot():
    schema = Schema([Feature("w"), Feature("c", "categorical", ("x", "y", "z"))])
    assert schema.columns == ("w", "c=x", "c=y", "c=z")
    X = schema.encode([{"w": 1, "c": "z"}, {"w": 2, "c": "x"}, {"w": 3, "c": "y"}])
    assert torch.equal(X, t([[1, 0, 0, 1], [2, 1, 0, 0], [3, 0, 1, 0]]))


def test_categorical_ordinal():
    schema = Schema(
        [Feature("c", "categorical", ("x", "y", "z")), Feature("w")], encoding="ordinal"
    )
    assert schema.columns == ("c", "w")
    X = schema.encode([{"w": 1, "c": "z"}, {"w": 2, "c": "x"}, {"w": 3, "c": "y"}])
    assert torch.equal(X, t([[2, 1], [0, 2], [1, 3]]))


def test_integer_categories():
    schema = Schema([Feature(0, "categorical", (10, 20)), Feature(1)])
    assert schema.columns == ("0=10", "0=20", "1")
    assert torch.equal(schema.encode([{0: 20, 1: 5}, {0: 10.0, 1: 6}]), t([[0, 1, 5], [1, 0, 6]]))


def test_nullable_numeric_value_and_indicator():
    schema = Schema([Feature("x", nullable=True, fill_value=2.5), Feature("y")])
    assert schema.columns == ("x", "x:missing", "y")
    X = schema.encode([{"x": None, "y": 1}, {"x": NAN, "y": 2}, {"x": 4, "y": 3}, {"x": 0, "y": 4}])
    assert torch.equal(X, t([[2.5, 1, 1], [2.5, 1, 2], [4, 0, 3], [0, 0, 4]]))


def test_nullable_categorical_onehot_and_ordinal():
    f = Feature("c", "categorical", ("a", "b"), nullable=True)
    onehot = Schema([f])
    assert onehot.columns == ("c=a", "c=b", f"c={MISSING}")
    rows = [{"c": "b"}, {"c": None}, {"c": NAN}, {"c": "a"}]
    assert torch.equal(onehot.encode(rows), t([[0, 1, 0], [0, 0, 1], [0, 0, 1], [1, 0, 0]]))
    ordinal = Schema([f], encoding="ordinal")
    assert ordinal.columns == ("c",)
    assert torch.equal(ordinal.encode(rows), t([[1], [2], [2], [0]]))


def test_unseen_other():
    f = Feature("c", "categorical", ("a", "b"))
    onehot = Schema([f], unseen="other")
    assert onehot.columns == ("c=a", "c=b", f"c={OTHER}")
    rows = [{"c": "zzz"}, {"c": "a"}, {"c": 3}]
    assert torch.equal(onehot.encode(rows), t([[0, 0, 1], [1, 0, 0], [0, 0, 1]]))
    assert torch.equal(
        Schema([f], unseen="other", encoding="ordinal").encode(rows), t([[2], [0], [2]])
    )


def test_unseen_other_with_nullable_orders_missing_before_other():
    f = Feature("c", "categorical", ("a",), nullable=True)
    schema = Schema([f], unseen="other")
    assert schema.columns == ("c=a", f"c={MISSING}", f"c={OTHER}")
    X = schema.encode([{"c": None}, {"c": "new"}, {"c": "a"}])
    assert torch.equal(X, t([[0, 1, 0], [0, 0, 1], [1, 0, 0]]))
    ordinal = Schema([f], unseen="other", encoding="ordinal")
    assert torch.equal(ordinal.encode([{"c": None}, {"c": "new"}, {"c": "a"}]), t([[1], [2], [0]]))


def test_mixed_schema_hand_written():
    schema = mixed_schema()
    assert schema.columns == (
        "num",
        "opt",
        "opt:missing",
        "color=red",
        "color=green",
        "color=blue",
        "size=S",
        "size=L",
        f"size={MISSING}",
    )
    rows = [
        {"num": 1, "opt": 3, "color": "green", "size": "S"},
        {"num": -2, "opt": None, "color": "red", "size": None},
        {"num": 0.5, "opt": NAN, "color": "blue", "size": "L"},
    ]
    expected = t(
        [
            [1, 3, 0, 0, 1, 0, 1, 0, 0],
            [-2, -1.5, 1, 1, 0, 0, 0, 0, 1],
            [0.5, -1.5, 1, 0, 0, 1, 0, 1, 0],
        ]
    )
    assert torch.equal(schema.encode(rows), expected)
    ordinal = mixed_schema(encoding="ordinal")
    assert ordinal.columns == ("num", "opt", "opt:missing", "color", "size")
    assert torch.equal(
        ordinal.encode(rows), t([[1, 3, 0, 1, 0], [-2, -1.5, 1, 0, 2], [0.5, -1.5, 1, 2, 1]])
    )


def test_encode_pandas_dataframe():
    schema = mixed_schema()
    rows = [
        {"num": 1.0, "opt": 3.0, "color": "green", "size": "S"},
        {"num": -2.0, "opt": None, "color": "red", "size": None},
    ]
    frame = pd.DataFrame(rows)
    assert frame["opt"].isna().iloc[1]  # pandas turned None into NaN
    assert torch.equal(schema.encode(frame), schema.encode(rows))
    plain = Schema(["a", "b"])
    frame = pd.DataFrame({"a": [1, 2, 3], "b": [0.5, 0.25, 0.125]})
    assert torch.equal(plain.encode(frame), t([[1, 0.5], [2, 0.25], [3, 0.125]]))
    frame.loc[1, "b"] = NAN
    with pytest.raises(ValueError, match=r"row 1, column 'b': missing"):
        plain.encode(frame)


def test_is_missing():
    assert is_missing(None) and is_missing(NAN) and is_missing(np.float64("nan"))
    assert not is_missing(0) and not is_missing("") and not is_missing(MISSING)


# ---------------------------------------------------------------------- inference
def test_infer_kinds_categories_nullable_fill():
    rows = [
        {"n": 1, "s": "b", "flag": True, "opt": 2.0, "cat_opt": "x", "none": None},
        {"n": 2.5, "s": "a", "flag": False, "opt": None, "cat_opt": None, "none": None},
        {"n": -0.5, "s": "b", "flag": True, "opt": 7.0, "cat_opt": "y", "none": None},
        {"n": 4, "s": "c", "flag": True, "opt": NAN, "cat_opt": "x", "none": None},
    ]
    schema = Schema.infer(rows)
    assert schema.names == ("n", "s", "flag", "opt", "cat_opt", "none")
    by = {f.name: f for f in schema.features}
    assert by["n"] == Feature("n", "numeric", nullable=False, fill_value=(1 + 2.5 - 0.5 + 4) / 4)
    assert by["s"] == Feature("s", "categorical", ("b", "a", "c"))  # order of first appearance
    assert by["flag"] == Feature("flag", "categorical", (True, False))
    assert by["opt"].kind == "numeric" and by["opt"].nullable
    assert by["opt"].fill_value == pytest.approx(4.5)  # mean of the observed 2 and 7
    assert by["cat_opt"] == Feature("cat_opt", "categorical", ("x", "y"), nullable=True)
    assert by["none"] == Feature("none", "numeric", nullable=True, fill_value=0.0)
    X = schema.encode(rows)
    assert X.shape == (4, schema.n_columns)
    assert X[1, schema.feature_columns("opt")].tolist() == [4.5, 1.0]


def test_infer_forced_categorical_and_kwargs():
    rows = [{"k": 3, "v": 1.0}, {"k": 1, "v": 2.0}, {"k": 3, "v": 3.0}]
    schema = Schema.infer(rows, categorical=["k"], encoding="ordinal", unseen="other")
    assert schema.features[0] == Feature("k", "categorical", (3, 1))
    assert schema.encoding == "ordinal" and schema.unseen == "other"
    assert schema.encode(rows).tolist() == [[0, 1], [1, 2], [0, 3]]
    assert schema.encode([{"k": 99, "v": 0}]).tolist() == [[2, 0]]


def test_infer_string_after_numbers_is_an_error_naming_row_and_column():
    rows = [{"a": 1, "b": 1}, {"a": 2, "b": 2}, {"a": "two", "b": 3}]
    with pytest.raises(ValueError, match=r"row 2, column 'a': value 'two' is not numeric"):
        Schema.infer(rows)
    # a string first makes the column categorical, and later numbers become categories
    schema = Schema.infer(list(reversed(rows)))
    assert schema.features[0] == Feature("a", "categorical", ("two", 2, 1))


def test_infer_errors():
    with pytest.raises(ValueError, match="empty"):
        Schema.infer([])
    with pytest.raises(
        ValueError, match=r"row 1: keys differ .*missing \['b'\].*unexpected \['c'\]"
    ):
        Schema.infer([{"a": 1, "b": 2}, {"a": 1, "c": 2}])
    with pytest.raises(ValueError, match=r"row 1, column 'b': infinite"):
        Schema.infer([{"a": 1, "b": 2}, {"a": 1, "b": -INF}])


def test_infer_accepts_a_generator():
    schema = Schema.infer({"a": float(i)} for i in range(4))
    assert schema.features == (Feature("a", fill_value=1.5),)


# ---------------------------------------------------------------------- errors
PLAIN = Schema(["a", "x"])
MIXED = Schema([Feature("a", nullable=True), Feature("x"), Feature("c", "categorical", ("u",))])


def _rows(schema: Schema, bad: dict) -> list[dict]:
    good = {"a": 1.0, "x": 2.0} if schema is PLAIN else {"a": 1.0, "x": 2.0, "c": "u"}
    return [dict(good), dict(good), {**good, **bad}]


@pytest.mark.parametrize("schema", [PLAIN, MIXED], ids=["plain", "mixed"])
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"x": NAN}, r"row 12, column 'x': missing"),
        ({"x": None}, r"row 12, column 'x': missing value"),
        ({"x": INF}, r"row 12, column 'x': infinite"),
        ({"x": -INF}, r"row 12, column 'x': infinite"),
        ({"x": "inf"}, r"row 12, column 'x': infinite"),
        ({"a": INF}, r"row 12, column 'a': infinite"),
        ({"x": "abc"}, r"row 12, column 'x': non-numeric value 'abc' in a numeric feature"),
        ({"x": [1.0]}, r"row 12, column 'x': non-numeric value \[1.0\]"),
    ],
)
def test_value_errors_name_row_and_column(schema, bad, message):
    with pytest.raises(ValueError, match=message):
        schema.encode(_rows(schema, bad), first_row=10)


@pytest.mark.parametrize("schema", [PLAIN, MIXED], ids=["plain", "mixed"])
@pytest.mark.parametrize("value", [1e39, -1e39, "1e39"])
def test_a_value_beyond_float32_is_an_error_never_inf(schema, value):
    rows = _rows(schema, {"x": value})
    with pytest.raises(ValueError, match=r"row 12, column 'x': -?1e\+39 overflows float32"):
        schema.encode(rows, first_row=10)
    # float32's largest value passes; float64 holds 1e39 exactly as given
    assert schema.encode(_rows(schema, {"x": 3.4e38}))[2].isfinite().all()
    X64 = schema.encode(rows, dtype=torch.float64)
    assert abs(X64[2, schema.columns.index("x")].item()) == 1e39
    with pytest.raises(ValueError, match=r"row 2, column 'x': 70000 overflows float16"):
        schema.encode(_rows(schema, {"x": 7e4}), dtype=torch.float16)


def test_nan_is_allowed_only_in_nullable():
    X = MIXED.encode(_rows(MIXED, {"a": NAN}))
    assert X[2, :2].tolist() == [0.0, 1.0]


@pytest.mark.parametrize("schema", [PLAIN, MIXED], ids=["plain", "mixed"])
def test_key_errors_name_row_and_key(schema):
    rows = _rows(schema, {})
    del rows[1]["x"]
    with pytest.raises(ValueError, match=r"row 1: missing features \['x'\]"):
        schema.encode(rows)
    rows = _rows(schema, {"zz": 1.0})
    with pytest.raises(ValueError, match=r"row 2: unknown features \['zz'\]"):
        schema.encode(rows)
    rows = _rows(schema, {"zz": 1.0})
    del rows[2]["a"]
    with pytest.raises(ValueError, match=r"row 2: missing features \['a'\] and unknown features"):
        schema.encode(rows)


@pytest.mark.parametrize("schema", [PLAIN, MIXED], ids=["plain", "mixed"])
@pytest.mark.parametrize("row", [[1.0, 2.0], (1.0, 2.0), "ab", None])
def test_non_dict_row(schema, row):
    with pytest.raises(TypeError, match=r"row 4: expected a dict"):
        schema.encode([_rows(schema, {})[0], row], first_row=3)


def test_unseen_category_error_names_row_column_value_and_known():
    schema = Schema([Feature("c", "categorical", ("red", "blue"))])
    with pytest.raises(
        ValueError, match=r"row 1, column 'c': unseen category 'green' \(known: 'red', 'blue'\)"
    ):
        schema.encode([{"c": "red"}, {"c": "green"}])
    with pytest.raises(ValueError, match=r"row 0, column 'c': missing value .* not nullable"):
        schema.encode([{"c": None}])


def test_construction_errors():
    with pytest.raises(ValueError, match=r"duplicate feature names: \['a'\]"):
        Schema(["a", "b", Feature("a", "categorical", ("x",))])
    with pytest.raises(ValueError, match=r"feature 'a': kind must be"):
        Feature("a", "text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"feature 'a': a numeric feature has no categories"):
        Feature("a", "numeric", ("x",))
    with pytest.raises(ValueError, match=r"feature 'a': duplicate categories"):
        Feature("a", "categorical", ("x", "y", "x"))
    with pytest.raises(ValueError, match=r"feature 'a': duplicate categories"):
        Feature("a", "categorical", (1, 1.0))
    with pytest.raises(ValueError, match="at least one feature"):
        Schema([])
    with pytest.raises(ValueError, match="encoding must be"):
        Schema(["a"], encoding="binary")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unseen must be"):
        Schema(["a"], unseen="ignore")  # type: ignore[arg-type]


def test_reserved_category_names():
    with pytest.raises(ValueError, match=r"feature 'c': .*reserved"):
        Schema([Feature("c", "categorical", ("a", OTHER))], unseen="other")
    with pytest.raises(ValueError, match=r"feature 'c': .*reserved"):
        Schema([Feature("c", "categorical", ("a", MISSING), nullable=True)])
    # where the schema adds nothing, they are ordinary categories
    schema = Schema([Feature("c", "categorical", ("a", OTHER, MISSING))])
    assert torch.equal(schema.encode([{"c": OTHER}, {"c": MISSING}]), t([[0, 1, 0], [0, 0, 1]]))


# ---------------------------------------------------------------------- bools are not ints
def test_match_key():
    assert match_key(True) == match_key(np.True_) != match_key(1)
    assert match_key(0) != match_key(False)
    assert match_key(1) == match_key(1.0) == match_key(np.int64(1))
    assert hash(match_key(True)) == hash(match_key(np.True_))


def test_bool_categories_do_not_match_ints():
    schema = Schema([Feature("b", "categorical", (False, True))])
    assert torch.equal(schema.encode([{"b": True}, {"b": np.False_}]), t([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match=r"row 0, column 'b': unseen category 1 "):
        schema.encode([{"b": 1}])
    with pytest.raises(ValueError, match=r"row 1, column 'b': unseen category 0 "):
        schema.encode([{"b": True}, {"b": 0}])
    other = Schema([Feature("b", "categorical", (False, True))], unseen="other")
    assert torch.equal(
        other.encode([{"b": 1}, {"b": 0.0}, {"b": True}]), t([[0, 0, 1], [0, 0, 1], [0, 1, 0]])
    )
    ints = Schema([Feature("i", "categorical", (0, 1))])
    with pytest.raises(ValueError, match=r"unseen category True"):
        ints.encode([{"i": True}])


def test_bools_and_ints_are_distinct_categories():
    f = Feature("m", "categorical", (True, 1, False, 0))
    schema = Schema([f])
    assert schema.columns == ("m=True", "m=1", "m=False", "m=0")
    X = schema.encode([{"m": 1.0}, {"m": True}, {"m": 0}, {"m": False}])
    assert torch.equal(X, t([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]]))
    decoded = schema.decode(X)
    assert [type(r["m"]) for r in decoded] == [int, bool, int, bool]


def test_infer_keeps_bools_and_ints_apart():
    rows = [{"m": True}, {"m": 1}, {"m": False}, {"m": 1}, {"m": 0}]
    schema = Schema.infer(rows)
    cats = schema.features[0].categories
    assert cats == (True, 1, False, 0) and [type(c) for c in cats] == [bool, int, bool, int]
    X = schema.encode(rows)
    assert X.argmax(1).tolist() == [0, 1, 2, 1, 3]


# ---------------------------------------------------------------------- decoding
@pytest.mark.parametrize("encoding", ["onehot", "ordinal"])
def test_decode_encode_round_trip(encoding):
    schema = Schema(
        [
            Feature("num"),
            Feature("opt", nullable=True, fill_value=3.0),
            Feature("color", "categorical", ("red", "green", "blue")),
            Feature("size", "categorical", ("S", "L"), nullable=True),
            Feature(7, "categorical", (10, 20, 30)),
            Feature("flag", "categorical", (False, True)),
        ],
        encoding=encoding,
    )
    rows = [
        {"num": 1.25, "opt": 3.0, "color": "green", "size": "S", 7: 30, "flag": True},
        {"num": -2.0, "opt": None, "color": "red", "size": None, 7: 10, "flag": False},
        {"num": 1e-7, "opt": -0.1, "color": "blue", "size": "L", 7: 20, "flag": True},
        {"num": 0.0, "opt": None, "color": "blue", "size": None, 7: 10, "flag": False},
    ]
    X = schema.encode(rows, dtype=torch.float64)
    assert schema.decode(X) == rows
    # float32 round trip is exact for values representable in float32
    assert schema.decode(schema.encode(rows[1:2])) == rows[1:2]


def test_decode_unseen_other_and_perturbed_tensors():
    schema = Schema(
        [Feature("x", nullable=True), Feature("c", "categorical", ("a", "b"))], unseen="other"
    )
    X = schema.encode([{"x": 1.0, "c": "zz"}])
    assert schema.decode(X) == [{"x": 1.0, "c": OTHER}]
    perturbed = torch.tensor([[0.5, 0.2, 0.1, 0.7, 0.3], [2.0, 0.9, 0.6, 0.1, 0.2]])
    assert schema.decode(perturbed) == [{"x": 0.5, "c": "b"}, {"x": None, "c": "a"}]
    ordinal = Schema([Feature("c", "categorical", ("a", "b"))], encoding="ordinal")
    assert ordinal.decode(torch.tensor([[-3.0], [0.6], [9.0]])) == [
        {"c": "a"},
        {"c": "b"},
        {"c": "b"},
    ]


def test_decode_shape_error():
    schema = mixed_schema()
    with pytest.raises(ValueError, match=r"decode expects a tensor \[n, 9\], got \[2, 8\]"):
        schema.decode(torch.zeros(2, 8))
    with pytest.raises(ValueError, match="decode expects"):
        schema.decode(torch.zeros(9))


def test_feature_columns():
    schema = mixed_schema()
    assert schema.feature_columns("num") == slice(0, 1)
    assert schema.feature_columns("opt") == slice(1, 3)
    assert schema.feature_columns("color") == slice(3, 6)
    assert schema.feature_columns("size") == slice(6, 9)
    for name in schema.names:
        cols = schema.columns[schema.feature_columns(name)]
        assert all(c == name or c.startswith((f"{name}:", f"{name}=")) for c in cols)
    ordinal = mixed_schema(encoding="ordinal")
    assert [ordinal.feature_columns(n) for n in ordinal.names] == [
        slice(0, 1),
        slice(1, 3),
        slice(3, 4),
        slice(4, 5),
    ]
    with pytest.raises(KeyError):
        schema.feature_columns("nope")


# ---------------------------------------------------------------------- persistence
@pytest.mark.parametrize(
    "schema",
    [
        mixed_schema(),
        mixed_schema(encoding="ordinal", unseen="other"),
        Schema(["a", "b"]),
        Schema([Feature(0, "categorical", (1, 2)), Feature(1, nullable=True, fill_value=0.5)]),
    ],
)
def test_to_dict_from_dict_round_trip(schema):
    data = schema.to_dict()
    back = Schema.from_dict(data)
    assert back == schema
    assert back.columns == schema.columns and back.features == schema.features
    if all(isinstance(n, str) for n in schema.names):  # JSON keeps str names and categories
        assert Schema.from_dict(json.loads(json.dumps(data))) == schema


def test_equality_and_repr():
    assert mixed_schema() == mixed_schema()
    assert mixed_schema() != mixed_schema(encoding="ordinal")
    assert mixed_schema() != Schema(["num"])
    assert mixed_schema() != "not a schema"
    assert repr(mixed_schema()) == (
        "Schema([num:num, opt:num, color:cat, size:cat], encoding='onehot', d=9)"
    )


def test_features_are_frozen_and_categories_tuples():
    f = Feature("c", "categorical", ["a", "b"])  # type: ignore[arg-type]
    assert f.categories == ("a", "b")
    with pytest.raises(AttributeError):
        f.name = "d"  # type: ignore[misc]
    assert math.isclose(Feature("x").fill_value, 0.0)
