"""Names the command line's options accept, kept apart from the modules that build what they
name so that the argument parser imports none of torch, river or matplotlib."""

from __future__ import annotations

__all__ = ["DETECTORS", "EXPLAINERS", "EXPLAIN_LOSSES", "RUN_DETECTORS"]

#: river detectors of the error signal (``evaluate --detectors``, ``run --detect``).
DETECTORS = ("ddm", "eddm", "hddm_a", "hddm_w", "adwin", "page_hinkley", "kswin")
#: What ``run --detect`` accepts: the river detectors, ``erics``, ``cdleeds`` and ``pdp``.
RUN_DETECTORS = DETECTORS + ("erics", "cdleeds", "pdp")
#: What ``run --explain`` accepts (besides ``none``).
EXPLAINERS = ("ipfi", "isage", "ipdp", "interactions")
#: The losses ``--explain-loss`` offers, and the tasks each fits.
EXPLAIN_LOSSES = {"cross_entropy": "classification", "zero_one": "classification",
                  "mse": "regression", "absolute": "regression"}
