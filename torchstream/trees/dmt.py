"""Dynamic Model Tree: an interpretable online classifier with a simple model at every node [^1].

Every node, inner or leaf, holds a (multinomial) logit trained on the rows that reach it. The
node models score split candidates, re-check existing splits (collapse or replace a subtree when
it no longer pays for its parameters under the AIC) and, at the leaves only, predict. No
Hoeffding bound, purity measure or drift detector is involved.

One batch (``learn(X, y)``):

1. every row is routed down the tree (a vectorised traversal, one tensor step per depth); each
   (row, node) pair on the paths is one training example of that node;
2. **all node models are updated at once**: the models are stacked in one tensor
   ``W [n_nodes, m+1, c-1]``, per-pair gradients are summed per node with ``index_add_`` and one
   batched solve gives every node's step;
3. log-likelihoods and gradients are recomputed with the updated models and added to the node's
   statistics and to those of its stored split candidates (:mod:`._candidates`);
4. bottom-up over the nodes that saw rows: a leaf splits on its best candidate if the gain passes
   the AIC threshold; an inner node collapses into a leaf or replaces its split by its best
   candidate (:mod:`._gains`).

Where this follows the paper and where the reference code (the authors' public implementation):

* **Simple model**: pivot softmax (the binary logit for two classes, a true softmax regression
  for more), intercept included in the gradients, ``k = m (c - 1)`` [paper]; the reference fits
  sklearn's one-vs-rest logits, ignores the intercept in the split statistics and uses ``k = m c``.
* **Log-likelihood**: the total over rows [paper]; the reference keeps one sum per class and uses
  the largest.
* **Thresholds**: ``thresholds="paper"`` charges the extra model of a split (eq. 11) and, when
  both collapse and replace pass, takes the alternative with the smaller AIC (the larger margin
  over its threshold); ``"reference"`` uses the reference code's split threshold ``-ln eps``
  and checks collapse first.
* **Children**: warm-started one gradient step from the parent [paper, reference]; their counts
  and log-likelihoods start from the parent's candidate statistics rescaled to the parent's
  totals [reference]; ``credit_split_gain=True`` adds the estimated gain of each side, so that
  the subtree's loss right after a split is ``L_S - G`` as in the paper's Lemma 1.
* **Model step** (``step``): ``"sgd"`` adds ``lr`` times the *summed* gradient of the node's
  rows: for one row per batch exactly the paper's per-observation SGD. The reference makes one
  shuffled pass of per-row steps over each batch; a summed step over a large batch is unstable
  (``lr * n`` times the curvature can exceed 2). ``"implicit"`` (default) takes the proximal
  step ``(I / lr + H)^{-1} g`` with ``H`` the batch's Hessian of the negative log-likelihood
  (exact for two classes, the Gershgorin bound ``2 max_k p_k (1 - p_k) x x^T`` per row shared by
  the classes otherwise): ``lr g / (1 + lr p (1 - p) ||x~||^2)`` for one row, a damped Newton
  step for a large batch. Models start at zero (the reference's sklearn start; the paper says
  random), so the tree is deterministic: it has no random generator.
* **Forgetting** (own addition; the paper and the reference keep cumulative sums, which is the
  default, ``loss_window=None, candidate_window=None``): after every batch of ``B`` rows all
  nodes' statistics are faded by ``(1 - 1/window)^B`` before the batch is added (the same
  factor everywhere, so that an inner node and its subtree weigh every row alike).
  ``loss_window`` fades the log-likelihoods, so that the collapse and replace gains (eq. 4-5)
  and their AIC tests compare the subtree with the inner model on recent rows only: the old
  leaves' lead, which otherwise never decays, is bounded by about ``window`` times their
  per-row advantage. ``candidate_window`` fades the candidates' gradient sums and counts (and
  the node's gradient sum), so that the candidate gains reflect the current concept and a
  stale candidate (the outdated split itself) stops outranking the new one. A collapse clears
  the node's candidate store when ``loss_window`` is set (its statistics describe the pruned,
  outdated partition). The trade-off: with the one-step approximation a candidate's gain is
  capped at about ``lr * candidate_window * ||mu||^2`` (``mu``: the per-row score of the split),
  so a split whose per-row evidence is below ``(k - ln eps) / (lr * candidate_window)`` is never
  made; and as the leaves below an outdated split accumulate the new split at about half the
  rate of the node above, the node can replace its split before they split only if its loss
  lead fades quickly (``loss_window`` of a batch or two) and the new candidate's gain passes
  ``-ln eps`` before the leaves' pass ``k - ln eps``, which asks for ``lr * candidate_window *
  ||mu||^2`` of roughly two to four times the threshold. Once the leaves have split on the new
  feature, the subtree models the new concept and the approximate gain of the node's candidate
  does not beat the subtree's real log-likelihood lead: the outdated split stays above.
* **Candidates**: values of the current batch, 2-decimal rounding of numeric features
  (features are meant to be scaled to [0, 1]), bounded store with replacement [paper, reference];
  see :mod:`._candidates` for the order of replacement.

References
----------
[^1]: Haug, J., Broelemann, K. and Kasneci, G. (2022). Dynamic model tree for interpretable
    data stream learning. ICDE 2022, 2562-2574.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any, Literal

import torch
from river import base as river_base

from torchstream.base import new_classes
from torchstream.devices import as_device
from torchstream.schema import match_key
from torchstream.trees._candidates import CandidateStore, update_stores
from torchstream.trees._gains import (
    Thresholds,
    collapse_threshold,
    log_likelihood_and_residuals,
    n_free_parameters,
    replace_threshold,
    split_threshold,
)
from torchstream.trees._report import TreeReport
from torchstream.trees._river import RiverRows

__all__ = ["RIVER_CHECK_SKIPS", "DynamicModelTree"]

_STRUCT = ("feature", "value", "left", "right", "parent", "depth", "uid")

# (a copy of X, the routing tensors, X's (rows, nodes, leaf)): see `_paths`
_PathsMemo = tuple[
    torch.Tensor, tuple[torch.Tensor, ...], tuple[torch.Tensor, torch.Tensor, torch.Tensor]
]

# river's `check_estimator` checks the tree does not pass with ``feature_incremental=False``,
# and why (read by `_unit_test_skips`; with ``True`` every check passes).
RIVER_CHECK_SKIPS: dict[str, str] = {
    "check_emerging_features": (
        "with feature_incremental=False a row must hold exactly the tree's features: a new key "
        "is an error naming the row and the feature (never dropped); feature_incremental=True "
        "passes this check"
    ),
    "check_disappearing_features": (
        "with feature_incremental=False an absent feature is an error naming the row and the "
        "feature (never imputed); feature_incremental=True reads it as 0 and passes"
    ),
    "check_radically_disappearing_features": (
        "as check_disappearing_features: an absent feature is an error unless "
        "feature_incremental=True"
    ),
}


class DynamicModelTree(TreeReport, RiverRows, river_base.Classifier):
    """Dynamic Model Tree classifier (Haug et al., ICDE 2022), with river's and the tensor API.

    Tensor API: ``learn(X [B, m], y [B])`` with class indices, ``tree(X) -> [B, c]``
    probabilities (the :data:`ModelFn` explainers call), ``predict_proba(X)``, ``predict(X)``.
    River API: ``learn_one``, ``predict_one``, ``predict_proba_one``, ``learn_many``,
    ``predict_many``, ``predict_proba_many`` on dict rows / pandas frames with any hashable labels.
    River's ``check_estimator`` passes; with ``feature_incremental=False`` it skips the
    emerging / disappearing-feature checks (:data:`RIVER_CHECK_SKIPS` says why).

    Parameters
    ----------
    n_classes
        Number of classes; ``None``: discovered from the labels (a new class adds a zero column to
        every node model and to the candidate gradients).
    learning_rate
        ``lr`` of the node models' steps and of the candidate approximation (paper: 0.05).
    epsilon
        Bound on the relative likelihood of the AIC test (the paper's ``10e-8`` literal = 1e-7).
    n_saved_candidates
        Split candidates kept per node (reference default 100; the paper uses ``3 m``).
    p_replaceable_candidates
        Fraction of the stored candidates that new candidates may replace at every batch.
    cat_features
        Columns (indices, or feature names of dict rows) with equality splits ``x_j == v``.
    thresholds
        ``"paper"`` or ``"reference"`` AIC thresholds (module docstring).
    step
        ``"implicit"`` or ``"sgd"`` model step (module docstring).
    credit_split_gain
        Start the children's log-likelihoods with the estimated gain of their side (the
        subtree's loss right after a split is then ``L_S - G``, paper Lemma 1), which puts a
        hysteresis of about ``2 (-ln eps)`` between split and collapse. Default: the reference's
        start (the parent's log-likelihood shared out, ``G_I = 0`` right after a split): a
        split is then collapsed as soon as its leaves fall ``-ln eps - k`` nats behind the
        parent, which is a *lead* of ``k + ln eps`` they must keep when ``k > -ln eps`` (e.g.
        more than 16 features, binary): a split that does not pay off soon churns.
    feature_incremental
        Dict rows only. ``False`` (default): a row must hold exactly the known features, any
        other row is an error naming the row and the feature. ``True`` (river's sparse rows,
        e.g. after ``preprocessing.OneHotEncoder()``): a feature absent from a row is read as
        0, never an error; a key never seen before, in a row being learned, appends a feature
        whose weights, gradient sums and candidate statistics start at 0 in every node, which
        is what they would hold had the feature been 0 in every earlier row (the node models
        start at 0 and the gradient of a weight whose input is 0 is 0), so predictions are
        unchanged by the growth; at prediction a key not yet learned is ignored (its weights
        would be 0).
    loss_window, candidate_window
        Exponential forgetting of the log-likelihoods (collapse / replace gains) and of the
        candidates' gradient sums and counts (split gains): effective number of recent rows
        (> 1), or ``None`` (default) for the paper's cumulative sums. See the module docstring
        for the scales; e.g. ``loss_window=1_000, candidate_window=10_000`` with
        ``learning_rate=0.5`` replaces an outdated root split some 10-20 batches of 1,000 rows
        after an abrupt change of a two-leaf concept.
    device, dtype
        Where the node models live and their float type, ``"float32"`` or ``"float64"``
        (statistics are kept in float64).

    Examples
    --------
    A known two-leaf concept: the label follows ``x0`` where ``x2 <= 0.6`` and ``-x1`` elsewhere
    (a large ``learning_rate`` makes the gains grow fast enough for a short example).

    >>> g = torch.Generator().manual_seed(0)
    >>> tree = DynamicModelTree(n_classes=2, learning_rate=1.0)
    >>> for _ in range(20):
    ...     X = torch.rand(500, 3, generator=g)
    ...     z = torch.where(X[:, 2] <= 0.6, 8 * (X[:, 0] - 0.5), -8 * (X[:, 1] - 0.5))
    ...     tree.learn(X, torch.bernoulli(torch.sigmoid(z), generator=g).long())
    >>> print(tree.to_text(digits=1))
    x2 <= 0.6 (n=10000)
    ├── leaf (n=5950): logit[1] = -4.5 +8.0*x0 +0.8*x1 -0.4*x2
    └── leaf (n=4050): logit[1] = 3.8 -0.5*x0 -7.1*x1 -0.5*x2
    >>> [(e["action"], e["feature"], e["value"], e["n_seen"]) for e in tree.events]
    [('split', 2, 0.6, 3500)]
    """

    _supervised = True

    def __init__(
        self,
        n_classes: int | None = None,
        *,
        learning_rate: float = 0.05,
        epsilon: float = 1e-7,
        n_saved_candidates: int = 100,
        p_replaceable_candidates: float = 0.5,
        cat_features: Sequence[Hashable] | None = None,
        thresholds: Thresholds = "paper",
        step: Literal["implicit", "sgd"] = "implicit",
        feature_incremental: bool = False,
        credit_split_gain: bool = False,
        loss_window: float | None = None,
        candidate_window: float | None = None,
        device: str | torch.device = "cpu",
        dtype: str | torch.dtype = "float32",
    ) -> None:
        self._init_params: dict[str, Any] = {
            "n_classes": n_classes, "learning_rate": learning_rate, "epsilon": epsilon,
            "n_saved_candidates": n_saved_candidates,
            "p_replaceable_candidates": p_replaceable_candidates, "cat_features": cat_features,
            "thresholds": thresholds, "step": step, "feature_incremental": feature_incremental,
            "credit_split_gain": credit_split_gain, "loss_window": loss_window,
            "candidate_window": candidate_window, "device": device, "dtype": dtype,
        }  # fmt: skip
        if n_classes is not None and (
            isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2
        ):
            raise ValueError(f"n_classes must be an integer >= 2 or None, got {n_classes!r}")
        if not (isinstance(learning_rate, (int, float)) and 0 < learning_rate < math.inf):
            raise ValueError(f"learning_rate must be a positive number, got {learning_rate!r}")
        if not (isinstance(epsilon, (int, float)) and 0 < epsilon <= 1):
            raise ValueError(f"epsilon must be in (0, 1], got {epsilon!r}")
        if (
            isinstance(n_saved_candidates, bool)
            or not isinstance(n_saved_candidates, int)
            or n_saved_candidates < 1
        ):
            raise ValueError(
                f"n_saved_candidates must be an integer >= 1, got {n_saved_candidates!r}"
            )
        if not (
            isinstance(p_replaceable_candidates, (int, float))
            and 0 <= p_replaceable_candidates <= 1
        ):
            raise ValueError(
                f"p_replaceable_candidates must be in [0, 1], got {p_replaceable_candidates!r}"
            )
        if thresholds not in ("paper", "reference"):
            raise ValueError(f"thresholds must be 'paper' or 'reference', got {thresholds!r}")
        if step not in ("implicit", "sgd"):
            raise ValueError(f"step must be 'implicit' or 'sgd', got {step!r}")
        if not isinstance(feature_incremental, bool):
            raise TypeError(
                f"feature_incremental must be True or False, got {feature_incremental!r}"
            )
        for name, w in (("loss_window", loss_window), ("candidate_window", candidate_window)):
            if w is not None and not (
                isinstance(w, (int, float)) and not isinstance(w, bool) and 1 < w < math.inf
            ):
                raise ValueError(f"{name} must be a finite number > 1 or None, got {w!r}")
        dtype = {"float32": torch.float32, "float64": torch.float64}.get(dtype, dtype)  # type: ignore[call-overload]
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(
                f"dtype must be 'float32' or 'float64' (or the torch dtype), got {dtype!r}"
            )
        self.n_classes = n_classes
        self.learning_rate = float(learning_rate)
        self.epsilon = float(epsilon)
        self.n_saved_candidates = n_saved_candidates
        self.p_replaceable_candidates = float(p_replaceable_candidates)
        self.cat_features = None if cat_features is None else list(cat_features)
        self.thresholds = thresholds
        self.step = step
        self.feature_incremental = feature_incremental
        self.credit_split_gain = bool(credit_split_gain)
        self.loss_window = loss_window
        self.candidate_window = candidate_window
        self.device = as_device(device)
        self.dtype = dtype
        self.task = "classification"
        self.classes_: list[Hashable] = []
        self._codes: dict[tuple[bool, Hashable], int] = {}
        self.n_features: int | None = None
        self.feature_names: list[Hashable] | None = None
        self._categories: dict[int, dict[tuple[bool, Hashable], float]] = {}
        self.n_samples_seen = 0
        self.n_batches = 0
        self.events: list[dict[str, Any]] = []
        self._next_uid = 0
        self._reset_nodes()

    @classmethod
    def for_stream(cls, stream: Any, **kwargs: Any) -> DynamicModelTree:
        """A tree for a :class:`~torchstream.streams.Stream`: its classes (when known), its
        feature names and its categorical columns."""
        classes = list(getattr(stream, "classes", None) or ())
        schema = getattr(stream, "schema", None)
        if schema is not None and "cat_features" not in kwargs:
            cats = [
                j
                for j, f in enumerate(getattr(schema, "features", ()))
                if getattr(f, "kind", "numeric") == "categorical"
            ]
            if cats and getattr(schema, "n_columns", len(cats)) == len(schema.features):
                kwargs["cat_features"] = cats
        tree = cls(max(len(classes), 2) if classes else None, **kwargs)
        for c in classes:
            tree._add_class(c)
        if schema is not None:
            tree.feature_names = list(getattr(schema, "columns", ()) or ()) or None
        return tree

    # ------------------------------------------------------------------ river flags
    @property
    def _multiclass(self) -> bool:  # type: ignore[override]
        return True

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        yield {}
        yield {"feature_incremental": True}

    def _unit_test_skips(self) -> set[str]:
        return set() if self.feature_incremental else set(RIVER_CHECK_SKIPS)

    def _get_params(self) -> dict[str, object]:
        """The constructor's arguments, as given (``clone()`` builds an untrained tree from
        them; ``copy.deepcopy`` and ``pickle`` keep the trained state)."""
        return dict(self._init_params)

    # ------------------------------------------------------------------ node arrays
    def _reset_nodes(self) -> None:
        self.feature: list[int] = []  # -1 at a leaf
        self.value: list[float] = []
        self.left: list[int] = []  # -1 at a leaf
        self.right: list[int] = []
        self.parent: list[int] = []
        self.depth: list[int] = []
        self.uid: list[int] = []
        self._stores: list[CandidateStore] = []
        self._W: torch.Tensor | None = None  # [N, m+1, c-1]
        self._n = torch.zeros(0, dtype=torch.float64, device=self.device)
        self._ll = torch.zeros(0, dtype=torch.float64, device=self.device)
        self._g: torch.Tensor | None = None  # [N, m+1, c-1] summed gradients since creation
        self._routing: tuple[torch.Tensor, ...] | None = None
        # the last routed batch and its paths, reused by `learn` after `predict_proba` on it
        self._paths_memo: _PathsMemo | None = None

    @property
    def n_nodes(self) -> int:
        return len(self.feature)

    @property
    def _c(self) -> int:
        """Number of classes of the node models (at least 2)."""
        return self.n_classes if self.n_classes is not None else max(len(self.classes_), 2)

    @property
    def _k(self) -> int:
        assert self.n_features is not None
        return n_free_parameters(self.n_features, self._c)

    def _categorical_mask(self) -> torch.Tensor:
        assert self.n_features is not None
        mask = torch.zeros(self.n_features, dtype=torch.bool, device=self.device)
        for j in self._cat_indices():
            mask[j] = True
        return mask

    def _cat_indices(self) -> list[int]:
        out = []
        for f in self.cat_features or ():
            if isinstance(f, int) and not isinstance(f, bool):
                if not 0 <= f < (self.n_features or 0):
                    raise ValueError(
                        f"cat_features holds column {f}, but X has {self.n_features} columns"
                    )
                out.append(f)
            elif self.feature_names is not None and f in self.feature_names:
                out.append(self.feature_names.index(f))
            else:
                raise ValueError(
                    f"cat_features holds {f!r}, which is neither a column index "
                    f"nor a known feature name"
                )
        return out

    def _ensure_root(self, m: int) -> None:
        if self.n_features is None:
            self.n_features = m
            self._cat_indices()  # validate now
        if self.n_nodes:
            return
        P = (m + 1, self._c - 1)
        self._W = torch.zeros(0, *P, dtype=self.dtype, device=self.device)
        self._g = torch.zeros(0, *P, dtype=torch.float64, device=self.device)
        self._add_node(-1, 0, self._W.new_zeros(P), 0.0, 0.0)

    def _add_node(self, parent: int, depth: int, W: torch.Tensor, n: float, ll: float) -> int:
        assert self._W is not None and self._g is not None and self.n_features is not None
        for name, v in zip(_STRUCT, (-1, math.nan, -1, -1, parent, depth, self._next_uid)):
            getattr(self, name).append(v)
        self._next_uid += 1
        self._W = torch.cat([self._W, W.to(self._W.dtype)[None]])
        self._g = torch.cat([self._g, self._g.new_zeros(1, *self._g.shape[1:])])
        self._n = torch.cat([self._n, self._n.new_tensor([n])])
        self._ll = torch.cat([self._ll, self._ll.new_tensor([ll])])
        self._stores.append(CandidateStore((self.n_features + 1) * (self._c - 1), self.device))
        self._routing = None
        return self.n_nodes - 1

    def _grow(self, add_features: int = 0, add_classes: int = 0) -> None:
        """Pad every node model and gradient sum for new features / classes (zeros)."""
        if self._W is None or not (add_features or add_classes):
            return
        m0, c0 = self._W.shape[1] - 1, self._W.shape[2]
        pad = (0, add_classes, 0, add_features)
        self._W = torch.nn.functional.pad(self._W, pad)
        assert self._g is not None
        self._g = torch.nn.functional.pad(self._g, pad)
        for s in self._stores:
            s.pad(m0, add_features, c0, add_classes)

    # ------------------------------------------------------------------ routing
    def _routing_tensors(self) -> tuple[torch.Tensor, ...]:
        if self._routing is None:
            dev = self.device
            feat = torch.tensor(self.feature, dtype=torch.long, device=dev)
            self._routing = (
                feat.clamp_min(0),
                torch.tensor(self.value, dtype=self.dtype, device=dev),
                self._categorical_mask()[feat.clamp_min(0)] & (feat >= 0),
                torch.tensor(self.left, dtype=torch.long, device=dev),
                torch.tensor(self.right, dtype=torch.long, device=dev),
            )
        return self._routing

    def _paths(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """All (row, node) pairs on the rows' paths, and each row's leaf (kept with a copy of
        ``X`` while the tree is unchanged: test-then-train routes every batch once)."""
        routing = self._routing_tensors()
        if self._seen_last(X) and self._paths_memo is not None and self._paths_memo[1] is routing:
            return self._paths_memo[2]
        feat, val, cat, left, right = routing
        n = X.shape[0]
        active = torch.arange(n, device=self.device)
        node = torch.zeros(n, dtype=torch.long, device=self.device)
        leaf = node.clone()
        rows, nodes = [active], [node]
        while active.numel():
            inner = left[node] >= 0
            active, node = active[inner], node[inner]
            if not active.numel():
                break
            xv = X[active, feat[node]]
            go_left = torch.where(cat[node], xv == val[node], xv <= val[node])
            node = torch.where(go_left, left[node], right[node])
            leaf[active] = node
            rows.append(active)
            nodes.append(node)
        out = (torch.cat(rows), torch.cat(nodes), leaf)
        self._paths_memo = (X.clone(), routing, out)
        return out

    def _seen_last(self, X: torch.Tensor) -> bool:
        """Does ``X`` hold exactly the values of the last routed batch (same dtype, device)?"""
        memo = self._paths_memo
        return memo is not None and memo[0].shape == X.shape and torch.equal(memo[0], X)

    # ------------------------------------------------------------------ validation
    def _check_X(self, X: Any) -> torch.Tensor:
        if not isinstance(X, torch.Tensor):
            raise TypeError(f"X must be a torch.Tensor [B, m], got {type(X).__name__}")
        if X.dim() == 1:
            X = X.unsqueeze(0)
        if X.dim() != 2:
            raise ValueError(f"X must have shape [B, m], got {list(X.shape)}")
        if self.n_features is not None and X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} columns, the tree expects {self.n_features}")
        X = X.to(device=self.device, dtype=self.dtype)
        if self._seen_last(X):
            return X  # the values of the last routed batch, checked then
        if not bool(torch.isfinite(X).all()):
            r, c = (~torch.isfinite(X)).nonzero()[0].tolist()
            raise ValueError(f"X row {r}, column {c}: non-finite value {float(X[r, c])}")
        return X

    def _check_y(self, y: Any, n: int) -> torch.Tensor:
        y = torch.as_tensor(y, device=self.device)
        if y.dim() != 1 or y.shape[0] != n:
            raise ValueError(f"y must have shape [{n}], got {list(y.shape)}")
        if y.dtype.is_floating_point and not bool((y == y.round()).all()):
            raise ValueError("y must hold class indices (integers)")
        y = y.long()
        low, top = torch.stack(torch.aminmax(y)).tolist() if n else (0, -1)
        if low < 0:
            raise ValueError(f"y holds the class index {low}; indices must be >= 0")
        if self.n_classes is not None and top >= self.n_classes:
            raise ValueError(f"y holds the class index {top}, but n_classes={self.n_classes}")
        while top >= len(self.classes_):
            self._add_class(len(self.classes_))
        return y

    def register_classes(self, classes: Sequence[Hashable]) -> None:
        """Take the stream's ``classes`` in its order: the classes known so far must be their
        beginning; the others are added."""
        for c in new_classes(self.classes_, classes, "tree"):
            self._add_class(c)

    def _add_class(self, label: Hashable) -> int:
        if self.n_classes is not None and len(self.classes_) >= self.n_classes:
            raise ValueError(
                f"label {label!r} would be class number {len(self.classes_) + 1}, "
                f"but n_classes={self.n_classes} (classes seen: {self.classes_!r})"
            )
        before = self._c
        self.classes_.append(label)
        self._codes[match_key(label)] = len(self.classes_) - 1
        self._grow(add_classes=self._c - before)
        return len(self.classes_) - 1

    # ------------------------------------------------------------------ tensor API
    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        """The :data:`ModelFn`: class probabilities ``[B, c]`` of the rows' leaf models."""
        return self.predict_proba(X)

    forward = __call__

    @torch.no_grad()
    def predict_proba(self, X: torch.Tensor) -> torch.Tensor:
        """Probabilities ``[B, c]`` from the leaf model of every row (inner models unused)."""
        X = self._check_X(X)
        if not self.n_nodes:
            return X.new_full((X.shape[0], self._c), 1.0 / self._c)
        _, _, leaf = self._paths(X)
        Xa = torch.cat([X.new_ones(X.shape[0], 1), X], 1)
        assert self._W is not None
        z = torch.einsum("np,npc->nc", Xa, self._W[leaf])
        return torch.cat([z.new_zeros(z.shape[0], 1), z], 1).softmax(1)

    def predict(self, X: torch.Tensor) -> torch.Tensor:
        """Most probable class index ``[B]``."""
        return self.predict_proba(X).argmax(1)

    #: The learner contract's training loss: the tree reports none (its node losses are
    #: per-node statistics of the split decisions).
    last_loss: float = float("nan")

    @torch.no_grad()
    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        """Update the tree with one batch ``(X [B, m], y [B])`` (class indices)."""
        X = self._check_X(X)
        y = self._check_y(y, X.shape[0])
        if X.shape[0] == 0:
            return
        self._ensure_root(X.shape[1])
        self._learn(X, y)

    def _learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        assert self._W is not None and self._g is not None and self.n_features is not None
        lr = self.learning_rate
        N, m1, cp = self._W.shape
        rows, nodes, _ = self._paths(X)
        Xa = torch.cat([X.new_ones(X.shape[0], 1), X], 1)[rows]  # [Q, m+1]
        yq = y[rows]
        # 1. one step for every node model at once
        _, r, p = log_likelihood_and_residuals(Xa, self._W[nodes], yq)
        g = self._W.new_zeros(N, m1, cp).index_add_(0, nodes, Xa[:, :, None] * r[:, None, :])
        if self.step == "sgd":
            delta = lr * g
        else:
            pk = p[:, 1:]
            curv = pk * (1 - pk)
            s = curv[:, 0] if cp == 1 else 2 * curv.max(1).values
            H = self._W.new_zeros(N, m1, m1).index_add_(
                0, nodes, s[:, None, None] * Xa[:, :, None] * Xa[:, None, :]
            )
            H += torch.eye(m1, dtype=H.dtype, device=H.device) / lr
            delta = torch.linalg.solve(H, g)
        self._W += delta
        # 2. statistics with the updated models; the losses of eq. 4-5 forget at one rate
        ll, r, _ = log_likelihood_and_residuals(Xa, self._W[nodes], yq)
        ll, r, Xd = ll.double(), r.double(), Xa.double()
        G = (Xd[:, :, None] * r[:, None, :]).reshape(Xd.shape[0], -1)
        self._forget(X.shape[0])
        self._n.index_add_(0, nodes, torch.ones_like(ll))
        self._ll.index_add_(0, nodes, ll)
        self._g.index_add_(0, nodes, G.view(-1, m1, cp))
        # 3. candidate statistics of every touched node (rows grouped by node with one sort)
        order = torch.argsort(nodes, stable=True)
        touched, counts = torch.unique_consecutive(nodes[order], return_counts=True)
        touched_nodes = touched.tolist()
        update_stores(
            [self._stores[a] for a in touched_nodes],
            Xd[order, 1:],
            ll[order],
            G[order],
            counts.tolist(),
            self._categorical_mask() if self.cat_features else None,
            lr=lr,
            capacity=self.n_saved_candidates,
            p_replaceable=self.p_replaceable_candidates,
        )
        self.n_samples_seen += X.shape[0]
        self.n_batches += 1
        # 4. structure, bottom-up
        changed = False
        for a in sorted(touched_nodes, key=lambda i: -self.depth[i]):
            if self.depth[a] < 0:  # removed with a subtree above (cannot happen bottom-up)
                continue
            changed |= self._check_node(a)
        if changed:
            self._compact()

    def _forget(self, n_rows: int) -> None:
        """Fade every node's statistics by one batch of ``n_rows`` rows (all nodes alike, so that
        an inner node and its subtree's leaves weigh every row the same)."""
        assert self._g is not None
        f_loss = 1.0 if self.loss_window is None else (1.0 - 1.0 / self.loss_window) ** n_rows
        f_cand = (
            1.0 if self.candidate_window is None else (1.0 - 1.0 / self.candidate_window) ** n_rows
        )
        if f_loss == 1.0 and f_cand == 1.0:
            return
        self._ll *= f_loss
        self._g *= f_cand
        for store in self._stores:
            store.fade(f_loss, f_cand)

    # ------------------------------------------------------------------ structure
    def _subtree_leaves(self, a: int) -> list[int]:
        out, stack = [], [a]
        while stack:
            i = stack.pop()
            if self.left[i] < 0:
                out.append(i)
            else:
                stack += [self.right[i], self.left[i]]
        return out

    def _check_node(self, a: int) -> bool:
        store, k, eps, mode = self._stores[a], self._k, self.epsilon, self.thresholds
        best = store.best()
        if self.left[a] < 0:  # leaf
            if best is None:
                return False
            gain, thr = float(store.gain[best]), split_threshold(k, eps, mode)
            if gain >= thr:
                self._split(a, best, "split", gain, thr)
                return True
            return False
        leaves = self._subtree_leaves(a)
        n_leaves = len(leaves)
        g_collapse = float(self._ll[a] - self._ll[leaves].sum())
        thr_c = collapse_threshold(k, n_leaves, eps, mode)
        ok_c = g_collapse >= thr_c
        ok_r, g_replace, thr_r = False, math.nan, math.nan
        if best is not None:
            same = (
                int(store.feat[best]) == self.feature[a] and float(store.val[best]) == self.value[a]
            )
            g_replace = g_collapse + float(store.gain[best])
            thr_r = replace_threshold(k, n_leaves, eps, mode)
            ok_r = not same and g_replace >= thr_r
        if ok_c and (mode == "reference" or not ok_r or g_collapse - thr_c >= g_replace - thr_r):
            self._log(
                "prune",
                a,
                self.feature[a],
                self.value[a],
                g_collapse,
                thr_c,
                removed=[self.uid[i] for i in self._descendants(a)],
            )
            self._drop_children(a)
            if self.loss_window is not None:
                self._stores[a] = CandidateStore(self._stores[a].grad.shape[-1], self.device)
            return True
        if ok_r:
            assert best is not None
            self._split(a, best, "replace", g_replace, thr_r)
            return True
        return False

    def _descendants(self, a: int) -> list[int]:
        out, stack = [], [self.left[a], self.right[a]]
        while stack:
            i = stack.pop()
            if i < 0:
                continue
            out.append(i)
            stack += [self.left[i], self.right[i]]
        return out

    def _drop_children(self, a: int) -> None:
        for i in self._descendants(a):
            self.depth[i] = -1  # dead, removed by _compact
        self.left[a] = self.right[a] = -1
        self.feature[a] = -1
        self.value[a] = math.nan
        self._routing = None

    def _split(self, a: int, j: int, action: str, gain: float, thr: float) -> None:
        assert self._W is not None and self.n_features is not None
        store, lr = self._stores[a], self.learning_rate
        removed = [self.uid[i] for i in self._descendants(a)] if action == "replace" else []
        old = (self.feature[a], self.value[a])
        if action == "replace":
            self._drop_children(a)
        cnt, lls, grads = store.cnt[j], store.ll[j], store.grad[j]
        n_total, ll_total = float(self._n[a]), float(self._ll[a])
        ll_sum = float(lls.sum())
        share = float(lls[0]) / ll_sum if ll_sum != 0 else float(cnt[0] / cnt.sum())
        shares = (share, 1 - share)
        n_shares = (float(cnt[0] / cnt.sum()), float(cnt[1] / cnt.sum()))
        shape = self._W.shape[1:]
        kids = []
        for side in (0, 1):
            g = grads[side]
            step = lr / float(cnt[side])
            W = self._W[a] + (step * g).view(shape).to(self._W.dtype)
            ll_child = ll_total * shares[side]
            if self.credit_split_gain:
                ll_child += step * float(g.square().sum())
            kids.append(self._add_node(a, self.depth[a] + 1, W, n_total * n_shares[side], ll_child))
        self.left[a], self.right[a] = kids
        self.feature[a] = int(store.feat[j])
        self.value[a] = float(store.val[j])
        self._routing = None
        extra: dict[str, Any] = {"children": [self.uid[kids[0]], self.uid[kids[1]]]}
        if action == "replace":
            extra.update(old_feature=old[0], old_value=old[1], removed=removed)
        self._log(action, a, self.feature[a], self.value[a], gain, thr, **extra)

    def _log(
        self, action: str, a: int, feature: int, value: float, gain: float, thr: float, **extra: Any
    ) -> None:
        self.events.append(
            {
                "batch": self.n_batches,
                "n_seen": self.n_samples_seen,
                "action": action,
                "node": self.uid[a],
                "feature": int(feature),
                "value": round(float(value), 10),
                "categorical": int(feature) in self._cat_indices(),
                "gain": gain,
                "threshold": thr,
                "n_node": float(self._n[a]),
                **extra,
            }
        )

    def _compact(self) -> None:
        keep = [i for i in range(self.n_nodes) if self.depth[i] >= 0]
        remap = {old: new for new, old in enumerate(keep)}
        for name in _STRUCT:
            vals = getattr(self, name)
            vals = [vals[i] for i in keep]
            if name in ("left", "right", "parent"):
                vals = [remap[v] if v >= 0 else -1 for v in vals]
            setattr(self, name, vals)
        idx = torch.tensor(keep, dtype=torch.long, device=self.device)
        assert self._W is not None and self._g is not None
        self._W, self._g = self._W[idx], self._g[idx]
        self._n, self._ll = self._n[idx], self._ll[idx]
        self._stores = [self._stores[i] for i in keep]
        self._routing = None

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, object]:
        """Everything needed to resume exactly (tensors cloned)."""
        return {
            "config": self._get_params(),
            "classes": list(self.classes_),
            "n_features": self.n_features,
            "feature_names": None if self.feature_names is None else list(self.feature_names),
            "categories": {j: dict(v) for j, v in self._categories.items()},
            "n_samples_seen": self.n_samples_seen,
            "n_batches": self.n_batches,
            "events": [dict(e) for e in self.events],
            "next_uid": self._next_uid,
            "structure": {name: list(getattr(self, name)) for name in _STRUCT},
            "W": None if self._W is None else self._W.clone(),
            "g": None if self._g is None else self._g.clone(),
            "n": self._n.clone(),
            "ll": self._ll.clone(),
            "stores": [s.state_dict() for s in self._stores],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        config = dict(state["config"])
        config.pop("device", None)
        config.pop("dtype", None)
        mine = {k: v for k, v in self._get_params().items() if k in config}
        if mine != config:
            diff = sorted(k for k in config if config[k] != mine.get(k))
            raise ValueError(f"the state was saved by a tree with other settings: {diff}")
        self.classes_ = list(state["classes"])
        self._codes = {match_key(c): i for i, c in enumerate(self.classes_)}
        self.n_features = state["n_features"]
        self.feature_names = (
            None if state["feature_names"] is None else list(state["feature_names"])
        )
        self._categories = {j: dict(v) for j, v in state["categories"].items()}
        self.n_samples_seen = state["n_samples_seen"]
        self.n_batches = state["n_batches"]
        self.events = [dict(e) for e in state["events"]]
        self._next_uid = state["next_uid"]
        for name in _STRUCT:
            setattr(self, name, list(state["structure"][name]))
        dev = self.device
        self._W = None if state["W"] is None else state["W"].to(dev, self.dtype).clone()
        self._g = None if state["g"] is None else state["g"].to(dev).clone()
        self._n, self._ll = state["n"].to(dev).clone(), state["ll"].to(dev).clone()
        self._stores = [CandidateStore.from_state(s, dev) for s in state["stores"]]
        self._routing = None
