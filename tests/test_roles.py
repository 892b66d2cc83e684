"""Every class of a role derives from its base and answers its verbs with one signature (the
table of :mod:`torchstream.base`), found by walking the package; and the runner logs
``alarms/<name>`` for every drift detector of the package, at the rows of its alarms."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch
from river.drift import ADWIN

import torchstream
from torchstream.base import (
    DriftDetectorBase,
    ExplainerBase,
    LearnerBase,
    PluginBase,
    SinkBase,
)
from torchstream.drift import ERICS, ErrorDetector, LabelFreeERICS, PDPDriftDetector
from torchstream.drift.cdleeds import CDLEEDS, LocalChangeMonitor
from torchstream.evaluate import Prequential
from torchstream.explain import IncrementalPDP
from torchstream.models.distributional import ProbitHead
from torchstream.sinks import History
from torchstream.streams import make_synthetic


def _package_classes() -> list[type]:
    """The public classes defined in the package's modules (each once)."""
    out: dict[str, type] = {}
    for info in pkgutil.walk_packages(torchstream.__path__, "torchstream."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and obj.__module__ == info.name
                    and not name.startswith("_")):
                out[f"{info.name}.{name}"] = obj
    return list(out.values())


CLASSES = _package_classes()


def _params(cls: type, verb: str) -> list[str]:
    return [p for p in inspect.signature(getattr(cls, verb)).parameters if p != "self"]


def _in(cls: type, package: str) -> bool:
    return cls.__module__.startswith(package + ".")


def test_the_walk_finds_the_package_classes():
    names = {c.__name__ for c in CLASSES}
    assert {"ERICS", "CDLEEDS", "LocalChangeMonitor", "IncrementalPFI", "TensorBoardSink",
            "History", "Evaluator", "DriftReporter"} <= names and len(CLASSES) > 100


def test_every_drift_detector_derives_from_the_base_and_updates_with_a_batch():
    detectors = [c for c in CLASSES if _in(c, "torchstream.drift") and issubclass(c, PluginBase)]
    assert {c.__name__ for c in detectors} >= {"ERICS", "LabelFreeERICS", "PDPDriftDetector",
                                               "CDLEEDS", "LocalChangeMonitor", "ErrorDetector"}
    for cls in detectors:
        assert issubclass(cls, DriftDetectorBase), cls
    for cls in (c for c in CLASSES
                if issubclass(c, DriftDetectorBase) and c is not DriftDetectorBase):
        assert _params(cls, "update") == ["batch"], cls
        assert "_alarm" not in vars(cls), f"{cls} records alarms its own way"


def test_every_sink_derives_from_the_base():
    sinks = [c for c in CLASSES if callable(getattr(c, "log_scalars", None))
             and not getattr(c, "_is_protocol", False)]
    assert {c.__name__ for c in sinks} >= {"History", "TensorBoardSink"}
    for cls in sinks:
        assert issubclass(cls, SinkBase), cls
        assert _params(cls, "log_scalars") == ["step", "scalars"], cls
        assert _params(cls, "log_config") == ["config"], cls
        assert _params(cls, "log_step") == ["record"], cls


def test_every_explainer_derives_from_the_base():
    explainers = [c for c in CLASSES if _in(c, "torchstream.explain")
                  and callable(getattr(c, "explain", None)) and hasattr(c, "importance")]
    assert {c.__name__ for c in explainers} >= {"IncrementalPFI", "IncrementalSAGE",
                                                "IncrementalPDP", "IncrementalInteraction"}
    for cls in explainers:
        assert issubclass(cls, ExplainerBase), cls
        assert _params(cls, "explain")[0] == "X", cls


def test_every_plugin_takes_one_batch():
    plugins = [c for c in CLASSES if issubclass(c, PluginBase)]
    assert len(plugins) > 10
    for cls in plugins:
        assert _params(cls, "on_batch") == ["batch"], cls
        assert _params(cls, "on_record") == ["record"], cls
        assert _params(cls, "on_end") == [], cls


def test_every_learner_derives_from_the_base():
    learners = [c for c in CLASSES if _in(c, "torchstream.learners")
                and callable(getattr(c, "learn", None)) and callable(c.__call__)
                and "register_classes" in dir(c)]
    assert {c.__name__ for c in learners} >= {"OnlineLearner", "RiverLearner"}
    for cls in learners:
        # OnlineLearner is also a river Estimator (its clone and repr, as river reads them)
        assert issubclass(cls, LearnerBase), cls
        assert _params(cls, "learn")[:2] == ["X", "y"], cls
        assert _params(cls, "__call__")[:1] == ["X"], cls
        assert _params(cls, "register_classes") == ["classes"], cls
        assert _params(cls, "load_state_dict") == ["state"], cls


class _Prior(LearnerBase):
    """Predicts the class frequencies seen so far (a learner without torch modules)."""

    task = "classification"

    def __init__(self) -> None:
        self.counts = torch.ones(2)

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        return (self.counts / self.counts.sum()).expand(X.shape[0], 2)

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        self.counts += torch.bincount(y.long(), minlength=2)


class _Every:
    """A river-style change detector that fires at every ``k``-th update."""

    def __init__(self, k: int) -> None:
        self.k, self.n, self.drift_detected = k, 0, False

    def update(self, x: float) -> None:
        self.n += 1
        self.drift_detected = self.n % self.k == 0


def _detectors(d: int) -> dict[str, DriftDetectorBase]:
    return {
        "error": ErrorDetector(_Every(700), name="error"),
        "adwin": ErrorDetector(ADWIN(), name="adwin"),
        "erics": ERICS(ProbitHead(d), window_mvg_average=3, window_drift_detect=3,
                       warm_up=0, refractory=0),
        "label_free": LabelFreeERICS(d, window_mvg_average=3, window_drift_detect=3),
        "pdp": PDPDriftDetector(IncrementalPDP(None, 0, alpha=0.05, grid_size=5), _Every(20)),
        "cdleeds": CDLEEDS(max_depth=2),
        "monitor": LocalChangeMonitor(CDLEEDS(max_depth=2), monitored=5, name="monitor"),
    }


@pytest.mark.parametrize("key", list(_detectors(9)))
def test_the_runner_logs_the_alarms_of_every_detector(key):
    stream = make_synthetic("sea-drift", n_samples=2000, seed=1)  # inputs in [0, 10]
    det = _detectors(stream.n_features)[key]
    name = det.name if isinstance(getattr(det, "name", None), str) else None
    history = History()
    runner = Prequential(_Prior(), stream, batch_size=10, plugins=[det], sinks=[history],
                         log_every=7)
    runner.run()
    tag = f"alarms/{runner.plugin_names[0]}"
    assert name is None or runner.plugin_names[0] == name
    points = list(zip(history.steps(tag), history.values(tag)))
    rises = [s for (s, v), (_, before) in zip(points[1:], points) if v > before]
    rises = ([points[0][0]] if points[0][1] > 0 else []) + rises
    assert rises == det.alerts  # a step up at each alarm's row, and nowhere else
    assert points[-1][1] == len(det.alerts)
    if key in ("error", "pdp"):  # these fire by construction
        assert det.alerts
