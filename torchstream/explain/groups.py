"""Feature groups: the encoded columns that together make up one user feature.

A one-hot encoded categorical feature (and a numeric feature with its missing-value indicator)
spans several columns; permuting or removing those columns one by one builds rows no encoder
can produce and splits the feature's importance over its columns. The explainers, FIRES
(:mod:`torchstream.select`) and ERICS (:mod:`torchstream.drift`) therefore accept
``feature_groups``, a mapping ``{feature name: encoded column indices}`` (e.g.
:meth:`torchstream.schema.Schema.feature_groups`), check it with :func:`check_feature_groups`
and act on every group as a whole.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

__all__ = ["FeatureGroups", "check_feature_groups"]


@dataclass(frozen=True)
class FeatureGroups:
    """Validated groups of ``n_features`` columns.

    Attributes
    ----------
    names
        The group names, in the mapping's order.
    members
        The column indices of each group, in the order given.
    column_group
        ``[d]`` long: the group index of every column.
    """

    names: tuple[str, ...]
    members: tuple[tuple[int, ...], ...]
    column_group: torch.Tensor

    @property
    def n_groups(self) -> int:
        return len(self.names)

    def member_mask(self) -> torch.Tensor:
        """``[G, d]`` bool: ``[g, j]`` True where column ``j`` belongs to group ``g``."""
        g = torch.arange(self.n_groups).view(-1, 1)
        return self.column_group.view(1, -1) == g

    def sum_columns(self, values: torch.Tensor) -> torch.Tensor:
        """Sum ``values [..., d]`` over the columns of each group: ``[..., G]``."""
        shape = (*values.shape[:-1], self.n_groups)
        out = torch.zeros(shape, dtype=values.dtype, device=values.device)
        return out.index_add_(-1, self.column_group.to(values.device), values)


def check_feature_groups(
    groups: Mapping[str, Sequence[int]], n_features: int
) -> FeatureGroups:
    """Validate ``groups`` (``{name: column indices}``): every group non-empty, every index an
    int in ``0..n_features-1``, the groups disjoint and covering all columns. ``ValueError``
    naming the offending group (or the uncovered columns) otherwise."""
    if not isinstance(groups, Mapping):
        raise TypeError(
            f"feature_groups must be a mapping {{name: column indices}}, got "
            f"{type(groups).__name__}"
        )
    if not groups:
        raise ValueError("feature_groups is empty: it must cover all columns")
    owner: dict[int, str] = {}
    names: list[str] = []
    members: list[tuple[int, ...]] = []
    for name, cols in groups.items():
        label = str(name)
        if isinstance(cols, (str, bytes)) or not isinstance(cols, Sequence):
            raise ValueError(
                f"feature_groups[{label!r}] must be a sequence of column indices, got {cols!r}"
            )
        if len(cols) == 0:
            raise ValueError(f"feature_groups[{label!r}] is empty: a group needs a column")
        idx: list[int] = []
        for c in cols:
            try:
                j = None if isinstance(c, bool) else operator.index(c)
            except TypeError:
                j = None
            if j is None or not 0 <= j < n_features:
                raise ValueError(
                    f"feature_groups[{label!r}] has {c!r}: column indices must be ints in "
                    f"0..{n_features - 1}"
                )
            if j in owner:
                where = "twice" if owner[j] == label else f"also in group {owner[j]!r}"
                raise ValueError(f"feature_groups[{label!r}] has column {j} {where}")
            owner[j] = label
            idx.append(j)
        if label in names:
            raise ValueError(f"feature_groups has the name {label!r} twice")
        names.append(label)
        members.append(tuple(idx))
    missing = [j for j in range(n_features) if j not in owner]
    if missing:
        raise ValueError(f"feature_groups does not cover the columns {missing}")
    column_group = torch.empty(n_features, dtype=torch.long)
    for g, cols_g in enumerate(members):
        column_group[list(cols_g)] = g
    return FeatureGroups(tuple(names), tuple(members), column_group)
