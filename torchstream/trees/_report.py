"""What a Dynamic Model Tree says about itself: structure as text and dict, node weights as
feature importance per subgroup, decision paths, complexity by the paper's counting rules
(§VI-D2: :func:`~torchstream.trees.complexity.tree_complexity` with linear leaves) and the
scalars sent to the TensorBoard sink. Also :func:`replay_events`, which rebuilds the structure
from the event log alone."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import torch

from torchstream.trees.complexity import tree_complexity

__all__ = ["TreeReport", "replay_events"]


class TreeReport:
    """Read-only views of the tree (mixed into :class:`DynamicModelTree`)."""

    # ------------------------------------------------------------------ helpers
    def _name(self, j: int) -> str:
        names = self.feature_names  # type: ignore[attr-defined]
        return str(names[j]) if names is not None else f"x{j}"

    def _rule(self, a: int, go_left: bool) -> str:
        j, v = self.feature[a], self.value[a]  # type: ignore[attr-defined]
        categorical = j in self._cat_indices()  # type: ignore[attr-defined]
        op = ("==" if go_left else "!=") if categorical else ("<=" if go_left else ">")
        return f"{self._name(j)} {op} {v:g}"

    def node_weights(self) -> dict[int, dict[str, torch.Tensor]]:
        """``{node id: {"bias": [c-1], "weights": [m, c-1]}}`` of every node (inner included);
        class 0 is the pivot (its logit is 0)."""
        if self._W is None:  # type: ignore[attr-defined]
            return {}
        W = self._W.detach().cpu()  # type: ignore[attr-defined]
        return {
            uid: {"bias": W[a, 0].clone(), "weights": W[a, 1:].clone()}
            for a, uid in enumerate(self.uid)
        }  # type: ignore[attr-defined]

    def feature_importance(self, node: int | None = None) -> torch.Tensor:
        """``|w_j|`` summed over the non-pivot classes, ``[m]``, of one node (by id; default:
        the mean over the leaves weighted by their row counts). On [0, 1]-scaled inputs a
        weight is the change of the logit over the feature's range."""
        if self._W is None:  # type: ignore[attr-defined]
            raise ValueError("the tree has not learned anything yet")
        W = self._W.detach().abs().sum(2)[:, 1:].cpu().double()  # type: ignore[attr-defined]
        if node is not None:
            if node not in self.uid:  # type: ignore[attr-defined]
                raise ValueError(f"node {node} is not in the tree (ids: {self.uid})")
            return W[self.uid.index(node)]  # type: ignore[attr-defined]
        leaves = [a for a in range(self.n_nodes) if self.left[a] < 0]  # type: ignore[attr-defined]
        w = self._n[leaves].cpu()  # type: ignore[attr-defined]
        return (W[leaves] * w[:, None]).sum(0) / w.sum().clamp_min(1)

    def decision_path(self, x: torch.Tensor) -> tuple[list[str], int]:
        """The rules on the path of one row ``x [m]`` and the id of its leaf."""
        X = self._check_X(x.reshape(1, -1))  # type: ignore[attr-defined]
        if not self.n_nodes:  # type: ignore[attr-defined]
            return [], -1
        _, _, leaf = self._paths(X)  # type: ignore[attr-defined]
        target = i = int(leaf[0])
        path: list[int] = []
        while i >= 0:
            path.append(i)
            i = self.parent[i]  # type: ignore[attr-defined]
        path.reverse()
        rules = [
            self._rule(a, b == self.left[a])  # type: ignore[attr-defined]
            for a, b in itertools.pairwise(path)
        ]
        return rules, self.uid[target]  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ structure
    def to_dict(self) -> dict[str, object]:
        """The tree as nested dicts: id, rows seen, weights, split rule and children."""
        if not self.n_nodes:  # type: ignore[attr-defined]
            return {}
        weights = self.node_weights()

        def node(a: int) -> dict[str, object]:
            uid = self.uid[a]  # type: ignore[attr-defined]
            d: dict[str, Any] = {
                "id": uid,
                "depth": self.depth[a],
                "n": float(self._n[a]),  # type: ignore[attr-defined]
                "bias": weights[uid]["bias"].tolist(),
                "weights": {
                    self._name(j): w for j, w in enumerate(weights[uid]["weights"].tolist())
                },
            }
            if self.left[a] >= 0:  # type: ignore[attr-defined]
                j = self.feature[a]  # type: ignore[attr-defined]
                d["split"] = {
                    "feature": j,
                    "name": self._name(j),
                    "value": self.value[a],  # type: ignore[attr-defined]
                    "categorical": j in self._cat_indices(),
                }  # type: ignore[attr-defined]
                d["left"] = node(self.left[a])  # type: ignore[attr-defined]
                d["right"] = node(self.right[a])  # type: ignore[attr-defined]
            return d

        return node(0)

    def to_text(self, *, weights: bool = True, digits: int = 2) -> str:
        """The tree as indented text; with ``weights``, each leaf's logit."""
        if not self.n_nodes:  # type: ignore[attr-defined]
            return "<empty tree>"
        lines: list[str] = []

        def logit(a: int) -> str:
            W = self._W[a].detach().cpu()  # type: ignore[attr-defined]
            parts = []
            for c in range(W.shape[1]):
                terms = [f"{float(W[0, c]):.{digits}f}"] + [
                    f"{float(W[j + 1, c]):+.{digits}f}*{self._name(j)}"
                    for j in range(W.shape[0] - 1)
                ]
                parts.append(f"logit[{c + 1}] = " + " ".join(terms))
            return "; ".join(parts)

        def walk(a: int, prefix: str, head: str) -> None:
            n = f"n={float(self._n[a]):.0f}"  # type: ignore[attr-defined]
            if self.left[a] >= 0:  # type: ignore[attr-defined]
                lines.append(f"{head}{self._rule(a, True)} ({n})")
                kids = (self.left[a], self.right[a])  # type: ignore[attr-defined]
                for i, kid in enumerate(kids):
                    last = i == 1
                    walk(
                        kid,
                        prefix + ("    " if last else "│   "),
                        prefix + ("└── " if last else "├── "),
                    )
            else:
                lines.append(f"{head}leaf ({n})" + (f": {logit(a)}" if weights else ""))

        walk(0, "", "")
        return "\n".join(lines)

    # ------------------------------------------------------------------ complexity
    @property
    def n_leaves(self) -> int:
        return sum(1 for v in self.left if v < 0)  # type: ignore[attr-defined]

    @property
    def max_depth(self) -> int:
        return max(self.depth, default=0)  # type: ignore[attr-defined]

    def complexity(self) -> dict[str, int]:
        """Splits and parameters by the paper's rules (linear-model leaves), plus nodes, leaves
        and depth."""
        leaves = self.n_leaves
        inner = self.n_nodes - leaves  # type: ignore[attr-defined]
        out = {"nodes": self.n_nodes, "leaves": leaves, "depth": self.max_depth}  # type: ignore[attr-defined]
        if self.n_features is None:  # type: ignore[attr-defined]
            return {**out, "splits": 0, "params": 0}
        out.update(
            tree_complexity(
                inner, leaves, leaf_model="linear", n_features=self.n_features, n_classes=self._c
            )
        )  # type: ignore[attr-defined]
        return out

    #: The plug-in name: the tree's scalars are logged as ``dmt/<name>``.
    name = "dmt"

    def on_batch(self, batch: object) -> dict[str, float]:
        """Runner hook (pass the tree in ``plugins`` too): its node count, depth and number of
        splits (the paper's count, Table III) for the sinks, as ``dmt/<name>``."""
        s = self.scalars()
        return {f"dmt/{k}": s[k] for k in ("n_nodes", "depth", "n_splits")}

    def scalars(self) -> dict[str, float]:
        """Size, depth, complexity and event counts for a scalar sink (TensorBoard)."""
        counts = {"split": 0, "prune": 0, "replace": 0}
        for e in self.events:  # type: ignore[attr-defined]
            counts[e["action"]] += 1
        c = self.complexity()
        return {
            "n_nodes": float(c["nodes"]),
            "n_leaves": float(c["leaves"]),
            "depth": float(c["depth"]),
            "n_splits": float(c["splits"]),
            "n_params": float(c["params"]),
            "events/split": float(counts["split"]),
            "events/prune": float(counts["prune"]),
            "events/replace": float(counts["replace"]),
        }

    def structure(self) -> dict[int, tuple[int, float, int, int] | None]:
        """``{node id: (feature, value, left id, right id)}`` (``None`` for a leaf)."""
        out: dict[int, tuple[int, float, int, int] | None] = {}
        for a, uid in enumerate(self.uid):  # type: ignore[attr-defined]
            if self.left[a] < 0:  # type: ignore[attr-defined]
                out[uid] = None
            else:
                out[uid] = (
                    self.feature[a],
                    self.value[a],  # type: ignore[attr-defined]
                    self.uid[self.left[a]],
                    self.uid[self.right[a]],
                )  # type: ignore[attr-defined]
        return out


def replay_events(
    events: Iterable[Mapping[str, Any]], root: int = 0
) -> dict[int, tuple[int, float, int, int] | None]:
    """Rebuild the structure (as :meth:`TreeReport.structure`) from an event log alone."""
    tree: dict[Hashable, Any] = {root: None}

    def drop(uid: int) -> None:
        node = tree.pop(uid)
        if node is not None:
            drop(node[2])
            drop(node[3])

    for e in events:
        uid = e["node"]
        if uid not in tree:
            raise ValueError(f"event {dict(e)} names node {uid}, which is not in the tree")
        node = tree[uid]
        if node is not None:
            drop(node[2])
            drop(node[3])
        if e["action"] == "prune":
            tree[uid] = None
        else:
            left, right = e["children"]
            tree[uid] = (e["feature"], e["value"], left, right)
            tree[left] = tree[right] = None
    return dict(tree)  # type: ignore[arg-type]
