"""CDLEEDS: local change and global drift detection for local explanations (Haug et al. 2022).

* :class:`CDLEEDS` — the detector (:mod:`torchstream.drift.cdleeds.detector`);
* :class:`LocalChangeMonitor` — the runner plug-in that keeps local attributions of monitored
  observations and recomputes them only where CDLEEDS flags a change;
* :mod:`torchstream.drift.cdleeds.tree` — the adaptive hierarchical clustering.
"""

from torchstream.drift.cdleeds.detector import (
    CDLEEDS,
    LocalChange,
    corrected_significance,
    fisher_combine,
)
from torchstream.drift.cdleeds.monitor import LocalChangeMonitor
from torchstream.drift.cdleeds.tree import two_sample_t_test

__all__ = [
    "CDLEEDS",
    "LocalChange",
    "LocalChangeMonitor",
    "corrected_significance",
    "fisher_combine",
    "two_sample_t_test",
]
