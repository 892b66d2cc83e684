"""FIRES as a plug-in of the prequential runner: online feature selection in front of a learner.

At step ``t`` the learner sees the batch with the features *not* selected at ``t - 1`` replaced
by a baseline value (the columns are kept, so the learner's input width never changes, as in
FIRES's reference pipeline). Then FIRES learns from the *raw* batch and the new selection
applies from step ``t + 1`` on. This is the strict test-then-train order: the labels of a
batch never influence which features the learner sees for that batch.

References
----------
[^1]: Haug, J., Pawelczyk, M., Broelemann, K. and Kasneci, G. (2020). Leveraging model
    inherent variable importance for stable online feature selection. KDD 2020, 1478-1502.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from torchstream.base import FeatureSelectorBase, PluginBase
from torchstream.models.distributional.placement import to_head
from torchstream.select.fires import FIRES
from torchstream.select.stability import StabilityTracker
from torchstream.typing import BatchView

__all__ = ["FIRESSelector"]


class FIRESSelector(FeatureSelectorBase, PluginBase):
    """Runner plug-in: mask the unselected features, learn FIRES, log weights and stability.

    Hooks (see :mod:`torchstream.evaluate.plugins`):

    * ``transform(X, step)``: keeps the raw ``X`` and returns a copy whose unselected columns
      hold ``baseline``. Before FIRES's first update nothing is known, so nothing is masked.
    * ``on_batch(batch)``: :meth:`learn` from the raw ``X`` (``fires.learn``, then the
      stability of the last ``stability_window`` selections); returns :meth:`scalars`,
      ``{"fires/<feature>": weight, ..., "fires/stability": FSS}`` (FSS is ``nan`` until the
      window is full). With feature groups the ``<feature>`` weights are the group weights
      (:attr:`FIRES.feature_weights`), the column weights follow as ``"fires/column/<column>"``,
      and the stability compares the selected features (groups), not columns.

    Its figures (weights over time, the selection heat map) are drawn from :attr:`fires`'s
    ``history`` by :func:`torchstream.viz.figures.plugin_figures`.

    Parameters
    ----------
    fires
        A :class:`~torchstream.select.fires.FIRES` with a head.
    baseline
        The value given to unselected features: a number, or a tensor ``[d]`` (one value per
        feature). The default 0 is the mean of standardised inputs; for inputs scaled to
        [0, 1] a per-feature running mean may be a better choice.
    stability_window
        Number of recent selections compared by the stability measure (10 in the paper).
    log_weights
        Return one scalar per feature (``False``: only the stability).
    feature_groups
        ``{feature name: column indices}``, handed to ``fires`` (:meth:`FIRES.set_feature_groups`)
        unless it already has the same groups: ``n_selected`` then counts features and the mask
        keeps or replaces whole blocks of columns. ``None``: ``fires``'s own setting.

    Examples
    --------
    >>> import torch
    >>> from torchstream.models.distributional import ProbitHead
    >>> sel = FIRESSelector(FIRES(ProbitHead(3), n_selected=1))
    >>> X = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 1.0]], dtype=torch.float64)
    >>> sel.transform(X, 0).tolist()  # nothing learnt yet: unmasked
    [[1.0, 2.0, 3.0], [-1.0, 0.5, 1.0]]
    >>> sel.learn(X, torch.tensor([1, 0]))
    >>> sel.fires.selected.tolist(), sel.transform(X, 1).tolist(), sel.mask.tolist()
    ([0], [[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]], [True, False, False])
    """

    name = "fires"

    def __init__(
        self,
        fires: FIRES,
        *,
        baseline: float | torch.Tensor = 0.0,
        stability_window: int = 10,
        log_weights: bool = True,
        feature_groups: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        if not isinstance(fires, FIRES):
            raise TypeError(f"fires must be a FIRES, got {type(fires).__name__}")
        if fires.head is None:
            raise ValueError("fires needs a head to learn from the batches")
        d = fires.n_features
        assert d is not None  # set from the head
        if isinstance(baseline, torch.Tensor):
            if baseline.shape not in ((), (d,)):
                raise ValueError(
                    f"baseline must be a number or a tensor [{d}], got shape "
                    f"{tuple(baseline.shape)}"
                )
            if not torch.isfinite(baseline).all():
                raise ValueError("baseline must be finite")
            self.baseline: float | torch.Tensor = baseline.detach().clone()
        elif isinstance(baseline, (int, float)) and not isinstance(baseline, bool):
            if not math.isfinite(baseline):
                raise ValueError(f"baseline must be finite, got {baseline!r}")
            self.baseline = float(baseline)
        else:
            raise TypeError(f"baseline must be a number or a tensor, got {baseline!r}")
        if feature_groups is not None:
            if fires.feature_groups is None:
                fires.set_feature_groups(feature_groups)
            elif {str(k): list(v) for k, v in fires.feature_groups.items()} != {
                str(k): list(v) for k, v in feature_groups.items()
            }:
                raise ValueError("feature_groups differs from the feature_groups of fires")
        self.fires = fires
        n_sets = d if fires.groups is None else fires.groups.n_groups
        self.stability = StabilityTracker(n_sets, window=stability_window)
        self.log_weights = bool(log_weights)
        self._raw: tuple[int, torch.Tensor] | None = None
        #: The stability of the last ``stability_window`` selections after the last update.
        self.last_stability = math.nan

    @property
    def weights(self) -> torch.Tensor | None:
        """FIRES's weights ``[d]`` (None before the first update)."""
        return self.fires.weights

    @property
    def mask(self) -> torch.Tensor | None:
        """FIRES's selection as a boolean ``[d]`` (None before the first update)."""
        return self.fires.mask

    def mask_features(self, X: torch.Tensor) -> torch.Tensor:
        """``X`` with the unselected columns set to the baseline (a new tensor)."""
        d = self.fires.n_features
        if X.ndim != 2 or X.shape[1] != d:
            raise ValueError(f"X must have shape [B, {d}], got {tuple(X.shape)}")
        mask = self.fires.mask
        if mask is None:
            return X.clone()
        keep = mask.to(X.device)
        if isinstance(self.baseline, torch.Tensor):
            fill = self.baseline.to(device=X.device, dtype=X.dtype).expand(X.shape[1])
        else:
            fill = torch.full((X.shape[1],), self.baseline, dtype=X.dtype, device=X.device)
        return torch.where(keep, X, fill)

    def transform(self, X: torch.Tensor, step: int) -> torch.Tensor:
        """Runner hook: keep the raw ``X`` of ``step`` for :meth:`on_batch`, return it masked."""
        self._raw = (int(step), X)
        return self.mask_features(X)

    def learn(self, X: torch.Tensor, y: torch.Tensor | None) -> None:
        """FIRES learns from the raw batch; then the stability update (:meth:`scalars`)."""
        self.fires.learn(*to_head(self.fires.head, X, y))
        if self.fires.selected_groups is not None:
            self.last_stability = self.stability.update(self.fires.selected_groups.cpu())
        else:
            assert self.fires.mask is not None
            self.last_stability = self.stability.update(self.fires.mask.cpu())

    def scalars(self) -> dict[str, float]:
        """``{"fires/<feature>": weight, ...}`` (with ``log_weights``) and
        ``"fires/stability"`` after the last update."""
        out: dict[str, float] = {}
        if self.log_weights:
            groups = self.fires.feature_weights
            if groups is None:
                for name, w in self.fires.as_dict().items():
                    out[f"fires/{name}"] = w
            else:
                for name, w in groups.items():
                    out[f"fires/{name}"] = w
                for name, w in self.fires.as_dict().items():
                    out[f"fires/column/{name}"] = w
        out["fires/stability"] = self.last_stability
        return out

    def on_batch(self, batch: BatchView) -> Mapping[str, float]:
        """Runner hook: learn from the raw X kept by :meth:`transform` for this step (or from
        ``batch.X`` if ``transform`` was not called for it, e.g. in a user's own loop)."""
        if self._raw is not None and self._raw[0] == int(batch.step):
            X = self._raw[1]
        else:
            X = batch.X
        self._raw = None
        self.learn(X, batch.y)
        return self.scalars()

    def state_dict(self) -> dict[str, object]:
        return {"fires": self.fires.state_dict(), "stability": self.stability.state_dict(),
                "last_stability": self.last_stability}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.fires.load_state_dict(state["fires"])
        self.stability.load_state_dict(state["stability"])
        self.last_stability = float(state["last_stability"])
        self._raw = None

    def __repr__(self) -> str:
        return f"FIRESSelector({self.fires!r}, baseline={self.baseline!r})"
