"""A runner plug-in that keeps local attributions valid on a stream: CDLEEDS decides which
monitored observations need their attributions recomputed (CIKM 2022, experiment 2).

Per batch (test -> explain -> learn order, the learner as it was before learning the batch)::

    phi0 = f_t(b_t)                       # the model at the EWMA of the inputs (beta = 0.001)
    cdleeds.observe(X, f_t(X), phi0)
    change = cdleeds.detect_local_change()
    recompute the attributions of the monitored rows in change.recompute
    b_{t+1} <- EWMA update with X         # b_0 = the mean of the first batch

The share of recomputations saved is ``1 - recomputed / (n_monitored * steps)``: the naive
alternative recomputes every monitored attribution at every step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from torchstream.base import DriftDetectorBase
from torchstream.drift.cdleeds.detector import CDLEEDS
from torchstream.schema import feature_names_for
from torchstream.explain.baselines import Baseline, EWMABaseline
from torchstream.learners.scaling import RunningStandardizer
from torchstream.typing import BatchView

__all__ = ["LocalChangeMonitor"]


class LocalChangeMonitor(DriftDetectorBase):
    """CDLEEDS plus the stored local attributions of monitored observations.

    Parameters
    ----------
    detector
        A :class:`~torchstream.drift.cdleeds.CDLEEDS` (default: the paper's settings).
    explainer
        A :class:`~torchstream.explain.local.LocalAttributor` whose model is the evaluated
        learner (or the same function); ``None``: only count what would be recomputed.
    monitored
        The observations ``[n, m]`` to keep explained, or a number ``n``: the first ``n`` rows
        of the stream (taken from the first batches).
    beta
        EWMA rate of the baseline input ``b_t``.
    baseline
        Another static, deterministic baseline input (e.g. a
        :class:`~torchstream.explain.baselines.ConstantBaseline`) instead of the EWMA; it is
        updated with every batch after the batch is processed (the first batch: before).
    log_attributions
        How many monitored observations log their attributions as scalars
        (``<name>/attribution/<i>/<feature>``).
    feature_names
        For those scalars (default ``x0..``).
    name
        Plug-in name (scalar prefix).
    scale_inputs
        CDLEEDS sees the inputs standardised with running statistics (updated with each batch
        before it is used): its neighbourhoods compare RBF similarities, which need the
        columns on one scale. The model and the baseline still see the raw inputs; monitored
        rows are standardised once, when they are registered; :meth:`to_inputs` maps CDLEEDS's
        centroids back (default False: the inputs as given).

    Attributes
    ----------
    attributions
        The stored attributions ``[n, m]`` (None before the monitored set is complete or
        without an explainer).
    computed_at
        The step at which each stored attribution was (re)computed ``[n]``.
    n_recomputed, n_possible
        Recomputations done and the naive count (``n`` per step after the initial one).
    drift_detected
        The detector's global alert at the last step.
    alerts
        The detector's global alerts, as stream rows (the last row of the alerting batch).
    """

    def __init__(
        self,
        detector: CDLEEDS | None = None,
        explainer: Any = None,
        *,
        monitored: torch.Tensor | int = 100,
        beta: float = 0.001,
        baseline: Baseline | None = None,
        log_attributions: int = 3,
        feature_names: Sequence[str] | None = None,
        name: str = "cdleeds",
        scale_inputs: bool = False,
    ) -> None:
        self.detector = detector if detector is not None else CDLEEDS()
        self.explainer = explainer
        if isinstance(monitored, int) and not isinstance(monitored, bool):
            if monitored < 1:
                raise ValueError(f"monitored must be >= 1 rows, got {monitored}")
            self._wanted, self._rows = monitored, None
        else:
            rows = torch.as_tensor(monitored)
            if rows.dim() != 2 or rows.shape[0] == 0:
                raise ValueError(
                    f"monitored must be rows [n, m] or a count, got shape {list(rows.shape)}"
                )
            self._wanted, self._rows = rows.shape[0], rows.clone()
        self._pending: list[torch.Tensor] = []
        if baseline is not None and (
            baseline.stochastic or not baseline.static or baseline.needs_model
        ):
            raise ValueError(f"baseline must be static and deterministic, got {baseline!r}")
        self.baseline = baseline if baseline is not None else EWMABaseline(beta)
        self.log_attributions = int(log_attributions)
        self.feature_names = feature_names
        self.name = name
        self.scale_inputs = bool(scale_inputs)
        self.scaler: RunningStandardizer | None = None
        self.attributions: torch.Tensor | None = None
        self.computed_at: torch.Tensor | None = None
        self.n_recomputed = 0
        self.n_possible = 0
        super().__init__()  # alerts (the detector's, as stream rows), new_alerts, n_rows
        self._last: dict[str, float] = {}
        self._started = False

    # ------------------------------------------------------------------ helpers
    @property
    def monitored(self) -> torch.Tensor | None:
        return self._rows if self._started else None

    @property
    def saved_share(self) -> float:
        """``1 - recomputed / possible`` (NaN before the first comparison)."""
        return float("nan") if self.n_possible == 0 else 1.0 - self.n_recomputed / self.n_possible

    def _collect(self, X: torch.Tensor) -> None:
        if self._rows is None:
            have = sum(int(p.shape[0]) for p in self._pending)
            self._pending.append(X[: self._wanted - have].detach().clone())
            if have + self._pending[-1].shape[0] >= self._wanted:
                self._rows = torch.cat(self._pending)
                self._pending = []

    def _scaled(self, X: torch.Tensor) -> torch.Tensor:
        return X if self.scaler is None else self.scaler.transform(X)

    def to_inputs(self, Z: torch.Tensor) -> torch.Tensor:
        """Points of CDLEEDS's space (e.g. its leaf centroids) in the inputs' units."""
        if self.scaler is None:
            return Z
        return self.scaler.inverse(Z.to(self.scaler.mean.device, torch.float64))

    def _explain(self, rows: torch.Tensor) -> torch.Tensor:
        return self.explainer.attribute(rows).attributions.detach()

    # ------------------------------------------------------------------ plug-in
    def update(self, batch: BatchView) -> None:
        """The runner's update: CDLEEDS on the batch (against the model's output at the
        baseline input), then the monitored rows' attributions recomputed where their
        neighbourhood changed."""
        X, y_pred, model = batch.X, batch.y_pred, batch.learner
        fresh = self.baseline.n_seen == 0
        if fresh:  # b_0 = the mean of the first batch
            self.baseline.update(X)
        b = self.baseline(X[:1]).to(device=X.device, dtype=X.dtype)
        with torch.no_grad():
            phi0 = torch.as_tensor(model(b)).detach()
        phi0 = phi0.reshape(-1) if phi0.dim() == 2 else phi0.reshape(())
        if self.scale_inputs:
            if self.scaler is None:
                self.scaler = RunningStandardizer(int(X.shape[1])).to(X.device)
            self.scaler.update(X)
        self.detector.observe(self._scaled(X), y_pred, phi0, start=batch.start)
        self._advance(int(X.shape[0]), batch.start)
        regions = self.detector.new_regions
        self._alarm(self.detector.new_alerts,
                    regions=None if regions is None else self.to_inputs(regions))
        out: dict[str, float] = {
            "n_leaves": float(self.detector.n_leaves),
        }
        recomputed = 0
        if not self._started:
            self._collect(X)
            if self._rows is not None:
                self._rows = self._rows.to(X.device, X.dtype)
                self.detector.monitor(self._scaled(self._rows))
                if self.explainer is not None:
                    self.attributions = self._explain(self._rows)
                    self.computed_at = torch.full((self._rows.shape[0],), int(batch.step))
                self._started = True
            change = self.detector.detect_local_change()
        else:
            change = self.detector.detect_local_change()
            assert change.recompute is not None and self._rows is not None
            mask = change.recompute.to(self._rows.device)
            recomputed = int(mask.sum())
            self.n_recomputed += recomputed
            self.n_possible += int(self._rows.shape[0])
            if recomputed and self.explainer is not None and self.attributions is not None:
                self.attributions[mask.to(self.attributions.device)] = self._explain(
                    self._rows[mask]
                ).to(self.attributions.dtype)
                assert self.computed_at is not None
                self.computed_at[mask.cpu()] = int(batch.step)
        out["changed_leaves"] = float(change.change.sum())
        out["recomputed"] = float(recomputed)
        out["saved_share"] = self.saved_share
        p = self.detector.global_p_values
        out["global_p"] = float(p.nan_to_num(1.0).min()) if p.numel() else float("nan")
        explainer = self.explainer
        if hasattr(explainer, "update") and getattr(explainer, "update_baseline", True):
            explainer.update(X)
        if not fresh:
            self.baseline.update(X)
        if self.attributions is not None and self.log_attributions:
            names = feature_names_for(self.feature_names, self.attributions.shape[1])
            for i in range(min(self.log_attributions, self.attributions.shape[0])):
                for j, v in enumerate(self.attributions[i].tolist()):
                    out[f"attribution/{i}/{names[j]}"] = v
        self._last = {f"{self.name}/{k}": v for k, v in out.items()}

    def _scalars(self) -> dict[str, float]:
        """The last update's ``<name>/n_leaves``, ``changed_leaves``, ``recomputed``,
        ``saved_share``, ``global_p`` and the first monitored rows' attributions
        (``<name>/attribution/<i>/<feature>``)."""
        return self._last

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, object]:
        clone = lambda t: None if t is None else t.clone()
        return {
            "detector": self.detector.state_dict(),
            "explainer": None
            if self.explainer is None or not hasattr(self.explainer, "state_dict")
            else self.explainer.state_dict(),
            "baseline": self.baseline.state_dict(),
            "rows": clone(self._rows),
            "pending": [p.clone() for p in self._pending],
            "started": self._started,
            "attributions": clone(self.attributions),
            "computed_at": clone(self.computed_at),
            "n_recomputed": self.n_recomputed,
            "n_possible": self.n_possible,
            "drift_detected": self.drift_detected,
            "scale_inputs": self.scale_inputs,
            "scaler": None if self.scaler is None else list(self.scaler.snapshot()),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.detector.load_state_dict(state["detector"])
        if state["explainer"] is not None and self.explainer is not None:
            self.explainer.load_state_dict(state["explainer"])
        self.baseline.load_state_dict(state["baseline"])
        clone = lambda t: None if t is None else torch.as_tensor(t).clone()
        self._rows = clone(state["rows"])
        self._pending = [torch.as_tensor(p).clone() for p in state["pending"]]
        self._started = bool(state["started"])
        self.attributions = clone(state["attributions"])
        self.computed_at = clone(state["computed_at"])
        self.n_recomputed = int(state["n_recomputed"])
        self.n_possible = int(state["n_possible"])
        self.drift_detected = bool(state["drift_detected"])
        self.alerts = list(self.detector.alerts)
        self.n_rows = self.detector.n_rows
        if bool(state.get("scale_inputs", False)) != self.scale_inputs:
            raise ValueError(f"state has scale_inputs={state.get('scale_inputs', False)}, "
                             f"this monitor has scale_inputs={self.scale_inputs}")
        scaler = state.get("scaler")
        self.scaler = None if scaler is None else RunningStandardizer.from_snapshot(scaler)

    def __repr__(self) -> str:
        return f"LocalChangeMonitor({self.detector!r}, monitored={self._wanted})"
