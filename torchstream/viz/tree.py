"""A matplotlib drawing of a Dynamic Model Tree: split rules at inner nodes, the largest leaf
weights at the leaves."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_tree"]


def plot_tree(tree: Any, ax: Axes | None = None, *, top_weights: int = 3, digits: int = 2) -> Axes:
    """Draw the current tree; a leaf shows its row count and its ``top_weights`` largest
    weights (first non-pivot class). Returns the axes.

    >>> import torch
    >>> from torchstream.trees import DynamicModelTree
    >>> tree = DynamicModelTree(n_classes=2)
    >>> tree.learn(torch.rand(10, 3), torch.arange(10) % 2)
    >>> from torchstream.viz import plot_tree
    >>> len(plot_tree(tree).texts)
    1
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5))
    ax.set_axis_off()
    if not tree.n_nodes:
        ax.text(0.5, 0.5, "<empty tree>", ha="center", va="center")
        return ax
    # leaves get consecutive x positions, inner nodes the mean of their children
    xs: dict[int, float] = {}
    counter = [0]

    def place(a: int) -> float:
        if tree.left[a] < 0:
            xs[a] = counter[0]
            counter[0] += 1
        else:
            xs[a] = (place(tree.left[a]) + place(tree.right[a])) / 2
        return xs[a]

    place(0)
    width = max(counter[0] - 1, 1)
    depth = max(tree.max_depth, 1)
    W = tree._W.detach().cpu()
    for a in range(tree.n_nodes):
        x, y = xs[a] / width, 1 - tree.depth[a] / depth
        if tree.left[a] >= 0:
            label = f"{tree._rule(a, True)}\nn={float(tree._n[a]):.0f}"
            for kid in (tree.left[a], tree.right[a]):
                ax.plot(
                    [x, xs[kid] / width],
                    [y, 1 - tree.depth[kid] / depth],
                    color="grey",
                    lw=1,
                    zorder=1,
                )
            box = {"boxstyle": "round", "fc": "lightyellow", "ec": "grey"}
        else:
            w = W[a, 1:, 0]
            top = w.abs().argsort(descending=True)[:top_weights].tolist()
            terms = "\n".join(f"{float(w[j]):+.{digits}f} {tree._name(j)}" for j in top)
            label = f"leaf {tree.uid[a]}, n={float(tree._n[a]):.0f}\n{terms}"
            box = {"boxstyle": "round", "fc": "lightblue", "ec": "grey"}
        ax.text(x, y, label, ha="center", va="center", fontsize=8, bbox=box, zorder=2)
    ax.set_xlim(-0.15, 1.15)
    ax.set_ylim(-0.2, 1.2)
    return ax
