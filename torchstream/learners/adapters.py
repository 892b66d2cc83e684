"""Adapters that turn river and scikit-learn models into a :data:`~torchstream.typing.ModelFn`.

Explainers call a ``ModelFn`` with a tensor of rows ``[n, d]`` and expect ``[n, k]`` class
probabilities (classifiers) or ``[n]`` values (regressors) back, on the input's device and
dtype. Torch modules and :class:`~torchstream.learners.OnlineLearner` already are ``ModelFn``;
:func:`as_model_fn` wraps everything else.

>>> from river import linear_model
>>> from torchstream import Schema
>>> model = linear_model.LogisticRegression()
>>> for x, y in [({"a": 1.0, "b": 0.0}, True), ({"a": 0.0, "b": 1.0}, False)] * 20:
...     model.learn_one(x, y)
>>> fn = as_model_fn(model, schema=Schema(["a", "b"]), classes=[False, True])
>>> fn(torch.tensor([[1.0, 0.0], [0.0, 1.0]])).argmax(1).tolist()
[1, 0]
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from river import base as river_base
from river.tree.nodes.branch import NominalBinaryBranch, NumericBinaryBranch
from river.tree.nodes.htc_nodes import LeafMajorityClass, LeafNaiveBayes, LeafNaiveBayesAdaptive
from river.tree.splitter import GaussianSplitter
from torch import nn

from torchstream.schema import Schema
from torchstream.typing import ModelFn

__all__ = ["RiverModelFn", "SklearnModelFn", "as_model_fn"]

Output = Literal["auto", "proba", "value"]


def _to_tensor(values: Any, like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(np.array(values, dtype=np.float64)).to(like.device, like.dtype)


class RiverModelFn:
    """A river model as a ``ModelFn``: rows are decoded to dicts through ``schema``.

    Parameters
    ----------
    model
        A river classifier or regressor (never trained here).
    schema
        How the tensor columns map back to the model's features.
    output
        ``"proba"`` (classifiers: ``predict_proba``), ``"value"`` (``predict``), or ``"auto"``.
    classes
        Column order of the probabilities. Default: the classes the model has reported so far,
        sorted; fix them for a stable output width.
    """

    def __init__(
        self,
        model: Any,
        schema: Schema,
        *,
        output: Output = "auto",
        classes: Sequence[Hashable] | None = None,
    ) -> None:
        if output == "auto":
            output = "proba" if isinstance(model, river_base.Classifier) else "value"
        if output not in ("proba", "value"):
            raise ValueError(f"output must be 'auto', 'proba' or 'value', got {output!r}")
        self.model, self.schema, self.output = model, schema, output
        self.classes = list(classes) if classes is not None else None

        self._tree: _CompiledTree | None = None  # vectorised Hoeffding tree, if it applies
        self._tree_key: tuple[Any, ...] | None = None

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        if self.output == "proba":
            tree = self._compiled_tree()
            if tree is not None:
                if X.dim() != 2 or X.shape[1] != self.schema.n_columns:
                    raise ValueError(
                        f"X must have shape [n, {self.schema.n_columns}], got {list(X.shape)}"
                    )
                if X.dtype is torch.float64 and X.device.type == "cpu":
                    return torch.from_numpy(tree.predict_proba(X.detach().numpy()))
                cols = X.detach().to("cpu", torch.float64).numpy()
                return torch.from_numpy(tree.predict_proba(cols)).to(X.device, X.dtype)
        rows = self.schema.decode(X)
        if self.output == "value":
            many = getattr(self.model, "predict_many", None)
            if many is not None:
                try:
                    return _to_tensor(many(pd.DataFrame(rows)).to_numpy(), X)
                except NotImplementedError:
                    pass
            return _to_tensor([self.model.predict_one(r) for r in rows], X)
        probas = [self.model.predict_proba_one(r) for r in rows]
        if self.classes is None:
            seen = {c for p in probas for c in p}
            try:
                self.classes = sorted(seen)
            except TypeError:
                self.classes = list(seen)
        out = [[p.get(c, 0.0) for c in self.classes] for p in probas]
        return _to_tensor(out, X).reshape(len(rows), len(self.classes))

    def _compiled_tree(self) -> _CompiledTree | None:
        """The vectorised form of a river ``HoeffdingTreeClassifier`` (rebuilt whenever the
        tree has learnt since), or None where it does not apply (other models, node or
        splitter types it does not know, non-numeric or nullable features)."""
        model = self.model
        if type(model).__name__ != "HoeffdingTreeClassifier" or not self.schema._plain_numeric:
            return None
        key = (
            id(model._root),
            model._train_weight_seen_by_model,
            model.nb_threshold,
            len(model.classes),
        )
        if key != self._tree_key:
            if self.classes is None:  # as the generic path: the classes the model reports
                try:
                    self.classes = sorted(model.classes)
                except TypeError:
                    self.classes = list(model.classes)
            try:
                self._tree = _CompiledTree.build(model, self.schema, self.classes)
            except _Unsupported:
                self._tree = None
            self._tree_key = key
        return self._tree


class _Unsupported(Exception):
    """A part of a tree that the vectorised path does not know."""


class _CompiledTree:
    """A river ``HoeffdingTreeClassifier`` flattened for whole batches of rows.

    Each branch becomes one comparison of a column with its threshold (``x <= t`` numeric,
    ``x == v`` nominal) and the rows are routed bottom-up with nested ``where``; a leaf that
    predicts its class distribution contributes a constant row, a naive Bayes leaf the
    per-class Gaussian log-likelihoods of all rows, in the order river sums them (prior, then
    the features in the leaf's splitter order), normalised with log-sum-exp as river does.
    Arithmetic runs in float64 ``numpy`` with the same operations as river's per-row code
    (``pow`` for the square), so the predictions equal ``predict_proba_one``'s. A naive Bayes
    leaf that has seen one class predicts it with probability ``exp(v - v) = 1`` and is a
    constant row for every batch whose values are too small to overflow its vote ``v``.
    """

    def __init__(self) -> None:
        self.n_out = 0
        self.tests: list[tuple[int, str, float]] = []  # (column, "le" / "eq", value)
        self.root: Any = None  # int (leaf) or (test index, left, right) nested tuples
        self.const: np.ndarray = np.zeros((0, 0))  # [n_leaves, n_out] constant leaf rows
        self.nb: dict[int, tuple[Any, ...]] = {}  # leaf -> naive Bayes parameters
        # naive Bayes leaves that have seen one class: their constant row is that class's
        # one-hot row, exact for every batch whose largest |x| is at most `one_class_safe`
        self.nb_one_class: dict[int, tuple[Any, ...]] = {}
        self.one_class_safe = math.inf
        self.n_leaves = 0

    @classmethod
    def build(cls, model: Any, schema: Schema, classes: list[Hashable]) -> _CompiledTree:
        col = {f.name: schema._offsets[j] for j, f in enumerate(schema.features)}
        out = {c: i for i, c in enumerate(classes)}
        self = cls()
        self.n_out = len(classes)
        base = dict.fromkeys(sorted(model.classes), 0.0)  # predict_proba_one's start
        rows: list[list[float]] = []

        def const_row(pred: dict) -> list[float]:
            proba = dict(base)
            proba.update(pred)
            if any(c not in out for c in proba):
                raise _Unsupported("a class outside `classes`")
            row = [0.0] * self.n_out
            for c, p in proba.items():
                row[out[c]] = p
            return row

        def leaf(node: Any) -> int:
            kind = type(node)
            if kind not in (LeafMajorityClass, LeafNaiveBayes, LeafNaiveBayesAdaptive):
                raise _Unsupported(kind.__name__)
            index = len(rows)
            active = node.is_active()
            if kind is LeafNaiveBayes:
                naive = active and node.total_weight >= model.nb_threshold
            elif kind is LeafNaiveBayesAdaptive:
                naive = active and node._nb_correct_weight >= node._mc_correct_weight
            else:
                naive = False
            if naive:
                params = self._naive_bayes(node, col, out, GaussianSplitter)
                rows.append(const_row({}))  # river's prediction where no class has weight
                one_class = params[-1] if params else None
                if one_class is not None:
                    bound, row, safe = one_class
                    rows[-1] = row.tolist()
                    self.nb_one_class[index] = params
                    self.one_class_safe = min(self.one_class_safe, safe)
                elif params:
                    self.nb[index] = params
            else:
                rows.append(const_row(LeafMajorityClass.prediction(node, {})))
            return index

        def walk(node: Any) -> Any:
            kind = type(node)
            if kind is NumericBinaryBranch or kind is NominalBinaryBranch:
                if node.feature not in col:
                    raise _Unsupported(f"feature {node.feature!r} not in the schema")
                if kind is NumericBinaryBranch:
                    test = (col[node.feature], "le", float(node.threshold))
                else:
                    if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                        raise _Unsupported("a non-numeric nominal split value")
                    test = (col[node.feature], "eq", float(node.value))
                self.tests.append(test)
                left, right = node.children
                return (len(self.tests) - 1, walk(left), walk(right))
            if hasattr(node, "children"):
                raise _Unsupported(kind.__name__)
            return leaf(node)

        self.root = None if model._root is None else walk(model._root)
        if self.root is None:
            rows.append(const_row({}))
            self.root = 0
        self.const = np.array(rows, dtype=np.float64).reshape(len(rows), self.n_out)
        self.n_leaves = len(rows)
        return self

    @staticmethod
    def _naive_bayes(node: Any, col: dict, out: dict, gaussian: type) -> tuple[Any, ...]:
        """Per-class prior and per-(class, feature) Gaussian constants of a naive Bayes leaf,
        computed with river's own formulas (``log_pdf`` split into its x-free parts)."""
        stats = node.stats
        total = sum(stats.values())
        if not stats or total == 0:
            return ()  # river predicts {} here: the constant row already says so
        feats = []
        for att, splitter in (node.splitters or {}).items():
            if type(splitter) is not gaussian:
                raise _Unsupported(type(splitter).__name__)
            if att in col:
                feats.append((att, splitter))
        order = list(stats)  # river's vote order
        if any(c not in out for c in order):
            raise _Unsupported("a class outside `classes`")
        half_log_tau = 0.5 * math.log(math.tau)
        n_c, n_f = len(order), len(feats)
        prior = np.zeros(n_c)
        use = np.zeros((n_c, n_f), dtype=bool)
        mu, m2v, hlv = np.zeros((n_c, n_f)), np.ones((n_c, n_f)), np.zeros((n_c, n_f))
        for i, c in enumerate(order):
            weight = stats[c]
            if weight <= 0:
                continue  # river: vote 0.0, no likelihood terms
            prior[i] = math.log(weight / total)
            for j, (_, splitter) in enumerate(feats):
                dist = splitter._att_dist_per_class.get(c)
                if dist is None:
                    continue
                var = dist._var
                n = var.mean.n
                if n > var.ddof:
                    variance = var._S / (n - var.ddof)
                    if variance > 0.0:
                        use[i, j] = True
                        mu[i, j] = var.mean._mean
                        m2v[i, j] = -2.0 * variance
                        hlv[i, j] = 0.5 * math.log(variance)
        one_class = None
        if n_c == 1:  # river: exp(v - v) = 1.0 wherever the vote v is finite, which holds
            # while every term stays above -1e300 / (F + 1), i.e. for
            # |x - mu| <= sqrt(2 var) sqrt(1e300 / (F + 1))
            spread = np.sqrt(-np.where(use, m2v, -1.0)) * math.sqrt(1e300 / (n_f + 1))
            bound = np.where(use, spread, math.inf)
            row = np.zeros(len(out))
            row[out[order[0]]] = 1.0
            # |x| <= min(bound - |mu|) keeps every |x - mu| within its bound
            safe = float(np.min(np.where(use, bound - np.abs(mu), math.inf), initial=math.inf))
            one_class = (bound, row, safe)
        # a class without a density for a feature (or without weight) gets a term of +0.0
        m2v[~use] = math.inf
        hlt = np.where(use, half_log_tau, 0.0)
        twos = np.full((n_c, n_f), 2.0)  # an array exponent: numpy's pow, not a squaring
        cols = np.array([col[a] for a, _ in feats], dtype=np.int64)
        where = np.array([out[c] for c in order], dtype=np.int64)
        identity = bool(np.array_equal(where, np.arange(len(out))))
        return (cols, prior, twos, mu, m2v, hlt, hlv, use, where, identity, one_class)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Class probabilities ``[n, n_out]`` of the rows ``X [n, d]`` (float64)."""
        n = X.shape[0]
        if n == 0:
            return np.zeros((0, self.n_out))
        nb = self.nb
        if self.nb_one_class and not np.abs(X).max() <= self.one_class_safe:
            nb = {**self.nb, **self.nb_one_class}  # rows far out (or NaN): river's arithmetic
        if isinstance(self.root, int):  # a single leaf
            params = nb.get(self.root)
            if params is not None:
                return self._nb_rows(X, params)
            return np.repeat(self.const[self.root : self.root + 1], n, axis=0)
        passed = [X[:, c] <= v if op == "le" else X[:, c] == v for c, op, v in self.tests]

        def route(node: Any) -> Any:
            if isinstance(node, int):
                return node
            t, left, right = node
            return np.where(passed[t], route(left), route(right))

        leaf = route(self.root)  # [n] leaf index of every row
        proba = self.const[leaf]
        for index, params in nb.items():
            mask = leaf == index
            if mask.all():
                return self._nb_rows(X, params)
            if mask.any():
                at = mask.nonzero()[0]
                proba[at] = self._nb_rows(X[at], params)
        return proba

    def _nb_rows(self, X: np.ndarray, params: tuple[Any, ...]) -> np.ndarray:
        """River's naive Bayes votes of a leaf, log-sum-exp normalised, for the rows ``X``.

        A leaf that has seen one class only predicts it with probability 1 where its vote
        cannot overflow. A feature a class has no density for adds ``+0.0`` here (infinite
        ``-2 var``, zero constants), which leaves the sequential sum unchanged, so no mask is
        needed; only where a vote is not finite (a log-density of ``-inf`` or NaN, which river
        skips) are the votes summed again with the mask.
        """
        cols, prior, twos, mu, m2v, hlt, hlv, use, where, identity, one_class = params
        x = X[:, cols][:, None, :]  # [n, 1, F]
        if one_class is not None and (np.abs(x - mu) <= one_class[0]).all():
            return np.repeat(one_class[1][None, :], X.shape[0], axis=0)
        if len(cols) == 0:
            votes = np.repeat(prior[None, :], X.shape[0], axis=0)
        else:
            terms = np.power(x - mu, twos) / m2v - hlt - hlv  # [n, C, F], as river's log_pdf
            terms[:, :, 0] += prior  # prior + first term, then the others in order
            votes = np.cumsum(terms, axis=2)[:, :, -1]
            if not np.isfinite(votes).all():
                terms = np.power(x - mu, twos) / m2v - hlt - hlv
                terms = np.where(use & (terms > -math.inf), terms, 0.0)
                terms[:, :, 0] += prior
                votes = np.cumsum(terms, axis=2)[:, :, -1]
        top = votes.max(1, keepdims=True)
        lse = top + np.log(np.cumsum(np.exp(votes - top), axis=1)[:, -1:])
        proba = np.exp(votes - lse)
        if identity:
            return proba
        rows = np.zeros((X.shape[0], self.n_out))
        rows[:, where] = proba
        return rows


class SklearnModelFn:
    """A fitted scikit-learn estimator as a ``ModelFn`` (``predict_proba`` or ``predict``)."""

    def __init__(self, estimator: Any, *, output: Output = "auto") -> None:
        if output == "auto":
            output = "proba" if hasattr(estimator, "predict_proba") else "value"
        if output not in ("proba", "value"):
            raise ValueError(f"output must be 'auto', 'proba' or 'value', got {output!r}")
        if output == "proba" and not hasattr(estimator, "predict_proba"):
            raise ValueError(f"{type(estimator).__name__} has no predict_proba")
        self.estimator, self.output = estimator, output

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        Xn = X.detach().cpu().numpy()
        if self.output == "proba":
            return _to_tensor(self.estimator.predict_proba(Xn), X)
        return _to_tensor(self.estimator.predict(Xn), X).reshape(-1)


def as_model_fn(
    model: Any,
    *,
    schema: Schema | None = None,
    output: Output = "auto",
    classes: Sequence[Hashable] | None = None,
) -> ModelFn:
    """Torch modules, learners and plain callables pass through; river models (``schema``
    needed) and scikit-learn estimators are wrapped."""
    if isinstance(model, nn.Module) or hasattr(model, "learn") and callable(model):
        return model
    if hasattr(model, "learn_one") and (
        hasattr(model, "predict_proba_one") or hasattr(model, "predict_one")
    ):
        if schema is None:
            raise ValueError("a river model needs schema= to turn tensor rows back into dicts")
        return RiverModelFn(model, schema, output=output, classes=classes)
    if hasattr(model, "fit") and (hasattr(model, "predict") or hasattr(model, "predict_proba")):
        return SklearnModelFn(model, output=output)
    if callable(model):
        return model
    raise TypeError(f"cannot make a ModelFn from {type(model).__name__}")
