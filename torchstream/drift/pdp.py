"""Drift detection on the stream of PDP-based importance scores (iPDP §4.1 [^1]).

An :class:`~torchstream.explain.ipdp.IncrementalPDP` turns the stream into a stream of partial
dependence plots; summarising each plot by its PDP-based importance score (the standard
deviation of the PD values over the grid) gives a scalar stream, and a standard change detector
on that stream (ADWIN by default) flags changes of the model's dependence on the feature. At
every detection the current plot is kept, so one can look at what changed.

References
----------
[^1]: Muschalik, M., Fumagalli, F., Jagtani, R., Hammer, B. and Hüllermeier, E. (2023). iPDP:
    On Partial Dependence Plots in Dynamic Modeling Scenarios. xAI 2023, CCIS 1901, 177–194.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from river.drift import ADWIN

from torchstream.base import DriftDetectorBase
from torchstream.checkpoint import restore_object
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.typing import BatchView

__all__ = ["PDPDriftDetector"]


class PDPDriftDetector(DriftDetectorBase):
    """A change detector on the PDP-based importance score of an :class:`IncrementalPDP`.

    Algorithm (one call per batch)::

        explainer.explain(batch)                     # the iPDP, updated with the batch
        score    = std(pd, ddof=1)                   # PDP-based importance (Greenwell et al.)
        detector.update(score)                       # ADWIN (river) by default
        if detector.drift_detected:
            record the row index (end of the batch) and a snapshot (row, grid, pd)

    The detector *owns* its explainer: register only the detector as a plug-in (not the
    explainer as well), or call :meth:`explain` in a loop. Nothing is fed to the change detector
    while the explainer warms up (no valid range yet). Note that the score is blind to a pure
    sign flip of a linear effect (its sd is the same for slopes ``beta`` and ``-beta``); a flip
    that also changes the magnitude of the slope, or the shape or range of the plot, shows.

    Parameters
    ----------
    explainer
        The :class:`~torchstream.explain.ipdp.IncrementalPDP` whose score is watched.
    detector
        Any object with river's ``update(x)`` and ``drift_detected``; default
        ``river.drift.ADWIN()`` (``delta = 0.002``).

    Examples
    --------
    A linear model whose slope on ``x0`` jumps from 1 to 3 at row 4000 (ADWIN tests for a
    change every 32 updates, here every 640 rows, which dominates the delay):

    >>> import torch
    >>> from torchstream.explain.ipdp import IncrementalPDP
    >>> from torchstream.drift import PDPDriftDetector
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.rand(8000, 2, generator=g, dtype=torch.float64)
    >>> slope = [1.0]
    >>> ipdp = IncrementalPDP(lambda Z: slope[0] * Z[:, 0] + Z[:, 1], 0, alpha=0.01,
    ...                       grid_size=10, window=500)
    >>> detector = PDPDriftDetector(ipdp)
    >>> for start in range(0, 8000, 20):
    ...     slope[0] = 1.0 if start < 4000 else 3.0
    ...     detector.explain(X[start:start + 20])
    >>> detector.drift_positions, detector.alerts  # the end of the batch; its last row
    ([4500], [4499])

    References
    ----------
    [^1]: Muschalik, M., Fumagalli, F., Jagtani, R., Hammer, B. and Hüllermeier, E. (2023).
        iPDP: On Partial Dependence Plots in Dynamic Modeling Scenarios. xAI 2023, CCIS 1901,
        177–194.
    """

    def __init__(self, explainer: IncrementalPDP, detector: Any = None) -> None:
        if not isinstance(explainer, IncrementalPDP):
            raise TypeError(
                f"explainer must be an IncrementalPDP, got {type(explainer).__name__}"
            )
        if detector is None:
            detector = ADWIN()
        if not callable(getattr(detector, "update", None)) or not hasattr(
            detector, "drift_detected"
        ):
            raise TypeError(
                f"detector needs update(x) and drift_detected (river's protocol), got "
                f"{type(detector).__name__}"
            )
        super().__init__()
        self.explainer = explainer
        self.detector = detector
        self.snapshots: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        self.n_updates = 0  # scores fed to the change detector

    @property
    def name(self) -> str:
        """Plug-in name, ``"pdp_drift/<feature_name>"``."""
        return f"pdp_drift/{self.explainer.feature_name}"

    @property
    def tag(self) -> str:
        """Tag of the detection flag, ``"drift/pdp_<feature_name>"``."""
        return f"drift/pdp_{self.explainer.feature_name}"

    def _after(self, end: int) -> None:
        """Feed the current score to the change detector; ``end`` = row index after the batch."""
        hit = False
        if self.explainer.n_explained > 0:
            self.detector.update(self.explainer.score)
            self.n_updates += 1
            hit = bool(self.detector.drift_detected)
        if hit:
            self.snapshots.append((end, self.explainer.grid.cpu(), self.explainer.pd.cpu()))
        self.n_rows = end
        self._alarm([end - 1] if hit else [])

    @property
    def drift_positions(self) -> list[int]:
        """The row after each alert's (the end of the alerting batch; :attr:`alerts` holds
        its last row)."""
        return [a + 1 for a in self.alerts]

    def explain(self, X: torch.Tensor, y: torch.Tensor | None = None) -> None:
        """Update the explainer with ``X`` and the change detector with the new score;
        :attr:`new_alerts` holds the batch's last row when it raised an alert."""
        self.explainer.explain(X, y)
        self._after(self.n_rows + int(X.shape[0]))

    def update(self, batch: BatchView) -> None:
        """The runner's update: the explainer on the batch, then the change detector (an
        alert at the batch's last row, ``batch.start + batch.size - 1``)."""
        self.explainer.on_batch(batch)
        self._after(int(batch.start) + int(batch.size))

    def _scalars(self) -> dict[str, float]:
        """``{"ipdp/<f>/importance": score, "drift/pdp_<f>": 1.0 on an alert else 0.0}``
        (empty while the explainer warms up)."""
        if self.explainer.n_explained == 0:
            return {}
        return {
            f"{self.explainer.name}/importance": self.explainer.score,
            self.tag: 1.0 if self.drift_detected else 0.0,
        }

    def state_dict(self) -> dict[str, object]:
        """Explainer, change detector (a copy), alerts and snapshots: resume is bit-exact."""
        return {
            "explainer": self.explainer.state_dict(),
            "detector": copy.deepcopy(self.detector),
            "drift_detected": self.drift_detected,
            "alerts": list(self.alerts),
            "snapshots": [(r, g.clone(), p.clone()) for r, g, p in self.snapshots],
            "n_updates": self.n_updates,
            "n_rows": self.n_rows,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.explainer.load_state_dict(state["explainer"])
        detector = state["detector"]
        self.detector = restore_object(detector, "the change detector")
        self.drift_detected = bool(state["drift_detected"])
        self.alerts = [int(a) for a in state["alerts"]]
        self.snapshots = [(int(r), g.clone(), p.clone()) for r, g, p in state["snapshots"]]
        self.n_updates = int(state["n_updates"])
        self.n_rows = int(state["n_rows"])

    def __repr__(self) -> str:
        return (
            f"PDPDriftDetector(feature={self.explainer.feature_name!r}, "
            f"detector={type(self.detector).__name__}, alerts={len(self.alerts)})"
        )
