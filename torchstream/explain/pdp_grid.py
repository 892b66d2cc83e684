"""The partial-dependence grid of :class:`~torchstream.explain.ipdp.IncrementalPDP` (and of
:class:`~torchstream.explain.ipdp2d.IncrementalPDP2D` and the drift report's PD curves): argument
checks, the explained feature group (:func:`group_spec`), the fixed grid, the range storages
behind the moving grids and the evaluation points they give and the model's explained output at
the modified rows (the ICE values, :func:`select_output`).

The public names (:data:`MISSING_LABEL`, :class:`GroupSpec`, :func:`group_spec`,
:func:`select_output`) are shared with the drift report; the ``_``-prefixed helpers serve the
two estimators of this package."""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import torch

from torchstream.explain._checks import first_nonfinite
from torchstream.explain.groups import check_feature_groups
from torchstream.explain.storage import FrequencyStorage, RollingExtremes
from torchstream.typing import ModelFn

__all__ = ["MISSING_LABEL", "GroupSpec", "group_spec", "select_output"]

GridRule = Literal["rolling", "quantile", "fixed"]
RangeStorage = RollingExtremes | FrequencyStorage


def _int_at_least(value: Any, argument: str, minimum: int) -> int:
    try:
        out = operator.index(value)
    except TypeError:
        raise ValueError(f"{argument} must be an integer >= {minimum}, got {value!r}") from None
    if isinstance(value, bool) or out < minimum:
        raise ValueError(f"{argument} must be an integer >= {minimum}, got {value!r}")
    return int(out)


def _fixed_values(fixed_range: Any, grid_size: int) -> torch.Tensor:
    """The evaluation points of the fixed grid: ``grid_size`` equidistant points for a pair
    ``(lo, hi)``; the given values for a tensor / array / sequence of another length."""
    if fixed_range is None:
        raise ValueError("grid='fixed' needs fixed_range=(lo, hi) or a sequence of grid values")
    is_pair = (
        isinstance(fixed_range, (tuple, list))
        and len(fixed_range) == 2
        and not isinstance(fixed_range, torch.Tensor)
    )
    try:
        values = torch.as_tensor(
            [float(v) for v in fixed_range] if isinstance(fixed_range, (tuple, list))
            else fixed_range,
            dtype=torch.float64,
        ).detach().cpu()
    except (TypeError, ValueError):
        raise ValueError(
            f"fixed_range must be a pair (lo, hi) or a 1-D sequence of grid values, got "
            f"{fixed_range!r}"
        ) from None
    if values.dim() != 1 or values.numel() < 2:
        raise ValueError(
            f"fixed_range must be a pair (lo, hi) or a 1-D sequence of >= 2 grid values, got "
            f"shape {list(values.shape)}"
        )
    if not bool(torch.isfinite(values).all()):
        raise ValueError(f"fixed_range must be finite, got {values.tolist()}")
    if is_pair:
        lo, hi = float(values[0]), float(values[1])
        if not lo < hi:
            raise ValueError(f"fixed_range=(lo, hi) needs lo < hi, got ({lo}, {hi})")
        return torch.linspace(lo, hi, grid_size, dtype=torch.float64)
    return values.clone()


def _check_quantiles(quantiles: Any) -> tuple[float, float]:
    try:
        q_lo, q_hi = (float(q) for q in quantiles)
    except (TypeError, ValueError):
        raise ValueError(f"quantiles must be a pair (q_lo, q_hi), got {quantiles!r}") from None
    if not 0.0 <= q_lo < q_hi <= 1.0:
        raise ValueError(f"quantiles must satisfy 0 <= q_lo < q_hi <= 1, got {quantiles!r}")
    return (q_lo, q_hi)


class _GridSettings(NamedTuple):
    rule: GridRule
    grid_size: int
    window: int
    quantiles: tuple[float, float]
    storage_size: int
    entrance_prob: float
    fixed: torch.Tensor | None  # the fixed grid's points, None for a moving grid


def _grid_settings(
    grid: Any,
    grid_size: Any,
    window: Any,
    quantiles: Any,
    storage_size: Any,
    entrance_prob: Any,
    fixed_range: Any,
) -> _GridSettings:
    """The checked grid arguments of :class:`~torchstream.explain.ipdp.IncrementalPDP`;
    ``grid_size`` becomes the number of listed points for explicit fixed grid values."""
    if isinstance(grid_size, bool) or not isinstance(grid_size, int) or grid_size < 2:
        raise ValueError(f"grid_size must be an integer >= 2, got {grid_size!r}")
    if grid not in ("rolling", "quantile", "fixed"):
        raise ValueError(f"grid must be 'rolling', 'quantile' or 'fixed', got {grid!r}")
    window = _int_at_least(window, "window", 1)
    q_pair = _check_quantiles(quantiles)
    storage_size = _int_at_least(storage_size, "storage_size", 1)
    prob = float(entrance_prob)
    if not 0.0 < prob <= 1.0:
        raise ValueError(f"entrance_prob must be in (0, 1], got {entrance_prob!r}")
    fixed = None
    if grid == "fixed":
        fixed = _fixed_values(fixed_range, grid_size)
        grid_size = int(fixed.numel())
    elif fixed_range is not None:
        raise ValueError(f"fixed_range is only used with grid='fixed', not grid={grid!r}")
    return _GridSettings(grid, grid_size, window, q_pair, storage_size, prob, fixed)


def _feature_index(feature: Any, feature_names: Any) -> tuple[int, list[str] | None]:
    """The explained column's index and the column names as a list (None without names).

    ``feature`` is an index or one of ``feature_names`` (a sequence of unique names, or
    anything with a ``.columns`` attribute such as a :class:`~torchstream.schema.Schema`)."""
    names: list[str] | None = None
    if feature_names is not None:
        columns = getattr(feature_names, "columns", None)
        if columns is not None and not isinstance(feature_names, (str, bytes)):
            feature_names = columns
        if isinstance(feature_names, (str, bytes)):
            raise TypeError(f"feature_names must be a sequence of names, got {feature_names!r}")
        names = [str(n) for n in feature_names]
        if not names:
            raise ValueError("feature_names must name at least one column, got none")
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"feature_names must be unique, duplicated: {dup}")
    if isinstance(feature, str):
        if names is None:
            raise ValueError(
                f"feature {feature!r} is a name: pass feature_names= (the column names) or "
                "give the column's index"
            )
        if feature not in names:
            raise ValueError(f"feature {feature!r} is not one of feature_names {names}")
        return names.index(feature), names
    index = _int_at_least(feature, "feature", 0)
    if names is not None and index >= len(names):
        raise ValueError(
            f"feature index {index} is out of range for the {len(names)} feature_names {names}"
        )
    return index, names


def _check_batch(
    X: Any, feature: int, feature_name: str, n_features: int | None, n_names: int | None = None
) -> tuple[torch.Tensor, int]:
    """``X`` as a floating tensor ``[B, d]`` and its width ``d``, checked against the explained
    ``feature``, against the width ``n_features`` of earlier batches (None: first batch) and
    against the number ``n_names`` of column names (None: no names). Its values are checked by
    :func:`_check_finite`."""
    if not isinstance(X, torch.Tensor):
        raise TypeError(f"X must be a tensor [B, d], got {type(X).__name__}")
    if X.dim() != 2 or X.shape[0] < 1:
        raise ValueError(f"X must have shape [B, d] with B >= 1, got {list(X.shape)}")
    d = int(X.shape[1])
    if n_names is not None and d != n_names:
        raise ValueError(f"X has {d} columns but feature_names names {n_names}")
    if n_features is None:
        if feature >= d:
            raise ValueError(
                f"feature index {feature} ({feature_name!r}) is out of range for "
                f"X with {d} columns"
            )
    elif d != n_features:
        raise ValueError(f"X must have {n_features} columns like before, got {d}")
    if not X.is_floating_point():
        X = X.to(torch.get_default_dtype())
    return X, d


def _check_finite(X: torch.Tensor, total: float, feature: int, feature_name: str,
                  step: int) -> None:
    """Raise for a NaN / inf value in any column of ``X`` (the model reads them all), naming the
    batch row and column; ``total`` is the sum of ``X`` (one fused reduction, read by the
    caller: the values are looked at one by one only when it is not finite). ``step`` names
    the batch in errors."""
    if not math.isfinite(total):
        hit = first_nonfinite(X)
        if hit is not None:
            (row, col), value = hit
            name = f" ({feature_name!r}, the explained feature)" if col == feature else ""
            raise ValueError(
                f"X has NaN or inf values at step {step}: batch row {row}, column {col}{name} "
                f"is {value}; every value must be finite"
            )


def _range_storage(
    grid: GridRule, window: int, storage_size: int, entrance_prob: float, seed: int | None
) -> RangeStorage | None:
    """The storage of the feature's recent values behind a moving grid (None: fixed grid)."""
    if grid == "rolling":
        return RollingExtremes(window)
    if grid == "quantile":
        return FrequencyStorage(storage_size, entrance_prob=entrance_prob, seed=seed)
    return None


def _evaluation_points(
    fixed: torch.Tensor | None,
    storage: RangeStorage | None,
    quantiles: tuple[float, float],
    grid_size: int,
) -> torch.Tensor | None:
    """The current evaluation points (float64, CPU): the ``fixed`` grid, ``grid_size``
    equidistant points over the range ``[lo, hi]`` the storage gives, or the one point ``[lo]``
    where ``lo == hi``; None until the storage holds two values (one value says nothing about
    the range)."""
    if fixed is not None:
        return fixed
    assert storage is not None
    if isinstance(storage, RollingExtremes):
        if storage.n_seen < 2:
            return None
        lo, hi = storage.min, storage.max
    else:
        if len(storage) < 2:
            return None
        q = storage.quantile(torch.tensor(quantiles, dtype=torch.float64))
        lo, hi = float(q[0]), float(q[1])
    if lo == hi:
        return torch.tensor([lo], dtype=torch.float64)
    return torch.linspace(lo, hi, grid_size, dtype=torch.float64)


def _evaluate(
    model_fn: ModelFn,
    Z: torch.Tensor,
    *,
    output_index: int | None,
    chunk_size: int | None,
    dtype: torch.dtype,
    step: int,
    first_row: int,
    grid_size: int,
) -> torch.Tensor:
    """The explained output ``[n]`` (as ``dtype``) of ``model_fn`` on the rows ``Z``, in chunks
    of ``chunk_size`` rows, under no_grad; ``step`` and ``first_row`` name the batch in errors."""
    n = Z.shape[0]
    chunk = chunk_size or n
    outs = []
    with torch.no_grad():
        for start in range(0, n, chunk):
            part = Z[start:start + chunk]
            outs.append(select_output(model_fn(part), part.shape[0], output_index, step))
    out = outs[0] if len(outs) == 1 else torch.cat(outs)
    out = out.to(dtype)
    if not math.isfinite(out.sum().item()):  # one reduction; rows only looked at on failure
        rows = (~torch.isfinite(out)).nonzero()
        if rows.shape[0]:
            first = int(rows[0])
            kind = "NaN" if math.isnan(out[first].item()) else "inf"
            raise ValueError(
                f"model_fn returned {kind} at step {step} for {int(rows.shape[0])} of {n} "
                f"evaluations (first: batch row {first // grid_size}, row "
                f"{first_row + first // grid_size} of the stream), although the batch is "
                f"finite: the model itself gives non-finite outputs"
            )
    return out


def select_output(out: Any, n: int, output_index: int | None, step: int) -> torch.Tensor:
    """The explained output ``[n]`` of a model's output ``out`` for ``n`` rows: ``out`` itself
    when it is ``[n]`` (``output_index`` must then be None), else its column ``output_index``
    (default: 1 for two or more columns, the positive class, else 0); a wrong type, shape or
    index raises, naming ``step``.

    >>> select_output(torch.tensor([[0.25, 0.75], [0.5, 0.5]]), 2, None, 0).tolist()
    [0.75, 0.5]
    """
    if not isinstance(out, torch.Tensor):
        raise TypeError(
            f"model_fn must return a tensor [n] or [n, k], got {type(out).__name__} at step "
            f"{step}"
        )
    if out.dim() not in (1, 2) or out.shape[0] != n:
        raise ValueError(
            f"model_fn returned shape {list(out.shape)} for {n} rows at step {step}; "
            f"expected [{n}] or [{n}, k]"
        )
    if out.dim() == 1:
        if output_index is not None:
            raise ValueError(
                f"output_index={output_index} needs an [n, k] model output, but "
                f"model_fn returned shape [{n}] at step {step}; use output_index=None"
            )
        return out
    k = out.shape[1]
    index = output_index if output_index is not None else (1 if k >= 2 else 0)
    if index >= k:
        raise ValueError(
            f"output_index={index} is out of range for the model output of shape "
            f"[{n}, {k}] at step {step}"
        )
    return out[:, index]


FeatureKind = Literal["numeric", "categorical", "nullable"]
MISSING_LABEL = "missing"


class GroupSpec(NamedTuple):
    """The explained feature of an :class:`~torchstream.explain.ipdp.IncrementalPDP` with
    ``feature_groups``: its group, what kind of encoding the group is and its columns."""

    name: str  # the group's name
    position: int  # the group's position in feature_groups
    kind: FeatureKind
    columns: tuple[int, ...]  # the one-hot block, or (value column, missing indicator)
    labels: tuple[str, ...]  # the category names of a one-hot block, else ()
    group_names: tuple[str, ...]  # all group names, in order
    n_columns: int  # the number of encoded columns the groups cover


def group_spec(
    feature: Any, groups: Mapping[str, Sequence[int]], names: list[str] | None
) -> GroupSpec:
    """The explained group ``feature`` (a group name, or its position in ``groups``) of the
    validated ``groups`` (covering ``len(names)`` columns, or the columns ``0..max index``
    without names) and its kind: one column is ``"numeric"``; two columns whose second is named
    ``"<value column>:missing"`` are a ``"nullable"`` numeric (value, missing indicator), as
    :class:`~torchstream.schema.Schema` names them; any other group is a one-hot block
    (``"categorical"``), its categories labelled by their column names without the
    ``"<group>="`` prefix (``x<j>`` without names)."""
    if not isinstance(groups, Mapping):
        raise TypeError(
            f"feature_groups must be a mapping {{name: column indices}}, got "
            f"{type(groups).__name__}"
        )
    if names is not None:
        width = len(names)
    else:
        try:
            width = 1 + max(int(operator.index(c)) for cols in groups.values() for c in cols)
        except (TypeError, ValueError):
            width = 0  # check_feature_groups names the offending group
    checked = check_feature_groups(groups, max(width, 1))
    if isinstance(feature, str):
        if feature not in checked.names:
            raise ValueError(
                f"feature {feature!r} is not one of the feature_groups {list(checked.names)}"
            )
        index = checked.names.index(feature)
    else:
        index = _int_at_least(feature, "feature", 0)
        if index >= checked.n_groups:
            raise ValueError(
                f"feature index {index} is out of range for the {checked.n_groups} "
                f"feature_groups {list(checked.names)}"
            )
    name, cols = checked.names[index], checked.members[index]
    col_names = [names[j] if names is not None else f"x{j}" for j in cols]
    labels: tuple[str, ...] = ()
    if len(cols) == 1:
        kind: FeatureKind = "numeric"
    elif len(cols) == 2 and col_names[1] == f"{col_names[0]}:missing":
        kind = "nullable"
    else:
        kind = "categorical"
        prefix = f"{name}="
        labels = tuple(c[len(prefix):] if c.startswith(prefix) else c for c in col_names)
    return GroupSpec(name, index, kind, cols, labels, checked.names, width)


def _check_indicator(values: torch.Tensor, column: int, name: str, step: int) -> None:
    """Raise unless the missing indicator ``values`` (host float64 ``[B]``) are 0 or 1, naming
    the batch row and ``column``."""
    bad = ((values != 0) & (values != 1)).nonzero()
    if bad.shape[0]:
        row = int(bad[0])
        raise ValueError(
            f"X at step {step}: batch row {row}, column {column} ({name!r}, a missing-value "
            f"indicator) is {float(values[row])}; it must be 0 or 1"
        )


def _check_onehot(X: torch.Tensor, bad: torch.Tensor, columns: tuple[int, ...], name: str,
                  step: int) -> None:
    """Raise where ``bad`` (host ``[B]``, nonzero at rows whose one-hot block ``columns`` of
    ``X`` is not exactly one 1 and zeros) flags a row, naming the first and its values."""
    rows = bad.nonzero()
    if rows.shape[0]:
        row = int(rows[0])
        values = X[row, list(columns)].tolist()
        raise ValueError(
            f"X at step {step}: batch row {row}, the one-hot columns {list(columns)} of "
            f"{name!r} are {values}; a one-hot row has exactly one 1 and zeros elsewhere"
        )


def _block_values(kind: FeatureKind, z: torch.Tensor, fill: float) -> tuple[torch.Tensor,
                                                                             torch.Tensor]:
    """What the explained group's columns hold at each evaluation point: ``values [r, w]``
    (``w`` its columns, ``r`` its points) and the points as evaluated ``[r]``, from the numeric
    points ``z`` (the category indices ``0..k-1`` of a one-hot block). A numeric column holds
    ``z``; a one-hot block the one-hot row of each category; a nullable numeric ``(z, 0)`` at
    every numeric point and ``(fill, 1)`` at its "missing" point, last (``fill``: what a
    missing cell becomes, the running mean of the present values)."""
    if kind == "categorical":
        return torch.eye(z.shape[0], dtype=z.dtype, device=z.device), z
    if kind == "nullable":
        missing = z.new_tensor([[fill, 1.0]])
        values = torch.cat([torch.stack([z, torch.zeros_like(z)], 1), missing])
        return values, torch.cat([z, z.new_full((1,), fill)])
    return z.unsqueeze(1), z
