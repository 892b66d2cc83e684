"""River's API for :class:`~torchstream.learners.OnlineLearner`: dict rows and pandas frames
at the edge, encoded once through the learner's :class:`~torchstream.schema.Schema`.

With ``feature_incremental=True`` a learned row's new keys first grow the schema and the
module (``_add_features``), and a row's absent keys are read as 0 (``_complete``)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from torchstream.schema import Schema

__all__ = ["RiverAPI"]


def _name_order(name: Hashable) -> tuple[str, str]:
    """Sort key of feature names of any hashable type."""
    return (type(name).__name__, str(name))


class RiverAPI:
    """``learn_one`` / ``predict_one`` / ``learn_many`` / ``predict_many`` on top of the tensor
    core (``_step``, ``_infer``, ``_targets_from_labels``, ``_labels_from_tensor``)."""

    feature_incremental: bool
    schema: Schema | None
    n_features: int | None
    n_samples_seen: int
    compile: bool
    compile_off_reason: str | None
    _last_forward: tuple[torch.Tensor, int, torch.Tensor] | None
    _last_encoded: tuple[list[Any], torch.Tensor] | None

    def _infer_schema(self, x: Mapping[Hashable, Any]) -> Schema:
        for k, v in x.items():
            if isinstance(v, (str, bytes)):
                raise ValueError(
                    f"feature {k!r} holds the string {v!r}: pass a Schema with its categories "
                    f"(schema=...) or put a one-hot encoder before the learner"
                )
        names = sorted(x, key=_name_order) if self.feature_incremental else list(x)
        schema = Schema(names)
        if self.n_features is not None and schema.n_columns != self.n_features:
            raise ValueError(
                f"row has {schema.n_columns} features, the learner expects {self.n_features}"
            )
        self.n_features = schema.n_columns
        return schema

    def _grow_schema(self, rows: Sequence[Mapping[Hashable, Any]]) -> None:
        """``feature_incremental``: the rows' keys the schema lacks become features (sorted)."""
        assert self.schema is not None
        known = self.schema._name_set
        new = {k for r in rows for k in r if k not in known}
        for i, r in enumerate(rows):  # checked before anything grows
            for k in new & r.keys():
                if isinstance(r[k], (str, bytes)):
                    raise ValueError(
                        f"row {self.n_samples_seen + i:,}: new feature {k!r} holds the string "
                        f"{r[k]!r}; put a one-hot encoder before the learner"
                    )
        if new:
            self._add_features(sorted(new, key=_name_order))

    def _complete(self, x: Mapping[Hashable, Any]) -> Mapping[Hashable, Any]:
        """``feature_incremental``: the row with exactly the schema's keys, an absent feature
        read as 0 and a key not (yet) learned left out (its weights would be 0)."""
        assert self.schema is not None
        if x.keys() == self.schema._name_set:
            return x
        return {n: x.get(n, 0.0) for n in self.schema.names}

    def _encode_one(self, x: Mapping[Hashable, Any], *, learning: bool = False) -> torch.Tensor:
        schema = self.schema
        if schema is None:
            schema = self.schema = self._infer_schema(x)
        if self.feature_incremental:
            if learning:
                self._grow_schema([x])
                schema = self.schema
            x = self._complete(x)
        if schema._plain_numeric and x.keys() == schema._name_set:
            vals = [x[n] for n in schema.names]
            last = self._last_encoded
            if last is not None and last[0] == vals:  # predict, then learn, the same row
                return last[1]
            try:  # finite and within the dtype's range (NaN compares false)
                if sum(map(abs, vals)) <= self._max_value:
                    X = torch.tensor([vals], dtype=self.dtype, device=self.device)
                    self._last_encoded = (vals, X)
                    return X
            except TypeError:
                pass
        return self._encode_rows([x])

    def _encode_rows(self, rows: Sequence[Mapping[Hashable, Any]]) -> torch.Tensor:
        """Rows through the schema, in float64 first: a value the learner's dtype cannot hold
        is an error naming its row and column, never an ``inf``."""
        assert self.schema is not None
        first = self.n_samples_seen
        X = self.schema.encode(rows, dtype=torch.float64, first_row=first)
        self._check_range(X, first)
        return X.to(device=self.device, dtype=self.dtype)

    def _encode_many(self, X: Any, *, learning: bool = False) -> torch.Tensor:
        fast = self._encode_frame(X)
        if fast is not None:
            return fast
        rows = X.to_dict(orient="records") if hasattr(X, "to_dict") else list(X)
        if not rows:
            raise ValueError("an empty batch of rows")
        if self.schema is None:
            self.schema = self._infer_schema(rows[0])
        if self.feature_incremental:
            if learning:
                self._grow_schema(rows)
            rows = [self._complete(r) for r in rows]
        return self._encode_rows(rows)

    def _encode_frame(self, X: Any) -> torch.Tensor | None:
        """A numeric frame whose columns are exactly the schema's features: one array copy.
        Anything else (or any bad value) takes the row path, which names the bad cell."""
        schema = self.schema
        if schema is None or not schema._plain_numeric or not hasattr(X, "columns"):
            return None
        if len(X.columns) != schema.n_features or set(X.columns) != schema._name_set:
            return None
        try:
            arr = X[list(schema.names)].to_numpy(dtype="float64")
        except (TypeError, ValueError):
            return None
        if not arr.flags.writeable:  # a read-only view of the frame's block
            arr = arr.copy()
        out = torch.from_numpy(arr)
        if not bool((out.abs() <= self._max_value).all()):  # non-finite or out of range
            return None
        return out.to(device=self.device, dtype=self.dtype)

    def learn_one(self, x: Mapping[Hashable, Any], y: Any) -> None:
        X = self._encode_one(x, learning=True)
        y_t = self._targets_from_labels([y], self.n_samples_seen)
        self._last_loss = self._step(X, y_t, self._reuse_forward(X))

    def learn_many(
        self, X: pd.DataFrame | Sequence[Mapping[Hashable, Any]], y: pd.Series | Sequence[Hashable]
    ) -> None:
        Xt = self._encode_many(X, learning=True)
        labels = y.tolist() if hasattr(y, "tolist") else list(y)
        if len(labels) != Xt.shape[0]:
            raise ValueError(f"{Xt.shape[0]} rows but {len(labels)} labels")
        self._last_loss = self._step(Xt, self._targets_from_labels(labels, self.n_samples_seen))

    def predict_one(self, x: Mapping[Hashable, Any]) -> Any:
        return self._labels_from_tensor(self._infer_one(self._encode_one(x)))[0]

    # The river protocol predicts a row and then learns the same row. The prediction of one row
    # runs with autograd and keeps its output; learn_one uses it instead of a second forward
    # pass when nothing changed in between (same encoded row, no step taken, no new output
    # unit) and the forward pass does not depend on state that learning updates first (input
    # scaling, train/eval-sensitive layers). The result is the same step, bit for bit. With
    # compile=True the prediction and the step are separate compiled graphs instead.
    def _infer_one(self, X: torch.Tensor) -> torch.Tensor:
        module = self._ensure_module(X)
        if (
            self._mode_sensitive
            or self.input_scaler is not None
            or not torch.is_grad_enabled()
            or (self.compile and self.compile_off_reason is None)
        ):
            return self._infer(X)
        out = module(X)
        self._last_forward = (X, self.n_samples_seen, out)
        with torch.no_grad():
            return self._outputs(out.detach())

    def _reuse_forward(self, X: torch.Tensor) -> torch.Tensor | None:
        last, self._last_forward = self._last_forward, None
        if last is None or last[1] != self.n_samples_seen:
            return None
        if last[0] is not X and not torch.equal(last[0], X):
            return None
        return last[2]

    def predict_many(self, X: pd.DataFrame | Sequence[Mapping[Hashable, Any]]) -> pd.Series:
        index = getattr(X, "index", None)
        return pd.Series(self._labels_from_tensor(self._infer(self._encode_many(X))), index=index)

    @torch.inference_mode()
    def _infer(self, X: torch.Tensor) -> torch.Tensor:
        self._ensure_module(X)
        self._set_mode(False)
        return self._prediction(X)

    def _prediction(self, X: torch.Tensor) -> torch.Tensor:  # pragma: no cover - the learner's
        """The outputs for checked inputs ``X``, the module built and its mode set."""
        raise NotImplementedError

    def _targets_from_labels(
        self, labels: Sequence[Any], first_row: int
    ) -> torch.Tensor:  # pragma: no cover - per task
        """Labels of the rows ``first_row, first_row + 1, ...`` as the training target."""
        raise NotImplementedError

    def _labels_from_tensor(self, out: torch.Tensor) -> list[Any]:  # pragma: no cover
        raise NotImplementedError

