"""Drift detection on explanation streams."""

from torchstream.drift.pdp import PDPDriftDetector

__all__ = ["PDPDriftDetector"]
