"""The drift detectors of the command line, by name: river's detectors on the learner's 0/1
errors (``evaluate --detectors``, ``run --detect``), and for ``run --detect`` also ERICS on
a Probit head's parameter distribution (with a partial test per feature), CDLEEDS on the
model's outputs (with the regions that changed) and a change detector on the iPDP's importance
score."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from river import drift

from torchstream.cli.names import DETECTORS, RUN_DETECTORS
from torchstream.drift import ERICS, ErrorDetector
from torchstream.drift.cdleeds import CDLEEDS, LocalChangeMonitor
from torchstream.drift.pdp import PDPDriftDetector
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.models.distributional import ProbitHead
from torchstream.streams.base import Stream

__all__ = ["DETECTORS", "RUN_DETECTORS", "make_detectors", "parse_names", "river_detector"]


Detector = ErrorDetector | ERICS | LocalChangeMonitor | PDPDriftDetector


class RiverDetector(Protocol):
    """river's drift detector protocol."""

    @property
    def drift_detected(self) -> bool: ...

    def update(self, x: float) -> object: ...


def river_detector(name: str) -> RiverDetector:
    """A new river detector by its name in :data:`DETECTORS` (``kswin`` seeded with 0)."""
    makers: dict[str, Callable[[], RiverDetector]] = {
        "ddm": drift.binary.DDM, "eddm": drift.binary.EDDM, "hddm_a": drift.binary.HDDMA,
        "hddm_w": drift.binary.HDDMW, "adwin": drift.ADWIN, "page_hinkley": drift.PageHinkley,
        "kswin": lambda: drift.KSWIN(seed=0),
    }
    if name not in makers:
        raise ValueError(f"unknown detector {name!r}; known: {', '.join(DETECTORS)}")
    return makers[name]()


def parse_names(text: str, known: Sequence[str], flag: str) -> list[str]:
    """The comma-separated names of ``text`` (``none``: no name), each one of ``known`` and
    none twice."""
    names = [] if text.strip() == "none" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"{flag}: unknown {', '.join(map(repr, unknown))}; choose from "
                         f"{', '.join(known)} or none")
    if len(set(names)) != len(names):
        raise ValueError(f"{flag} names a detector twice: {text!r}")
    return names


def make_detectors(names: Sequence[str], stream: Stream,
                   pdps: Sequence[IncrementalPDP]) -> list[Detector]:
    """The detectors ``names`` of :data:`RUN_DETECTORS` for ``stream``.

    ``erics``: ERICS with a Probit head on the inputs standardised with running statistics,
    its partial test per feature (the schema's features; binary classification only);
    ``cdleeds``: CDLEEDS (``reset_on_drift=True``, the global-drift setting) on the model's
    outputs against an EWMA baseline, its neighbourhoods on the inputs standardised with
    running statistics; ``pdp``: river's ADWIN on the importance score of each iPDP in ``pdps``
    (the detector owns its iPDP: the caller runs the detector in the iPDP's place).
    """
    out: list[Detector] = []
    for name in names:
        if name in DETECTORS:
            out.append(ErrorDetector(river_detector(name), name=f"drift_{name}"))
        elif name == "erics":
            classes = getattr(stream, "classes", None)
            if stream.task != "classification" or (classes and len(classes) > 2):
                raise ValueError("--detect erics needs a binary classification stream (its "
                                 "Probit head models P(y = 1)); use an error detector, e.g. "
                                 "adwin")
            groups = stream.schema.feature_groups()
            wide = any(len(cols) > 1 for cols in groups.values())
            out.append(ERICS(ProbitHead(stream.schema.n_columns), partial=True,
                             feature_groups=groups if wide else None, scale_inputs=True))
        elif name == "cdleeds":
            out.append(LocalChangeMonitor(CDLEEDS(reset_on_drift=True), monitored=1,
                                          log_attributions=0, scale_inputs=True))
        elif name == "pdp":
            if not pdps:
                raise ValueError("--detect pdp needs an iPDP: add ipdp to --explain")
            out += [PDPDriftDetector(p) for p in pdps]
        else:
            raise ValueError(f"unknown detector {name!r}; choose from {', '.join(RUN_DETECTORS)}")
    return out
