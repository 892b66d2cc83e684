"""Imputers: replace the *absent* features of a row by values drawn from a storage.

Removal-based explainers (iSAGE [SAGE]_, iPFI [PFI]_) evaluate the model on the current row with
some features removed. Interventional (marginal) removal replaces the removed features by values
of past rows, drawn from a storage (:mod:`torchstream.explain.storage`). The storage only needs
``sample(n) -> Tensor [n, d]``; a "fresh sampler" (iid rows from a known distribution, used by
statistical tests) is such an object too, see :class:`~torchstream.explain.storage.FreshSampler`.

References
----------
.. [SAGE] M. Muschalik, F. Fumagalli, B. Hammer, E. Hüllermeier (2023). iSAGE: an incremental
   version of SAGE for online explanation on data streams. *ECML PKDD 2023*, LNCS 14171,
   428-445.
.. [PFI] F. Fumagalli, M. Muschalik, E. Hüllermeier, B. Hammer (2023). Incremental permutation
   feature importance (iPFI): towards online explanations on data streams. *Machine Learning*
   112, 4863-4903.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch

from torchstream.explain.groups import FeatureGroups, check_feature_groups

__all__ = ["MarginalImputer"]


class MarginalImputer:
    """Marginal (interventional) imputation of absent features from a storage of past rows.

    For each row ``x[b]`` and each of its ``R`` masks ``mask[b, r]`` (True = feature present,
    keep ``x``), the absent features are filled in from storage draws:

    * ``"joint"``: all absent features of ``(b, r)`` come from *one* drawn row, which keeps the
      dependencies among the absent features (the interventional game of [SAGE]_);
    * ``"product"``: every absent feature comes from its own drawn row (product of the
      marginals).

    For a single absent feature the two coincide in distribution. Every ``impute`` makes one
    storage call and draws a fixed number of rows whatever the mask: ``B * R`` (joint, draw
    ``k`` fills ``(b, r) = divmod(k, R)``) or ``B * R * d`` (product, in ``(b, r, feature)``
    order). In product mode a storage with ``sample_indices(n)`` and ``rows`` (the reservoirs)
    is asked for slot indices only, which gives the same values as ``sample(n)`` without
    materialising ``n`` full rows; other storages are asked for ``sample(n)``. The result is
    a new tensor on ``x``'s device and dtype; ``x`` is never modified.

    Parameters
    ----------
    mode
        ``"joint"`` (default) or ``"product"``.
    feature_groups
        ``{feature name: column indices}`` covering the ``d`` columns (or validated
        :class:`~torchstream.explain.groups.FeatureGroups`): ``"product"`` then draws one row
        per absent *group* and copies that group's whole block from it (``B * R * G`` draws, in
        ``(b, r, group)`` order), so a one-hot block stays one-hot. The masks must keep every
        group wholly present or wholly absent. ``"joint"`` is unchanged (one row fills all).

    Examples
    --------
    >>> from torchstream.explain.storage import GeometricReservoir
    >>> res = GeometricReservoir(size=4, n_features=3, seed=3)
    >>> res.update(torch.arange(4.0).repeat_interleave(3).reshape(4, 3))  # row i = (i, i, i)
    >>> x = torch.full((1, 3), -1.0)
    >>> mask = torch.tensor([[[True, False, False], [False, True, False]]])
    >>> MarginalImputer("joint").impute(x, mask, res).tolist()
    [[[-1.0, 2.0, 2.0], [0.0, -1.0, 0.0]]]
    >>> MarginalImputer("product").impute(x, mask, res).tolist()
    [[[-1.0, 3.0, 0.0], [0.0, -1.0, 1.0]]]

    References
    ----------
    .. [SAGE] M. Muschalik, F. Fumagalli, B. Hammer, E. Hüllermeier (2023). iSAGE: an
       incremental version of SAGE for online explanation on data streams. *ECML PKDD 2023*,
       LNCS 14171, 428-445.
    """

    def __init__(
        self,
        mode: Literal["joint", "product"] = "joint",
        feature_groups: Mapping[str, Sequence[int]] | FeatureGroups | None = None,
    ) -> None:
        if mode not in ("joint", "product"):
            raise ValueError(f"mode must be 'joint' or 'product', got {mode!r}")
        self.mode = mode
        self._feature_groups = feature_groups
        self.groups: FeatureGroups | None = None

    def impute(self, x: torch.Tensor, mask: torch.Tensor, storage: Any) -> torch.Tensor:
        """Rows ``[B, R, d]``: ``x[b]`` where ``mask[b, r]`` is True, storage draws elsewhere.

        Parameters
        ----------
        x
            Rows to explain, ``[B, d]``.
        mask
            ``[B, R, d]`` bool, True = feature present (taken from ``x``).
        storage
            Any object with ``sample(n) -> Tensor [n, d]``.
        """
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            raise ValueError(f"x must be a tensor of shape [B, d], got {_shape(x)}")
        b, d = x.shape
        if (
            not isinstance(mask, torch.Tensor)
            or mask.dim() != 3
            or mask.shape[0] != b
            or mask.shape[2] != d
        ):
            raise ValueError(f"mask must have shape [B={b}, R, d={d}], got {_shape(mask)}")
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor (True = present), got {mask.dtype}")
        r = mask.shape[1]
        mask = mask.to(x.device)
        groups = self._groups_for(d)
        if self.mode == "product" and groups is not None:
            drawn = self._group_product(storage, b, r, d, groups)
        elif self.mode == "joint":
            drawn = self._sample(storage, b * r, d).view(b, r, d)
        else:
            n = b * r * d
            if hasattr(storage, "sample_indices") and hasattr(storage, "rows"):
                idx = storage.sample_indices(n).view(b, r, d)
                rows = storage.rows
                feature = torch.arange(d, device=rows.device).expand(b, r, d)
                drawn = rows[idx.to(rows.device), feature]
            else:
                drawn = self._sample(storage, n, d).view(b, r, d, d).diagonal(dim1=2, dim2=3)
        drawn = drawn.to(device=x.device, dtype=x.dtype)
        return torch.where(mask, x.unsqueeze(1), drawn)

    def _groups_for(self, d: int) -> FeatureGroups | None:
        """The validated groups for rows of width ``d`` (checked on first use)."""
        given = self._feature_groups
        if given is None:
            return None
        if self.groups is None or self.groups.column_group.numel() != d:
            self.groups = (
                given if isinstance(given, FeatureGroups) else check_feature_groups(given, d)
            )
            if self.groups.column_group.numel() != d:
                raise ValueError(
                    f"feature_groups cover {self.groups.column_group.numel()} columns, the rows "
                    f"have d={d}"
                )
        return self.groups

    def _group_product(
        self, storage: Any, b: int, r: int, d: int, groups: FeatureGroups
    ) -> torch.Tensor:
        """``[B, R, d]``: column ``j`` of ``(b, r)`` from draw ``(b, r, group(j))``."""
        n_groups = groups.n_groups
        n = b * r * n_groups
        if hasattr(storage, "sample_indices") and hasattr(storage, "rows"):
            rows = storage.rows
            idx = storage.sample_indices(n).view(b, r, n_groups).to(rows.device)
            col_group = groups.column_group.to(rows.device)
            return rows[idx[..., col_group], torch.arange(d, device=rows.device)]
        drawn = self._sample(storage, n, d).view(b, r, n_groups, d)
        col_group = groups.column_group.to(drawn.device).view(1, 1, 1, d).expand(b, r, 1, d)
        return drawn.gather(2, col_group).squeeze(2)

    @staticmethod
    def _sample(storage: Any, n: int, d: int) -> torch.Tensor:
        rows = storage.sample(n)
        if tuple(rows.shape) != (n, d):
            raise ValueError(
                f"storage.sample({n}) returned shape {list(rows.shape)}, expected [{n}, {d}]"
            )
        return rows

    def __repr__(self) -> str:
        return f"MarginalImputer(mode={self.mode!r})"


def _shape(t: Any) -> str:
    return str(list(t.shape)) if isinstance(t, torch.Tensor) else type(t).__name__
