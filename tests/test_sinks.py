"""Sinks: the in-memory History, the TensorBoard event files (read back), plots."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator,
)
from tensorboard.plugins.custom_scalar.layout_pb2 import Layout
from tensorboard.plugins.hparams.api_pb2 import DataType, Status
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

from torchstream.base import SinkBase
from torchstream.sinks import History, Sink, TensorBoardSink
from torchstream.step import StepRecord
from torchstream.viz import plot_history
from torchstream.viz._figure import agg_figure
from torchstream.viz.history import draw_charts
from torchstream.sinks.tensorboard import flatten_config

CUM = "metrics/accuracy/cumulative"
WIN = "metrics/accuracy/window"
CONFIG = {
    "model": {"hidden": [64, 32], "lr": 0.01, "name": "mlp"},
    "seed": 7,
    "shuffle": True,
    "scale": None,
}
STEPS = [
    (0, {CUM: 1.0, "loss": 0.5}),
    (10, {CUM: 0.75, WIN: 0.5, "loss": 0.25}),  # WIN appears later: the layout is rewritten
    (20, {CUM: 0.625, WIN: 0.5, "loss": 0.125}),
]


def _log(sink: Sink, steps=STEPS) -> None:
    for step, scalars in steps:
        sink.log_scalars(step, scalars)


def _read(logdir) -> EventAccumulator:
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def _layout(acc: EventAccumulator) -> Layout:
    events = acc.Tensors("custom_scalars__config__")
    # The custom_scalars plugin shows the latest layout of a run.
    return Layout.FromString(events[-1].tensor_proto.string_val[0])


def _charts(layout: Layout) -> dict[tuple[str, str], list[str]]:
    return {
        (category.title, chart.title): list(chart.multiline.tag)
        for category in layout.category
        for chart in category.chart
    }


# -- History ------------------------------------------------------------------------------------


def test_history_stores_and_returns_values():
    history = History()
    assert isinstance(history, Sink)
    config = {"model": {"hidden": [64]}}
    history.log_config(config)
    config["model"]["hidden"].append(1)
    assert history.config == {"model": {"hidden": [64]}}
    _log(history)
    history.log_scalars(30, {CUM: float("nan"), "loss": torch.tensor(0.0625)})
    assert history.tags == [CUM, "loss", WIN]
    assert history.steps(CUM) == [0, 10, 20, 30]
    assert history.values(CUM)[:3] == [1.0, 0.75, 0.625]
    assert math.isnan(history.values(CUM)[3])
    assert history.values("loss") == [0.5, 0.25, 0.125, 0.0625]
    assert history.steps(WIN) == [10, 20]
    assert history.last()["loss"] == 0.0625
    assert history.series[WIN] == [(10, 0.5), (20, 0.5)]
    with pytest.raises(KeyError, match="nope"):
        history.values("nope")


def test_history_rejects_non_numeric_value_naming_the_tag():
    history = History()
    with pytest.raises(TypeError, match="metrics/bad"):
        history.log_scalars(0, {"loss": 1.0, "metrics/bad": "high"})
    with pytest.raises(TypeError, match="vec"):
        history.log_scalars(0, {"vec": torch.ones(2)})
    assert history.series == {}  # nothing of a rejected step is stored


def test_history_to_frame():
    history = History()
    _log(history)
    frame = history.to_frame()
    assert frame.shape == (3, 3)
    assert list(frame.columns) == [CUM, "loss", WIN]
    assert list(frame.index) == [0, 10, 20] and frame.index.name == "step"
    assert math.isnan(frame.loc[0, WIN]) and frame.loc[20, CUM] == 0.625
    assert History().to_frame().shape == (0, 0)


def test_history_state_dict_round_trip():
    history = History()
    history.log_config(CONFIG)
    _log(history, STEPS[:2])
    state = history.state_dict()
    restored = History()
    restored.load_state_dict(state)
    assert restored.config == history.config and restored.series == history.series
    _log(history, STEPS[2:])
    _log(restored, STEPS[2:])
    assert restored.series == history.series
    assert state["steps"][CUM].tolist() == [0, 10]  # the state is a copy
    assert state["values"][CUM].tolist() == [1.0, 0.75]


def test_history_is_a_sink_fed_by_step_records():
    history = History()
    assert isinstance(history, SinkBase)
    record = StepRecord(2, 20, 30, True, {CUM: 0.5}, loss=0.25, importance={"ipfi": {"age": 0.125}},
                        alerts={"adwin": (24,)}, alarm_counts={"adwin": 3})
    history.log_step(record)
    # the two alarms before this step and the one at row 24: the third; at the last row, still 3
    assert history.series == {
        "alarms/adwin": [(24, 3.0), (29, 3.0)],
        CUM: [(30, 0.5)],
        "learner/loss": [(30, 0.25)],
        "ipfi/age": [(30, 0.125)],
    }


def test_plots(tmp_path):
    history = History()
    _log(history)
    path = tmp_path / "history.png"
    fig = plot_history(history, path=path)
    assert path.stat().st_size > 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [ax.get_title() for ax in fig.axes] == ["metrics/accuracy", "misc/loss"]
    assert [line.get_label() for line in fig.axes[0].lines] == ["cumulative", "window"]
    assert list(fig.axes[0].lines[1].get_xdata()) == [10, 20]
    assert tuple(fig.get_size_inches()) == (8.0, 6.0)  # 2.5 inches a chart and 1 for the margins

    import matplotlib.pyplot as plt

    fig = plot_history(history)
    assert len(fig.axes) == 2 and plt.fignum_exists(fig.number)  # a pyplot figure
    _, ax = plt.subplots()
    assert plot_history(history, tags=[WIN], ax=ax) is ax.figure
    assert [line.get_label() for line in ax.lines] == [WIN]
    assert list(ax.lines[0].get_ydata()) == [0.5, 0.5]
    fig = agg_figure()
    assert [a.get_title() for a in draw_charts(history, fig, ["loss"])] == ["misc/loss"]
    with pytest.raises(KeyError, match="'nope'"):
        plot_history(history, tags=["nope"], path=tmp_path / "none.png")
    plt.close("all")


# -- TensorBoard --------------------------------------------------------------------------------


def test_flatten_config():
    assert flatten_config({"model": {"hidden": [64]}}) == {"model.hidden": "[64]"}
    assert flatten_config(CONFIG) == {
        "model.hidden": "[64, 32]",
        "model.lr": 0.01,
        "model.name": "mlp",
        "seed": 7,
        "shuffle": True,
        "scale": "None",
    }


@pytest.fixture
def written(tmp_path) -> tuple[Path, TensorBoardSink]:
    sink = TensorBoardSink(tmp_path, flush_secs=1)
    assert isinstance(sink, Sink) and sink.logdir == str(tmp_path)
    sink.log_config(CONFIG)
    _log(sink)
    sink.close()
    # the main run is a named directory, so TensorBoard never calls it "."
    assert [p.name for p in tmp_path.iterdir()] == ["run"] and sink.run_dir == str(tmp_path / "run")
    return tmp_path / "run", sink


def test_tensorboard_scalars(written):
    logdir, _ = written
    acc = _read(logdir)
    assert sorted(acc.Tags()["scalars"]) == sorted([CUM, WIN, "loss"])
    expected: dict[str, list[tuple[int, float]]] = {}
    for step, scalars in STEPS:
        for tag, value in scalars.items():
            expected.setdefault(tag, []).append((step, value))
    for tag, pairs in expected.items():
        assert [(e.step, e.value) for e in acc.Scalars(tag)] == pairs


def test_tensorboard_hparams_in_the_run_directory(written):
    logdir, _ = written
    assert [p for p in logdir.iterdir() if p.is_dir()] == []  # no sub-run
    acc = _read(logdir)
    content = acc.PluginTagToContent("hparams")
    assert "_hparams_/experiment" not in content  # no declared metrics: TensorBoard infers them
    start = HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    hparams = start.session_start_info.hparams
    assert set(hparams) == set(flatten_config(CONFIG))
    assert hparams["model.hidden"].string_value == "[64, 32]"
    assert hparams["model.lr"].number_value == 0.01
    assert hparams["model.name"].string_value == "mlp"
    assert hparams["seed"].number_value == 7
    assert hparams["shuffle"].WhichOneof("kind") == "bool_value" and hparams["shuffle"].bool_value
    assert hparams["scale"].string_value == "None"
    end = HParamsPluginData.FromString(content["_hparams_/session_end_info"])
    assert end.session_end_info.status == Status.STATUS_SUCCESS


def test_tensorboard_declared_hparam_metrics(tmp_path):
    with TensorBoardSink(tmp_path, hparam_metrics=(CUM,)) as sink:
        sink.log_config(CONFIG)
        _log(sink)
    content = _read(tmp_path / "run").PluginTagToContent("hparams")
    experiment = HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert [m.name.tag for m in experiment.metric_infos] == [CUM]
    types = {info.name: DataType.Name(info.type) for info in experiment.hparam_infos}
    assert types["shuffle"] == "DATA_TYPE_BOOL" and types["seed"] == "DATA_TYPE_FLOAT64"


def test_tensorboard_custom_scalars_layout(written):
    logdir, _ = written
    acc = _read(logdir)
    assert len(acc.Tensors("custom_scalars__config__")) == 2  # step 0, and when WIN appeared
    charts = _charts(_layout(acc))
    assert list(charts) == [("metrics", "accuracy"), ("misc", "loss")]
    regexes = charts["metrics", "accuracy"]
    assert len(regexes) == 2
    for regex, tag in zip(regexes, [CUM, WIN]):
        assert re.match(regex, tag) and not re.match(regex, tag + "_other")
    assert re.match(charts["misc", "loss"][0], "loss")


def test_tensorboard_layout_as_the_plugin_reads_it(written):
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.context import RequestContext
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.custom_scalar.custom_scalars_plugin import CustomScalarsPlugin

    logdir, _ = written
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(logdir))
    plugin = CustomScalarsPlugin(
        base_plugin.TBContext(logdir=str(logdir), multiplexer=multiplexer, data_provider=provider)
    )
    layout = json.loads(plugin.layout_impl(RequestContext(), ""))
    charts = {
        (category["title"], chart["title"]): chart["multiline"]["tag"]
        for category in layout["category"]
        for chart in category["chart"]
    }
    assert len(charts["metrics", "accuracy"]) == 2


def test_tensorboard_config_text(written):
    logdir, _ = written
    acc = _read(logdir)
    (event,) = acc.Tensors("config/text_summary")
    text = event.tensor_proto.string_val[0].decode()
    assert text.startswith("```json\n") and text.endswith("\n```")
    assert json.loads(text[len("```json\n") : -len("\n```")])["model"]["hidden"] == [64, 32]


def test_tensorboard_resume_keeps_the_full_layout(tmp_path):
    first = TensorBoardSink(tmp_path)
    _log(first, STEPS[:2])
    state = first.state_dict()
    first.close()
    assert state["tags"] == [CUM, "loss", WIN]
    second = TensorBoardSink(tmp_path)
    second.load_state_dict(state)
    second.log_scalars(20, {"loss": 0.125})  # only some tags logged after resuming
    second.close()
    with pytest.raises(RuntimeError, match="closed"):
        second.log_scalars(30, {"loss": 0.0})
    acc = _read(tmp_path / "run")
    # two event files; TensorBoard reads them in name order, and a writer's name ends in a
    # process-wide counter (".9" sorts after ".10"), so the order of the files is not the steps'
    loss = sorted((e.step, e.value) for e in acc.Scalars("loss"))
    assert loss == [(0, 0.5), (10, 0.25), (20, 0.125)]
    assert list(_charts(_layout(acc))) == [("metrics", "accuracy"), ("misc", "loss")]
    assert len(_charts(_layout(acc))["metrics", "accuracy"]) == 2


def test_tensorboard_rejects_non_numeric_value(tmp_path):
    with TensorBoardSink(tmp_path) as sink, pytest.raises(TypeError, match="metrics/bad"):
        sink.log_scalars(0, {"metrics/bad": [1.0]})
