"""What ``torchstream run`` watches besides its explainers: the drift detectors of ``--detect``
and the drift report of ``--report``, assembled into the runner's plug-in list."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field

from torchstream.cli.detectors import RUN_DETECTORS, Detector, make_detectors, parse_names
from torchstream.drift.pdp import PDPDriftDetector
from torchstream.explain.interaction import IncrementalInteraction
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.report.reporter import DriftReporter, OnReport
from torchstream.streams.base import Stream

__all__ = ["Monitors", "make_monitors"]


@dataclass
class Monitors:
    """The runner's plug-ins in order (explainers, detectors, the reporter), the detectors,
    the reporter (None without ``--report``) and the lines that state what was decided."""

    plugins: list[object]
    detectors: list[Detector] = field(default_factory=list)
    reporter: DriftReporter | None = None
    lines: list[str] = field(default_factory=list)


def make_monitors(args: argparse.Namespace, stream: Stream,
                  explainers: Sequence[IncrementalPFI | IncrementalSAGE | IncrementalPDP
                                       | IncrementalInteraction],
                  on_report: OnReport | None = None) -> Monitors:
    """The plug-ins of ``--detect`` and ``--report`` around ``explainers``. The report
    compares the importance of iPFI and iSAGE (without them, the SAGE values of
    ``interactions``) and the pairs of ``interactions``; ``on_report`` is called with each
    report as it is built."""
    names = parse_names(args.detect, RUN_DETECTORS, "--detect")
    pdps = [p for p in explainers if isinstance(p, IncrementalPDP)]
    lines: list[str] = []
    detectors = make_detectors(names, stream, pdps)
    watched = [d for d in detectors if isinstance(d, PDPDriftDetector)]
    owned = {id(d.explainer) for d in watched}
    # a PDP detector runs its iPDP: the iPDP itself is not run again
    plugins: list[object] = [p for p in explainers if id(p) not in owned]
    plugins += detectors
    if "erics" in names:
        lines.append("erics: a Probit head on the inputs standardised with running statistics, "
                     "a partial test per feature")
    if "cdleeds" in names:
        lines.append("cdleeds: neighbourhoods of the inputs standardised with running "
                     "statistics, the model's outputs against an EWMA baseline input, the tests "
                     "restarted after each alarm")
    reporter = None
    if args.report:
        scored: list[IncrementalPFI | IncrementalSAGE | IncrementalInteraction] = [
            p for p in explainers if isinstance(p, (IncrementalPFI, IncrementalSAGE))]
        pairs = [p for p in explainers if isinstance(p, IncrementalInteraction)]
        if not scored and pairs:
            scored = list(pairs)
            lines.append("report: the importance compared is the SAGE values the interactions "
                         "estimate (no ipfi or isage in --explain)")
        if not scored:
            raise ValueError("--report needs ipfi, isage or interactions in --explain (the "
                             "importance it compares)")
        known = sorted(set(stream.drift_positions) | set(args.report_at))
        if not detectors and not known:
            lines.append("report: no --detect, no --report-at and no known drift in this "
                         "stream: the report will be empty")
        reporter = DriftReporter(scored, at=args.report_at, window=args.report_window,
                                 settle=args.report_settle, pdps=pdps, interactions=pairs,
                                 on_report=on_report)
        how = "" if args.report_window else " (2 / --explain-alpha)"
        settle = "" if args.report_settle is not None else " (one window)"
        lines.append(f"report: {reporter.window:,} rows on each side of an alarm{how}, the "
                     f"after window starting {reporter.settle:,} rows after it{settle}; at "
                     + ", ".join(["known drifts"] * bool(known)
                                 + [f"alarms of {', '.join(names)}"] * bool(names))
                     + ("; it also names the pairs that gained or lost interaction" if pairs
                        else ""))
        plugins.append(reporter)
    return Monitors(plugins, detectors, reporter, lines)
