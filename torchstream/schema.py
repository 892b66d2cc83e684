"""Feature schema: names, kinds and the dict / frame <-> float tensor encoding.

A :class:`Schema` is the single place where rows at the edges of the toolkit (river-style
``dict`` rows, pandas frames, CSV records) become float tensors ``[n, d]``.

Policies (stated once, applied everywhere):

* **Missing values** (``None``, ``float('nan')``, or a CSV missing token) are an error for a
  feature unless it is declared ``nullable``. A nullable numeric feature is encoded as two
  columns: its value (``fill_value`` where missing) and a ``"<name>:missing"`` indicator
  (1.0 where missing). A nullable categorical feature gets an explicit ``"<missing>"`` category.
  The in-memory streams built from a file or a frame impute causally instead
  (:func:`running_mean_fill`): a missing value at row ``t`` gets the mean of the values in rows
  ``0 .. t-1``, never one computed from later rows.
* **Unseen categories** are an error (``unseen="error"``, the default) or go to an explicit
  ``"<other>"`` category (``unseen="other"``), which has its own one-hot column / ordinal code.
* **Infinite values** are always an error, and so is a finite value too large for the
  tensor's float type (``1e39`` in ``float32``), which the conversion would make infinite. A
  dict row with an unknown key or without a declared feature is an error that names the key
  and the row.
* **Bools are not numbers** when categories (and class labels of a stream) are matched: Python has
  ``True == 1``, but a feature with categories ``(False, True)`` treats the value ``1`` as an
  unseen category, and ``True`` and ``1`` may be two distinct categories (see :func:`match_key`).
  Equal numbers of different types (``1`` and ``1.0``) are the same category. The names
  ``"<missing>"`` and ``"<other>"`` are reserved where the schema adds them.

Example
-------
>>> schema = Schema([Feature("age"), Feature("color", "categorical", ("red", "blue"))])
>>> schema.columns
('age', 'color=red', 'color=blue')
>>> schema.encode([{"age": 30, "color": "blue"}]).tolist()
[[30.0, 0.0, 1.0]]
>>> schema.encode([{"age": 30, "color": "green"}])
Traceback (most recent call last):
...
ValueError: row 0, column 'color': unseen category 'green' (known: 'red', 'blue'); use unseen='other' to map it to '<other>'
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

if TYPE_CHECKING:
    import pandas as pd

FeatureKind = Literal["numeric", "categorical"]
MISSING = "<missing>"
OTHER = "<other>"

__all__ = ["MISSING", "OTHER", "Feature", "Schema", "feature_names_for", "is_missing", "match_key",
           "running_mean_fill"]

_BOOL_TYPES = (bool, np.bool_)


def is_missing(value: Any) -> bool:
    """``True`` for ``None`` and NaN (the two spellings of a missing value in a row)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def running_mean_fill(values: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """``values`` (float ``[n]``) with each missing entry replaced by the mean of the present
    entries before it, or 0.0 where none precedes it: the imputation of a stream that never
    looks ahead. Present entries are returned unchanged.

    >>> running_mean_fill(np.array([0.0, 2.0, 0.0, 4.0, 0.0]), np.array([1, 0, 1, 0, 1], bool))
    array([0., 2., 2., 4., 3.])
    """
    miss = np.asarray(missing, dtype=bool)
    present = np.where(miss, 0.0, np.asarray(values, dtype=np.float64))
    sums = np.cumsum(present)  # a missing row adds 0 to the sum and 0 to the count
    counts = np.cumsum(~miss)
    means = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    return np.where(miss, means, present)


def match_key(value: Any) -> tuple[bool, Any]:
    """The dict key under which a category or a class label is looked up.

    Python hashes ``True`` like ``1`` and ``False`` like ``0``, so a plain dict would map the
    label ``1`` to the class ``True``. Keying on ``(is_bool, value)`` keeps bools (Python or
    numpy) apart from numbers, while ``1`` and ``1.0`` stay one key.
    """
    return (isinstance(value, _BOOL_TYPES), value)


def _check_unique(names: Sequence[Hashable]) -> None:
    """Raise ``ValueError`` naming the feature names that occur more than once."""
    if len(set(names)) == len(names):
        return
    seen: set[Hashable] = set()
    dup = {n for n in names if n in seen or seen.add(n)}  # type: ignore[func-returns-value]
    raise ValueError(f"duplicate feature names: {sorted(map(str, dup))}")


def feature_names_for(feature_names: Iterable[object] | None, n_features: int) -> list[str]:
    """The names of ``n_features`` feature columns: ``"x0".."x{d-1}"`` by default, else the
    given names (a sequence, or anything with a ``.columns`` attribute such as a
    :class:`Schema`), one per column, unique; the explainers, the drift monitors and the figures
    name the columns with it.

    >>> feature_names_for(None, 3), feature_names_for(("age", "income"), 2)
    (['x0', 'x1', 'x2'], ['age', 'income'])
    >>> feature_names_for(["a", "a"], 2)
    Traceback (most recent call last):
    ValueError: feature_names must be unique, duplicated: ['a']
    """
    if feature_names is None:
        return [f"x{j}" for j in range(n_features)]
    columns = getattr(feature_names, "columns", None)
    if columns is not None and not isinstance(feature_names, (str, bytes)):
        feature_names = columns
    if isinstance(feature_names, (str, bytes)):
        raise TypeError(f"feature_names must be a sequence of names, got {feature_names!r}")
    try:
        names = [str(n) for n in feature_names]
    except TypeError:
        msg = f"feature_names must be a sequence of names, got {feature_names!r}"
        raise ValueError(msg) from None
    if len(names) != n_features:
        raise ValueError(f"feature_names has {len(names)} names but n_features is {n_features}")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"feature_names must be unique, duplicated: {dup}")
    return names


@dataclass(frozen=True)
class Feature:
    """One input feature.

    Parameters
    ----------
    name
        The key of the feature in a dict row (any hashable; strings and ints are common).
    kind
        ``"numeric"`` or ``"categorical"``.
    categories
        Known categories of a categorical feature, in code order.
    nullable
        Whether missing values are allowed (see the module's policies).
    fill_value
        Value written in the numeric column where a nullable numeric feature is missing.
    """

    name: Hashable
    kind: FeatureKind = "numeric"
    categories: tuple[Any, ...] = field(default=())
    nullable: bool = False
    fill_value: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("numeric", "categorical"):
            raise ValueError(
                f"feature {self.name!r}: kind must be 'numeric' or 'categorical', got {self.kind!r}"
            )
        if self.kind == "numeric" and self.categories:
            raise ValueError(f"feature {self.name!r}: a numeric feature has no categories")
        if len({match_key(c) for c in self.categories}) != len(self.categories):
            raise ValueError(f"feature {self.name!r}: duplicate categories {self.categories!r}")
        object.__setattr__(self, "categories", tuple(self.categories))


class Schema:
    """Ordered features and their encoding into float columns.

    Parameters
    ----------
    features
        :class:`Feature` objects, or bare names for numeric features.
    encoding
        ``"onehot"`` (one column per category) or ``"ordinal"`` (one column holding the code).
    unseen
        ``"error"`` or ``"other"``: what an unseen category becomes.
    """

    def __init__(
        self,
        features: Iterable[Feature | Hashable],
        *,
        encoding: Literal["onehot", "ordinal"] = "onehot",
        unseen: Literal["error", "other"] = "error",
    ) -> None:
        feats = tuple(f if isinstance(f, Feature) else Feature(f) for f in features)
        if not feats:
            raise ValueError("a Schema needs at least one feature")
        names = [f.name for f in feats]
        _check_unique(names)
        if encoding not in ("onehot", "ordinal"):
            raise ValueError(f"encoding must be 'onehot' or 'ordinal', got {encoding!r}")
        if unseen not in ("error", "other"):
            raise ValueError(f"unseen must be 'error' or 'other', got {unseen!r}")
        self.features = feats
        self.encoding = encoding
        self.unseen = unseen
        self.names: tuple[Hashable, ...] = tuple(names)
        self._name_set = frozenset(names)
        self._index = {n: i for i, n in enumerate(names)}
        # Per feature: its categories including the explicit extra ones, and its column offset.
        self._levels: list[tuple[Any, ...]] = []
        self._codes: list[dict[Any, int]] = []
        columns: list[str] = []
        self._offsets: list[int] = []
        for f in feats:
            self._offsets.append(len(columns))
            if f.kind == "numeric":
                self._levels.append(())
                self._codes.append({})
                columns.append(str(f.name))
                if f.nullable:
                    columns.append(f"{f.name}:missing")
            else:
                levels = list(f.categories)
                if f.nullable:
                    levels.append(MISSING)
                if unseen == "other":
                    levels.append(OTHER)
                codes = {match_key(c): i for i, c in enumerate(levels)}
                if len(codes) != len(levels):
                    raise ValueError(
                        f"feature {f.name!r}: the category names {MISSING!r} and {OTHER!r} are "
                        f"reserved for missing and unseen values"
                    )
                self._levels.append(tuple(levels))
                self._codes.append(codes)
                if encoding == "onehot":
                    columns.extend(f"{f.name}={c}" for c in levels)
                else:
                    columns.append(str(f.name))
        self.columns: tuple[str, ...] = tuple(columns)
        self._plain_numeric = all(f.kind == "numeric" and not f.nullable for f in feats)

    def with_numeric(self, names: Sequence[Hashable]) -> Schema:
        """A new schema: this one's features followed by plain numeric features ``names`` (this
        one is unchanged). Its Python-level work is proportional to ``len(names)``; the rest
        is C-level copies of this schema's name tuples and lookups, so a schema that grows a few
        features at a time (``feature_incremental``) costs no per-feature loop per growth.

        >>> Schema(["a"]).with_numeric(["b", "c"]).columns
        ('a', 'b', 'c')
        """
        feats = tuple(Feature(n) for n in names)
        new = [f.name for f in feats]
        _check_unique([*new, *self._name_set.intersection(new)])
        out = object.__new__(Schema)
        out.features = self.features + feats
        out.encoding, out.unseen = self.encoding, self.unseen
        out.names = self.names + tuple(new)
        out._name_set = self._name_set.union(new)
        d, c = len(self.names), len(self.columns)
        out._index = dict(self._index)
        out._index.update((n, d + i) for i, n in enumerate(new))
        out._levels = [*self._levels, *(() for _ in new)]
        out._codes = [*self._codes, *({} for _ in new)]
        out._offsets = [*self._offsets, *range(c, c + len(new))]
        out.columns = self.columns + tuple(str(n) for n in new)
        out._plain_numeric = self._plain_numeric
        return out

    # ------------------------------------------------------------------ description
    @property
    def n_features(self) -> int:
        """Number of raw features (dict keys)."""
        return len(self.features)

    @property
    def n_columns(self) -> int:
        """Number of encoded float columns ``d``."""
        return len(self.columns)

    def __repr__(self) -> str:
        kinds = ", ".join(f"{f.name}:{f.kind[:3]}" for f in self.features)
        return f"Schema([{kinds}], encoding={self.encoding!r}, d={self.n_columns})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self.to_dict() == other.to_dict()

    # ------------------------------------------------------------------ inference
    @classmethod
    def infer(
        cls,
        rows: Iterable[Mapping[Hashable, Any]],
        *,
        categorical: Iterable[Hashable] = (),
        **kwargs: Any,
    ) -> Schema:
        """Infer a schema from dict rows.

        A feature is categorical when it is listed in ``categorical`` or when any of its
        non-missing values is a string or a bool; categories are kept in order of first
        appearance. A feature is nullable when any row holds a missing value for it. Numeric
        nullable features are filled with their observed mean.
        """
        forced = set(categorical)
        order: list[Hashable] = []
        seen_cats: dict[Hashable, dict[Any, Any]] = {}
        numeric_sum: dict[Hashable, float] = {}
        numeric_n: dict[Hashable, int] = {}
        nullable: set[Hashable] = set()
        n_rows = 0
        for i, row in enumerate(rows):
            n_rows += 1
            if i == 0:
                order = list(row)
            elif row.keys() != set(order):
                missing = [k for k in order if k not in row]
                extra = [k for k in row if k not in set(order)]
                raise ValueError(
                    f"row {i}: keys differ from row 0 (missing {missing}, unexpected {extra})"
                )
            for k, v in row.items():
                if is_missing(v):
                    nullable.add(k)
                elif k in forced or isinstance(v, (str, bool)) or k in seen_cats:
                    if k in numeric_n and k not in seen_cats:
                        raise ValueError(
                            f"row {i}, column {k!r}: value {v!r} is not numeric but earlier rows "
                            f"were; declare the feature categorical or fix the value"
                        )
                    seen_cats.setdefault(k, {}).setdefault(match_key(v), v)
                else:
                    if isinstance(v, float) and math.isinf(v):
                        raise ValueError(f"row {i}, column {k!r}: infinite value")
                    numeric_sum[k] = numeric_sum.get(k, 0.0) + float(v)
                    numeric_n[k] = numeric_n.get(k, 0) + 1
        if n_rows == 0:
            raise ValueError("cannot infer a schema from an empty sequence of rows")
        feats = []
        for k in order:
            if k in seen_cats:
                cats = tuple(seen_cats[k].values())
                feats.append(Feature(k, "categorical", cats, nullable=k in nullable))
            else:
                n = numeric_n.get(k, 0)
                fill = numeric_sum[k] / n if n else 0.0
                feats.append(Feature(k, "numeric", nullable=k in nullable, fill_value=fill))
        return cls(feats, **kwargs)

    # ------------------------------------------------------------------ encoding
    def encode(
        self,
        rows: Sequence[Mapping[Hashable, Any]] | pd.DataFrame,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
        first_row: int = 0,
    ) -> torch.Tensor:
        """Encode dict rows (or a pandas DataFrame) into a tensor ``[n, d]``.

        ``first_row`` is the index of ``rows[0]`` in its stream; it is used in error messages.
        """
        if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # pandas DataFrame
            rows = rows.to_dict(orient="records")
        if isinstance(rows, Mapping):
            raise TypeError("encode expects a sequence of rows; use encode_one for a single dict")
        if self._plain_numeric:
            values = [self._numeric_row(r, first_row + i) for i, r in enumerate(rows)]
            out = torch.tensor(values, dtype=torch.float64).reshape(len(values), self.n_columns)
            self._check_finite(out, first_row)
        else:
            values = [self._mixed_row(r, first_row + i) for i, r in enumerate(rows)]
            out = torch.tensor(values, dtype=torch.float64).reshape(len(values), self.n_columns)
        self._check_fits(out, dtype, first_row)
        return out.to(device=device, dtype=dtype)

    def encode_one(
        self,
        row: Mapping[Hashable, Any],
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """Encode one dict row into a tensor ``[d]``."""
        return self.encode([row], dtype=dtype, device=device)[0]

    def _check_keys(self, row: Mapping[Hashable, Any], i: int) -> None:
        if not isinstance(row, Mapping):
            raise TypeError(f"row {i}: expected a dict, got {type(row).__name__}")
        if row.keys() != self._name_set:
            missing = [str(n) for n in self.names if n not in row]
            extra = [str(k) for k in row if k not in self._name_set]
            parts = []
            if missing:
                parts.append(f"missing features {missing}")
            if extra:
                parts.append(f"unknown features {extra}")
            raise ValueError(f"row {i}: " + " and ".join(parts))

    def _numeric_row(self, row: Mapping[Hashable, Any], i: int) -> list[float]:
        self._check_keys(row, i)
        try:
            return [float(row[n]) for n in self.names]
        except (TypeError, ValueError):
            for n in self.names:
                v = row[n]
                if v is None:
                    raise ValueError(
                        f"row {i}, column {n!r}: missing value in a feature that is not nullable"
                    ) from None
                try:
                    float(v)
                except (TypeError, ValueError):
                    raise ValueError(
                        f"row {i}, column {n!r}: non-numeric value {v!r} in a numeric feature"
                    ) from None
            raise

    def _check_finite(self, out: torch.Tensor, first_row: int) -> None:
        bad = ~torch.isfinite(out)
        if bool(bad.any()):
            r, c = (int(v) for v in bad.nonzero()[0])
            what = "missing (NaN)" if math.isnan(float(out[r, c])) else "infinite"
            raise ValueError(
                f"row {first_row + r}, column {self.columns[c]!r}: {what} value in a feature "
                f"that is not nullable"
            )

    def _check_fits(self, out: torch.Tensor, dtype: torch.dtype, first_row: int) -> None:
        """Every (finite, float64) value of ``out`` fits ``dtype``: a narrower float type would
        turn a larger magnitude into an infinity, which the policy calls an error."""
        if not dtype.is_floating_point or torch.finfo(dtype).max >= torch.finfo(out.dtype).max:
            return
        largest = torch.finfo(dtype).max
        bad = out.abs() > largest
        if bool(bad.any()):
            r, c = (int(v) for v in bad.nonzero()[0])
            kind = str(dtype).removeprefix("torch.")
            raise ValueError(
                f"row {first_row + r}, column {self.columns[c]!r}: {float(out[r, c]):g} overflows "
                f"{kind} (largest magnitude {largest:.4g}; it would become infinite); rescale "
                f"the column or encode with dtype=torch.float64"
            )

    def _mixed_row(self, row: Mapping[Hashable, Any], i: int) -> list[float]:
        self._check_keys(row, i)
        out: list[float] = []
        for j, f in enumerate(self.features):
            v = row[f.name]
            missing = is_missing(v)
            if missing and not f.nullable:
                raise ValueError(
                    f"row {i}, column {f.name!r}: missing value in a feature that is not nullable"
                )
            if f.kind == "numeric":
                if missing:
                    out.append(f.fill_value)
                else:
                    try:
                        x = float(v)
                    except (TypeError, ValueError):
                        raise ValueError(
                            f"row {i}, column {f.name!r}: non-numeric value {v!r} in a numeric "
                            f"feature"
                        ) from None
                    if not math.isfinite(x):
                        raise ValueError(f"row {i}, column {f.name!r}: infinite value")
                    out.append(x)
                if f.nullable:
                    out.append(1.0 if missing else 0.0)
                continue
            codes = self._codes[j]
            if missing:
                code = codes[match_key(MISSING)]
            else:
                found = codes.get(match_key(v))
                if found is not None:
                    code = found
                elif self.unseen == "other":
                    code = codes[match_key(OTHER)]
                else:
                    known = ", ".join(repr(c) for c in f.categories)
                    raise ValueError(
                        f"row {i}, column {f.name!r}: unseen category {v!r} (known: {known}); "
                        f"use unseen='other' to map it to '{OTHER}'"
                    )
            if self.encoding == "ordinal":
                out.append(float(code))
            else:
                onehot = [0.0] * len(codes)
                onehot[code] = 1.0
                out.extend(onehot)
        return out

    # ------------------------------------------------------------------ decoding
    def decode(self, X: torch.Tensor) -> list[dict[Hashable, Any]]:
        """Turn encoded rows ``[n, d]`` back into dict rows.

        Numeric features give floats (``None`` where the missing indicator is set); categorical
        features give the category with the largest one-hot value (or the rounded ordinal code).
        This is how perturbed tensors reach models that only read dicts (river adapters).
        """
        if X.dim() != 2 or X.shape[1] != self.n_columns:
            raise ValueError(f"decode expects a tensor [n, {self.n_columns}], got {list(X.shape)}")
        cols = X.detach().to("cpu", torch.float64).numpy()
        rows: list[dict[Hashable, Any]] = [{} for _ in range(cols.shape[0])]
        for j, f in enumerate(self.features):
            o = self._offsets[j]
            if f.kind == "numeric":
                vals = cols[:, o].tolist()
                if f.nullable:
                    miss = (cols[:, o + 1] > 0.5).tolist()
                    vals = [None if m else v for v, m in zip(vals, miss)]
            else:
                levels = self._levels[j]
                if self.encoding == "onehot":
                    codes = cols[:, o : o + len(levels)].argmax(axis=1).tolist()
                else:
                    codes = cols[:, o].round().clip(0, len(levels) - 1).astype(int).tolist()
                vals = [None if levels[c] == MISSING else levels[c] for c in codes]
            for r, v in zip(rows, vals):
                r[f.name] = v
        return rows

    def feature_columns(self, name: Hashable) -> slice:
        """The slice of encoded columns that belong to feature ``name``."""
        j = self._index[name]
        end = self._offsets[j + 1] if j + 1 < len(self._offsets) else self.n_columns
        return slice(self._offsets[j], end)

    def feature_groups(self) -> dict[str, list[int]]:
        """``{feature name: its encoded column indices}``, in feature order: the ``feature_groups``
        of the explainers. A one-hot block, and a numeric column with its missing-value
        indicator, form one group; the groups cover ``0..n_columns-1`` exactly once.

        >>> s = Schema([Feature("a", nullable=True), Feature("c", "categorical", ("x", "y"))])
        >>> s.feature_groups()
        {'a': [0, 1], 'c': [2, 3]}
        """
        groups: dict[str, list[int]] = {}
        for name in self.names:
            key = str(name)
            if key in groups:
                raise ValueError(f"features {name!r} and another have the same name as a string")
            cols = self.feature_columns(name)
            groups[key] = list(range(cols.start, cols.stop))
        return groups

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:  # JSON-like values (lists of feature dicts)
        """A plain-Python description (JSON-able for str / int names and categories)."""
        return {
            "encoding": self.encoding,
            "unseen": self.unseen,
            "features": [
                {
                    "name": f.name,
                    "kind": f.kind,
                    "categories": list(f.categories),
                    "nullable": f.nullable,
                    "fill_value": f.fill_value,
                }
                for f in self.features
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:
        feats = [
            Feature(d["name"], d["kind"], tuple(d["categories"]), d["nullable"], d["fill_value"])
            for d in data["features"]
        ]
        return cls(feats, encoding=data["encoding"], unseen=data["unseen"])
