"""River's API for the Dynamic Model Tree: dict rows and pandas frames become tensor batches.

Columns: the keys of the first learned row, sorted (so that the key order of a dict never
matters); categorical features (``cat_features``) get float codes in order of first appearance
(equality splits only compare codes). ``feature_incremental`` says what an absent or new key
means (class docstring of :class:`~torchstream.trees.DynamicModelTree`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from torchstream.schema import match_key

__all__ = ["RiverRows"]


def _sort_key(k: Hashable) -> tuple[str, str]:
    return (type(k).__name__, str(k))


class RiverRows:
    """``learn_one`` / ``predict_one`` / ``predict_proba_one`` / ``learn_many`` /
    ``predict_many`` / ``predict_proba_many`` on top of the tree's tensor API."""

    # provided by the tree
    feature_names: list[Hashable] | None
    n_features: int | None
    classes_: list[Hashable]
    _codes: dict[tuple[bool, Hashable], int]
    _categories: dict[int, dict[tuple[bool, Hashable], float]]
    feature_incremental: bool
    cat_features: list[Hashable] | None

    # ------------------------------------------------------------------ rows -> tensors
    def _cat_columns(self) -> set[int]:
        return set(self._cat_indices())  # type: ignore[attr-defined]

    def _start_schema(self, x: Mapping[Hashable, Any]) -> None:
        if self.n_features is not None and self.feature_names is None:
            raise ValueError("the tree was trained on tensors: dict rows have no known columns")
        if self.feature_names is None:
            self.feature_names = sorted(x, key=_sort_key)
            self.n_features = len(self.feature_names)
            self._cat_columns()  # validate cat_features against the names

    def _add_features(self, keys: Sequence[Hashable]) -> None:
        assert self.feature_names is not None
        self.feature_names.extend(sorted(keys, key=_sort_key))
        self.n_features = len(self.feature_names)
        self._grow(add_features=len(keys))  # type: ignore[attr-defined]
        self._routing = None

    def _encode_rows(
        self, rows: Sequence[Mapping[Hashable, Any]], *, learning: bool
    ) -> torch.Tensor:
        if learning:
            self._start_schema(rows[0])
        names = self.feature_names
        assert names is not None
        index = {k: j for j, k in enumerate(names)}
        zero = self.feature_incremental
        if learning:
            new = [k for r in rows for k in r if k not in index]
            if new:
                if not zero:
                    raise ValueError(
                        f"feature {new[0]!r} is not one of the tree's features "
                        f"{names!r} (feature_incremental=True adds new features)"
                    )
                self._add_features(list(dict.fromkeys(new)))
                index = {k: j for j, k in enumerate(names)}
        cats = self._cat_columns()
        out = []
        for i, x in enumerate(rows):
            vals = [0.0] * len(names)
            for k, v in x.items():
                j = index.get(k)
                if j is None:
                    if zero:  # prediction: a key the tree never saw has weight 0 everywhere
                        continue
                    raise ValueError(
                        f"row {i}: feature {k!r} is not one of the tree's features {names!r} "
                        f"(with feature_incremental=True a key not yet learned is ignored)"
                    )
                vals[j] = self._encode_value(i, k, j, v, j in cats, learning)
            if not zero and len(x) < len(names):
                absent = [k for k in names if k not in x]
                raise ValueError(
                    f"row {i}: feature {absent[0]!r} is absent "
                    f"(feature_incremental=True reads absent features as 0)"
                )
            out.append(vals)
        return torch.tensor(out, dtype=self.dtype, device=self.device)  # type: ignore[attr-defined]

    def _encode_value(
        self, i: int, key: Hashable, j: int, v: Any, categorical: bool, learning: bool
    ) -> float:
        if categorical:
            codes = self._categories.setdefault(j, {})
            code = codes.get(match_key(v))
            if code is None:
                if not learning:
                    return -1.0  # an unseen category: equal to no split value, goes right
                code = codes[match_key(v)] = float(len(codes))
            return code
        if isinstance(v, (str, bytes)) or v is None:
            raise ValueError(
                f"row {i}: feature {key!r} holds {v!r}; declare it in cat_features "
                f"for equality splits"
            )
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"row {i}: feature {key!r} holds {v!r}, not a number") from None
        if not math.isfinite(f):
            raise ValueError(f"row {i}: feature {key!r} holds the non-finite value {v!r}")
        return f

    def _label_codes(self, labels: Sequence[Any]) -> torch.Tensor:
        codes = []
        for lab in labels:
            if lab is None:
                raise ValueError("a label is None")
            code = self._codes.get(match_key(lab))
            if code is None:
                code = self._add_class(lab)  # type: ignore[attr-defined]
            codes.append(code)
        return torch.tensor(codes, dtype=torch.long, device=self.device)  # type: ignore[attr-defined]

    def _proba_rows(self, rows: Sequence[Mapping[Hashable, Any]]) -> torch.Tensor | None:
        """Probabilities ``[n, len(classes_)]`` renormalised over the seen classes."""
        if not self.classes_ or self.feature_names is None:
            return None
        p = self.predict_proba(self._encode_rows(rows, learning=False))  # type: ignore[attr-defined]
        p = p[:, : len(self.classes_)].double()
        return p / p.sum(1, keepdim=True)

    # ------------------------------------------------------------------ river API
    def learn_one(self, x: Mapping[Hashable, Any], y: Any) -> None:
        X = self._encode_rows([x], learning=True)
        self.learn(X, self._label_codes([y]))  # type: ignore[attr-defined]

    def predict_proba_one(self, x: Mapping[Hashable, Any]) -> dict[Hashable, float]:
        p = self._proba_rows([x])
        return {} if p is None else dict(zip(self.classes_, p[0].tolist()))

    def predict_one(self, x: Mapping[Hashable, Any]) -> Any:
        p = self._proba_rows([x])
        return None if p is None else self.classes_[int(p[0].argmax())]

    @staticmethod
    def _frame_rows(X: Any) -> list[Mapping[Hashable, Any]]:
        rows = X.to_dict(orient="records") if hasattr(X, "to_dict") else list(X)
        if not rows:
            raise ValueError("X is an empty batch of rows")
        return rows

    def learn_many(self, X: Any, y: Any) -> None:
        rows = self._frame_rows(X)
        labels = y.tolist() if hasattr(y, "tolist") else list(y)
        if len(labels) != len(rows):
            raise ValueError(f"X has {len(rows)} rows but y has {len(labels)} labels")
        Xt = self._encode_rows(rows, learning=True)
        self.learn(Xt, self._label_codes(labels))  # type: ignore[attr-defined]

    def predict_proba_many(self, X: Any) -> Any:
        rows = self._frame_rows(X)
        p = self._proba_rows(rows)
        index = getattr(X, "index", None)
        if p is None:
            return pd.DataFrame(index=index)
        return pd.DataFrame(p.cpu().numpy(), columns=list(self.classes_), index=index)

    def predict_many(self, X: Any) -> Any:
        rows = self._frame_rows(X)
        p = self._proba_rows(rows)
        index = getattr(X, "index", None)
        if p is None:
            return pd.Series([None] * len(rows), index=index, dtype=object)
        return pd.Series([self.classes_[i] for i in p.argmax(1).tolist()], index=index)
