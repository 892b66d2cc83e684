"""What ``torchstream run`` watches besides its explainers: the drift detectors of ``--detect``
and the drift report of ``--report``, assembled into the runner's plug-in list."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from torchstream.cli.detectors import RUN_DETECTORS, Detector, make_detectors, parse_names
from torchstream.drift.pdp import PDPDriftDetector
from torchstream.evaluate.report import DriftReporter
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.streams.base import Stream

__all__ = ["Monitors", "make_monitors"]


@dataclass
class Monitors:
    """The runner's plug-ins in order (explainers, the report's iPDPs, detectors, the
    reporter), the detectors, the reporter (None without ``--report``) and the lines that
    state what was decided."""

    plugins: list[object]
    detectors: list[Detector] = field(default_factory=list)
    reporter: DriftReporter | None = None
    lines: list[str] = field(default_factory=list)


def make_monitors(args: argparse.Namespace, stream: Stream,
                  explainers: Sequence[IncrementalPFI | IncrementalSAGE | IncrementalPDP],
                  groups: Mapping[str, Sequence[int]] | None) -> Monitors:
    """The plug-ins of ``--detect`` and ``--report`` around ``explainers`` (``groups``: the
    features the explainers explain, None for columns)."""
    names = parse_names(args.detect, RUN_DETECTORS, "--detect")
    pdps = [p for p in explainers if isinstance(p, IncrementalPDP)]
    lines: list[str] = []
    report_pdps: list[IncrementalPDP] = []
    if args.report:
        report_pdps = _report_pdps(args, stream, pdps, groups, lines)
    detectors = make_detectors(names, stream, pdps)
    watched = [d for d in detectors if isinstance(d, PDPDriftDetector)]
    owned = {id(d.explainer) for d in watched}
    # a PDP detector runs its iPDP: the iPDP itself is not run again
    plugins: list[object] = [p for p in explainers if id(p) not in owned]
    plugins += report_pdps
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
        scored = [p for p in explainers if isinstance(p, (IncrementalPFI, IncrementalSAGE))]
        if not scored:
            raise ValueError("--report needs ipfi or isage in --explain (the importance it "
                             "compares)")
        known = sorted(set(stream.drift_positions) | set(args.report_at))
        if not detectors and not known:
            lines.append("report: no --detect, no --report-at and no known drift in this "
                         "stream: the report will be empty")
        reporter = DriftReporter(scored, detectors, window=args.report_window,
                                 known_drifts=known,
                                 settle=args.report_settle, pdps=pdps + report_pdps)
        how = "" if args.report_window else " (2 / --explain-alpha)"
        settle = "" if args.report_settle is not None else " (one window)"
        lines.append(f"report: {reporter.window:,} rows on each side of an alarm{how}, the "
                     f"after window starting {reporter.settle:,} rows after it{settle}; at "
                     + ", ".join(["known drifts"] * bool(known)
                                 + [f"alarms of {', '.join(names)}"] * bool(names)))
        plugins.append(reporter)
    return Monitors(plugins, detectors, reporter, lines)


def _report_pdps(args: argparse.Namespace, stream: Stream, have: Sequence[IncrementalPDP],
                 groups: Mapping[str, Sequence[int]] | None, lines: list[str]
                 ) -> list[IncrementalPDP]:
    """An iPDP per feature (of ``groups``, else per column) that has none, at most
    ``--report-pdps`` in all, for the report's curves."""
    columns = list(stream.schema.columns)
    features = list(groups) if groups is not None else columns
    done = {p.feature_name for p in have}
    todo = [f for f in features if f not in done][: max(args.report_pdps - len(done), 0)]
    left = len([f for f in features if f not in done]) - len(todo)
    out = [IncrementalPDP(None, f, feature_names=columns, feature_groups=groups,
                          alpha=args.explain_alpha, seed=args.seed) for f in todo]
    if left:
        lines.append(f"report: iPDP curves of {len(done) + len(todo)} of {len(features)} "
                     f"features (--report-pdps {args.report_pdps}); {left} features have none")
    return out

