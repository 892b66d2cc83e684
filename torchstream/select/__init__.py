"""Online feature selection: FIRES weights, Nogueira stability and the runner plug-in."""

from torchstream.select.fires import FIRES, fires_weights, minmax_scale
from torchstream.select.plugin import FIRESSelector
from torchstream.select.stability import StabilityTracker, nogueira_stability, selection_matrix

__all__ = [
    "FIRES",
    "FIRESSelector",
    "StabilityTracker",
    "fires_weights",
    "minmax_scale",
    "nogueira_stability",
    "selection_matrix",
]
