"""Drift detection: on explanation streams, on prediction errors, on parameter distributions."""

from torchstream.drift.error_detector import ErrorDetector
from torchstream.drift.erics import ERICS
from torchstream.drift.pdp import PDPDriftDetector

__all__ = ["ERICS", "ErrorDetector", "PDPDriftDetector"]
