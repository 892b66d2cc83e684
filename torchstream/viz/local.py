"""Pictures of local explanations on a stream: CDLEEDS' neighbourhood tree with the flagged
regions, and the stored attributions of monitored observations."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from matplotlib import colormaps, patches
import torch

from torchstream.schema import feature_names_for
from torchstream.viz._figure import finish_figure, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_attributions", "plot_neighbourhoods"]


def plot_neighbourhoods(
    detector: Any,
    *,
    features: tuple[int, int] = (0, 1),
    show_windows: bool = True,
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """The cluster tree of a :class:`~torchstream.drift.CDLEEDS` on two features: the window
    rows of every leaf (one colour per leaf), the leaf centroids (red: the leaf flags a local
    change), the gamma-ball around each leaf centroid (exact for two-feature streams, a
    projection otherwise) and the tree's edges from parent to child centroids."""
    tree = getattr(detector, "tree", None)
    if tree is None:
        raise ValueError("the detector has no neighbourhoods yet: update it first")
    a, b = features
    if not (0 <= a < tree.m and 0 <= b < tree.m):
        raise ValueError(f"features {features} out of range for {tree.m} features")
    fig = new_figure(path)
    ax = fig.subplots()
    radius = math.sqrt(-tree.m * math.log(detector.gamma))
    cmap = colormaps["tab20"]
    for node, parent in tree.nodes():
        c = node.centroid.detach().cpu()
        if parent is not None:
            pc = parent.centroid.detach().cpu()
            ax.plot([pc[a], c[a]], [pc[b], c[b]], color="grey", lw=0.6, zorder=1)
        if node.children is not None:
            ax.scatter([c[a]], [c[b]], s=12, color="grey", marker="s", zorder=2)
            continue
        flagged = bool((torch.as_tensor(node.p) <= detector.significance).any())
        colour = cmap(node.id % 20)
        if show_windows and node.size:
            W = node.W.detach().cpu()
            ax.scatter(W[:, a], W[:, b], s=4, color=colour, alpha=0.5, zorder=0)
        ax.scatter([c[a]], [c[b]], s=60, marker="X", color="red" if flagged else "black", zorder=3)
        ax.add_patch(
            patches.Circle(
                (float(c[a]), float(c[b])),
                radius,
                fill=False,
                lw=0.8,
                ls="--",
                color="red" if flagged else colour,
            )
        )
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel(f"x{a}")
    ax.set_ylabel(f"x{b}")
    n_flag = int(detector.leaf_change.sum())
    ax.set_title(f"{detector.n_leaves} neighbourhoods, {n_flag} with local change")
    fig.set_size_inches(5, 5)
    return finish_figure(fig, path)


def plot_attributions(
    attributions: torch.Tensor,
    *,
    feature_names: Any = None,
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """A heat map of attributions ``[n, d]`` (rows: observations, columns: features),
    symmetric colour scale around 0."""
    A = torch.as_tensor(attributions).detach().cpu().double()
    if A.dim() != 2:
        raise ValueError(f"attributions must have shape [n, d], got {list(A.shape)}")
    names = feature_names_for(feature_names, A.shape[1])
    fig = new_figure(path)
    ax = fig.subplots()
    v = float(A.abs().max()) or 1.0
    im = ax.imshow(
        A.numpy(), aspect="auto", cmap="coolwarm", vmin=-v, vmax=v, interpolation="nearest"
    )
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize="small")
    ax.set_ylabel("monitored observation")
    fig.colorbar(im, ax=ax, label="attribution")
    fig.set_size_inches(max(4, 0.3 * len(names) + 2), max(3, 0.08 * A.shape[0] + 2))
    return finish_figure(fig, path)
