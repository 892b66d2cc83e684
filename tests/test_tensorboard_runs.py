"""TensorBoard as runs: one run per explainer feature under one tag per explainer, steps in rows,
alarm series, the explanation figure with the drifts, and run names read back from the event
files."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer
from tensorboard.plugins.custom_scalar.layout_pb2 import Layout

from torchstream import OnlineClassifier, Prequential
from torchstream.base import DriftDetectorBase
from torchstream.explain import IncrementalPFI, IncrementalSAGE
from torchstream.models import MLP
from torchstream.sinks import History, TensorBoardSink
from torchstream.sinks.base import escape_run_name, unescape_run_name
from torchstream.sinks.tensorboard import ExplanationLog
from torchstream.step import StepRecord
from torchstream.streams import agrawal_drift
from torchstream.typing import BatchView
from torchstream.viz.importance import FIGURE_TAG, explanation_figures, plot_explanations

N, DRIFT, BATCH, LOG_EVERY = 400, 200, 8, 5


class AlarmAt(DriftDetectorBase):
    """Alarms on the batches that start at the given stream rows."""

    def __init__(self, starts: tuple[int, ...]) -> None:
        super().__init__()
        self.starts = starts

    def update(self, batch: BatchView) -> None:
        first = self._advance(batch.size, batch.start)
        self._alarm([first + batch.size - 1] if batch.start in self.starts else [])


def _runs(logdir: Path) -> dict[str, EventAccumulator]:
    mux = EventMultiplexer(size_guidance={"scalars": 0, "tensors": 0, "images": 0})
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    return {name: mux.GetAccumulator(name) for name in mux.Runs()}


@pytest.fixture(scope="module")
def explained(tmp_path_factory) -> tuple[Path, list[str], AlarmAt]:
    torch.set_num_threads(1)
    logdir = tmp_path_factory.mktemp("tb")
    stream = agrawal_drift(n_samples=N, position=DRIFT)
    columns = list(stream.schema.columns)
    learner = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(8,)), lr=0.01, scale_inputs=True,
                            seed=0)
    detector = AlarmAt((200, 232))  # alert rows 207 (between logged steps) and 239 (the last
    #                                 row of a logged batch: rows seen 240)
    plugins = [IncrementalPFI(None, "cross_entropy", len(columns), feature_names=columns,
                              alpha=0.05, seed=0),
               IncrementalSAGE(None, "cross_entropy", len(columns), feature_names=columns,
                               alpha=0.05, seed=0),
               detector]
    sink = TensorBoardSink(logdir, run="mlp", figures=explanation_figures, figure_every=160)
    runner = Prequential(learner, stream, batch_size=BATCH, plugins=plugins, sinks=[sink],
                         log_every=LOG_EVERY)
    runner.run()
    runner.close()
    return logdir, columns, detector


LOGGED = list(range(BATCH * LOG_EVERY, N + 1, BATCH * LOG_EVERY))  # rows seen: 40, 80, ..., 400


def test_one_run_per_feature_under_the_explainer_tag(explained):
    logdir, columns, _ = explained
    runs = _runs(logdir)
    # one run per feature (TensorBoard colours by run: a feature has one colour in every
    # explainer's chart), one tag per explainer in it
    expected = {"mlp"} | {f"feature/{c}" for c in columns}
    assert set(runs) == expected and "." not in runs
    for explainer in ("ipfi", "isage"):
        for c in columns:
            acc = runs[f"feature/{c}"]
            assert sorted(acc.Tags()["scalars"]) == ["importance/ipfi", "importance/isage"]
            steps = [e.step for e in acc.Scalars(f"importance/{explainer}")]
            # steps are rows seen; the first batch only fills the explainer's storage
            assert steps == LOGGED and steps[-1] == N
    main = runs["mlp"].Tags()["scalars"]
    assert not any(t.startswith(("ipfi", "isage", "importance")) for t in main)
    assert [e.step for e in runs["mlp"].Scalars("metrics/accuracy/cumulative")] == LOGGED


def test_alarm_and_drift_series_count_up_at_their_rows(explained):
    """One numbering of rows: an alarm at row 207 (as the detector, the command line and the
    report say) is a step up of the count at step 207; the count is also logged at the last
    row of each logged batch. A count, not a spike: TensorBoard's smoothing and its outlier
    scaling (on by default) would hide a lone 1 among zeros."""
    logdir, _, detector = explained
    assert detector.alerts == [207, 239]
    acc = _runs(logdir)["mlp"]
    points = [(e.step, e.value) for e in acc.Scalars("alarms/alarm_at2")]
    assert [s for s, _ in points] == sorted(s for s, _ in points)  # in order of rows
    assert len({s for s, _ in points}) == len(points)  # one value a row
    rises = [s for (s, v), (_, before) in zip(points[1:], points) if v > before]
    assert rises == detector.alerts and points[0][1] == 0.0
    count = dict(points)
    assert [count[s - 1] for s in LOGGED] == [float(sum(a <= s - 1 for a in detector.alerts))
                                              for s in LOGGED]
    drift = [(e.step, e.value) for e in acc.Scalars("drifts/known")]
    assert [s for (s, v), (_, before) in zip(drift[1:], drift) if v > before] == [DRIFT]
    assert drift[0][1] == 0.0 and drift[-1] == (N - 1, 1.0)


def test_figure_and_alarm_table(explained):
    logdir, _, _ = explained
    acc = _runs(logdir)["mlp"]
    # every 160 rows (the first logged step at or past each multiple) and at the end
    assert [e.step for e in acc.Images(FIGURE_TAG)] == [160, 320, 400]
    (*_, last) = acc.Tensors("alarms/text_summary")
    table = last.tensor_proto.string_val[0].decode()
    assert "| known drifts | 200 |" in table and "| alarms of alarm_at2 | 207, 239 |" in table


def test_layout_puts_the_explainers_first(explained):
    logdir, columns, _ = explained
    acc = _runs(logdir)["mlp"]
    layout = Layout.FromString(acc.Tensors("custom_scalars__config__")[-1]
                               .tensor_proto.string_val[0])
    titles = [c.title for c in layout.category]
    assert titles[:3] == ["importance", "alarms", "drifts"] and "metrics" in titles
    charts = {c.title: list(c.multiline.tag) for c in layout.category[0].chart}
    # each explainer's chart draws the markers on the importances' row axis
    markers = ["^drifts/known$", "^alarms/alarm_at2$"]
    assert charts == {"ipfi": ["^importance/ipfi$", *markers],
                      "isage": ["^importance/isage$", *markers]}


@pytest.mark.parametrize("name", ["price/m²", "a%2Fb", "..", ".", ".hidden", "x\\y", "tab\tx",
                                  "with space", "ünï/cödé", "%"])
def test_escape_run_name_is_reversible_and_one_level(name):
    escaped = escape_run_name(name)
    assert unescape_run_name(escaped) == name
    assert "/" not in escaped and "\\" not in escaped and escaped not in (".", "..")
    assert not escaped.startswith(".") and escaped.isprintable()


def test_escape_keeps_distinct_names_distinct_and_rejects_empty():
    names = ["a/b", "a%2Fb", "a_b", "a b", "a%b"]
    assert len({escape_run_name(n) for n in names}) == len(names)
    with pytest.raises(ValueError, match="non-empty"):
        escape_run_name("")


def test_odd_feature_names_become_escaped_runs(tmp_path):
    with TensorBoardSink(tmp_path) as sink:
        for step in (10, 20):
            sink.log_step(StepRecord(step // 10, step - 10, step, True, {"loss": 1.0},
                                     importance={"ipfi": {"price/m²": 0.5, "..": 0.25}}))
    runs = _runs(tmp_path)
    assert set(runs) == {"run", "feature/price%2Fm%C2%B2", "feature/%2E."}
    features = {unescape_run_name(r.split("/", 1)[1]) for r in runs if r != "run"}
    assert features == {"price/m²", ".."}
    acc = runs["feature/price%2Fm%C2%B2"]
    assert [(e.step, e.value) for e in acc.Scalars("importance/ipfi")] == [(10, 0.5), (20, 0.5)]


def test_predictors_are_runs(tmp_path):
    with TensorBoardSink(tmp_path, run="evaluation", predictors=["probit", "nb"]) as sink:
        sink.log_scalars(5, {"metrics/accuracy/probit": 0.75, "metrics/accuracy/nb": 0.5,
                             "alarms/ddm": 0.0})
    runs = _runs(tmp_path)
    assert set(runs) == {"evaluation", "probit", "nb"}
    assert [e.value for e in runs["nb"].Scalars("metrics/accuracy")] == [0.5]
    assert runs["evaluation"].Tags()["scalars"] == ["alarms/ddm"]
    layout = Layout.FromString(runs["evaluation"].Tensors("custom_scalars__config__")[-1]
                               .tensor_proto.string_val[0])
    charts = [(c.title, ch.title, list(ch.multiline.tag)) for c in layout.category
              for ch in c.chart]
    # one chart per metric, matched in every predictor's run; the alarms first
    assert charts == [("alarms", "alarms", ["^alarms/ddm$"]),
                      ("metrics", "accuracy", ["^metrics/accuracy$"])]
    with pytest.raises(ValueError, match="predictor"):
        TensorBoardSink(tmp_path / "x", run="nb", predictors=["nb"])


def test_explanation_figure_draws_features_drifts_and_alarms():
    history = History()
    for step, (a, b) in zip((10, 20, 30), ((0.1, 0.2), (0.3, 0.1), (0.5, 0.0))):
        history.log_scalars(step, {"ipfi/a": a, "ipfi/b": b})
    log = ExplanationLog(history, ("ipfi", "isage"), (15,), {"ddm": (25,)})
    fig = plot_explanations(log)
    (ax,) = fig.axes  # isage has no series yet: one panel
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert list(lines["a"].get_xdata()) == [10, 20, 30]
    assert list(lines["b"].get_ydata()) == [0.2, 0.1, 0.0]
    assert list(lines["known drift"].get_xdata()) == [15, 15]
    assert list(lines["alarm ddm"].get_xdata()) == [25, 25]
    assert ax.get_xlabel() == "rows seen"
    assert explanation_figures(ExplanationLog(History(), ("ipfi",), (), {})) == {}
    with pytest.raises(ValueError, match="no explainer series"):
        plot_explanations(ExplanationLog(History(), ("ipfi",), (), {}))


def test_resume_keeps_the_explanation_record(tmp_path):
    first = TensorBoardSink(tmp_path, figure_every=100)
    first.log_step(StepRecord(0, 0, 40, True, importance={"ipfi": {"a": 0.5}},
                              alerts={"d": (39,)}, alarm_counts={"d": 1}, n_known_drifts=0))
    first.log_step(StepRecord(1, 40, 60, False, alerts={"d": ()}, alarm_counts={"d": 1},
                              known_drifts=(50,), n_known_drifts=1))
    state = first.state_dict()
    first.close()
    second = TensorBoardSink(tmp_path, figure_every=100)
    second.load_state_dict(state)
    assert second.explainers == ("ipfi",)
    second.log_step(StepRecord(2, 60, 80, True, importance={"ipfi": {"a": 0.25}},
                               alerts={"d": ()}, alarm_counts={"d": 1},
                               n_known_drifts=1))  # still one alarm
    second.log_step(StepRecord(3, 80, 91, False, alerts={"d": (90,)}, alarm_counts={"d": 2},
                               n_known_drifts=1))  # the second, at row 90
    log = second.explanation_log()
    second.close()
    assert log.history.series == {"ipfi/a": [(40, 0.5), (80, 0.25)]}
    assert log.drifts == (50,) and dict(log.alarms) == {"d": (39, 90)}
