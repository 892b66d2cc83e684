"""TensorBoard sink: scalars in named runs, a custom-scalars layout, hparams, the config as
text, and (with a drawing function) the explanations over rows with the drifts.

**Runs.** TensorBoard colours and names series by *run* (a directory), not by tag, so the sink
writes several runs under ``logdir`` (names escaped by
:func:`~torchstream.sinks.base.escape_run_name`, one directory level each)::

    <logdir>/<run>                     the main run: metrics, loss, alarms, known drifts,
                                       plug-in scalars, hparams, config and alarm table, figures
    <logdir>/feature/<feature>         tag importance/<explainer>: one run per feature
    <logdir>/<predictor>               the metrics of one predictor, tag <category>/<chart>

* the importance of each explainer of a step record
  (:attr:`~torchstream.step.StepRecord.importance`, :meth:`TensorBoardSink.log_step`) goes,
  feature by feature, to the run ``feature/<feature>`` under the tag ``importance/<explainer>``,
  so the Scalars tab shows one chart per explainer with one named line per feature on a shared
  y-axis, and a feature has the same colour in every explainer's chart (TensorBoard colours by
  run);
* a tag ``"<category>/<chart>/<predictor>"`` of a predictor named in ``predictors`` goes to the
  run ``<predictor>`` as ``"<category>/<chart>"``: the predictors overlay in one chart;
* ``alarms/<detector>`` and ``drifts/known`` (the number of alarms / known drifts so far: a
  step up at each one's row) and every other tag stay in the main run; in the custom-scalars layout each explainer's chart also
  draws them, on the same row axis as the importances.

Steps are what the caller gives: the runner gives the number of stream rows seen.

* **Custom-scalars layout** (the CUSTOM SCALARS tab), categories in this order: ``importance``
  (one multiline chart per explainer, matching ``^importance/<explainer>$`` in all its feature
  runs, and every ``alarms/`` and ``drifts/`` tag), ``alarms``, ``drifts``, then one multiline chart per chart of the tag convention of
  :mod:`torchstream.sinks.base` (e.g. ``metrics/accuracy/cumulative`` and
  ``metrics/accuracy/window`` share the chart ``accuracy`` in category ``metrics``). Each series
  is the exact-match regex of its tag. The plugin reads only the *latest* layout of a run, so
  the complete layout (every tag seen so far) is written to the main run whenever a tag appears
  that was not seen before, and once more at the first step after ``load_state_dict``.
* **Hparams** (the HPARAMS tab) in the main run itself, not in a sub-run as
  ``SummaryWriter.add_hparams`` does: :meth:`TensorBoardSink.log_config` writes the session start
  info (the flattened config, see :func:`flatten_config`) and :meth:`TensorBoardSink.close`
  writes the session end info (status success), so an interrupted run shows no end status.
  Metric columns are the main run's scalar tags, read at their last value by TensorBoard:

  - with ``hparam_metrics=None`` (the default) no experiment summary is written, and TensorBoard
    derives the experiment from the runs: every hyperparameter of every run, and *every* scalar
    tag as a metric column;
  - with ``hparam_metrics=(tags...)`` an experiment summary is also written that lists only those
    tags as metrics (TensorBoard then uses the experiment summary of one run for the whole
    logdir, so runs compared together should declare the same metrics).

* **Config as text**: ``add_text("config", ...)`` with the config as a JSON code block.
* **Explanations next to the drifts**: the sink keeps what it logged of the explainers (the last
  points of each series, a :class:`~torchstream.sinks.history.History`), the alarm steps and the
  known drifts (those the step records passed). With ``figures`` (e.g.
  :func:`torchstream.viz.importance.explanation_figures`) it sends that record,
  an :class:`ExplanationLog`, to the drawing function every ``figure_every`` steps and at
  :meth:`~TensorBoardSink.close`, and logs the figures it returns (IMAGES tab), together with a
  Markdown table of the known drifts and alarm steps (TEXT tab, tag ``alarms``).
"""

from __future__ import annotations

import json
import numbers
import operator
import os
import re
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from tensorboard.plugins.hparams.api_pb2 import DataType
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import custom_scalars, hparams
from torch.utils.tensorboard.writer import FileWriter

from torchstream.base import SinkBase
from torchstream.sinks.base import as_scalar, chart_of, escape_run_name
from torchstream.sinks.history import History
from torchstream.step import StepRecord

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from typing_extensions import Self

__all__ = ["ExplanationFigures", "ExplanationLog", "TensorBoardSink", "flatten_config"]

HParamValue = bool | int | float | str


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, HParamValue]:
    """Flatten nested mappings with ``"."``-joined keys; values become bool / int / float / str.

    Numbers (numpy scalars included) stay numbers, strings stay strings, anything else (lists,
    ``None``, objects) becomes its ``str``; an empty mapping becomes ``"{}"``.

    >>> flatten_config({"model": {"hidden": [64], "lr": 0.1}, "seed": 0, "scale": None})
    {'model.hidden': '[64]', 'model.lr': 0.1, 'seed': 0, 'scale': 'None'}
    """
    flat: dict[str, HParamValue] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_config(value, prefix=name + "."))
        elif isinstance(value, (bool, str)):
            flat[name] = value
        elif isinstance(value, numbers.Integral):
            flat[name] = int(value)
        elif isinstance(value, numbers.Real):
            flat[name] = float(value)
        elif isinstance(value, Mapping):
            flat[name] = "{}"
        else:
            flat[name] = str(value)
    return flat


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


@dataclass(frozen=True)
class ExplanationLog:
    """What a :class:`TensorBoardSink` logged of a run's explanations and drifts, for a drawing
    function: ``history`` holds the explainer series by their logged tags
    ``"<explainer>/<feature>"`` (steps: rows seen; the last
    :data:`~torchstream.sinks.history.DEFAULT_MAX_POINTS` logged points of each, the event files
    keep all), ``explainers`` names them, ``drifts`` are the stream's known drift rows and
    ``alarms`` the steps at which each detector alarmed."""

    history: History
    explainers: tuple[str, ...]
    drifts: tuple[int, ...]
    alarms: Mapping[str, tuple[int, ...]]

    def features(self, explainer: str) -> list[str]:
        """The features of ``explainer`` with a series, in order of first appearance."""
        prefix = explainer + "/"
        return [t[len(prefix):] for t in self.history.tags if t.startswith(prefix)]


#: ``figures(log) -> {tag: figure}``: what a :class:`TensorBoardSink` draws of its record.
ExplanationFigures = Callable[[ExplanationLog], Mapping[str, "Figure"]]

ALARMS = "alarms"
DRIFTS = "drifts"
IMPORTANCE = "importance"
#: The directory under ``logdir`` holding one run per explained feature.
FEATURE_RUNS = "feature"


class TensorBoardSink(SinkBase):
    """A :class:`~torchstream.sinks.base.Sink` writing the TensorBoard runs of one run to
    ``logdir``: the main run ``<logdir>/<run>``, one run per explainer feature and one per
    predictor (see the module docstring for what is written where).

    ``state_dict()`` holds the tags seen so far and the explanation record: after
    ``load_state_dict`` (resuming into the same ``logdir``, where a new events file starts) the
    first logged step rewrites the complete layout once, so charts of tags that are logged only
    now and then are never dropped from it.

    >>> import tempfile, os
    >>> from torchstream.step import StepRecord
    >>> with tempfile.TemporaryDirectory() as logdir:
    ...     with TensorBoardSink(logdir) as sink:
    ...         sink.log_config({"model": {"hidden": [64]}, "lr": 0.01})
    ...         sink.log_step(StepRecord(0, 0, 10, True, {"metrics/accuracy/cumulative": 1.0},
    ...                                  importance={"ipfi": {"age": 0.5}}))
    ...         sink.log_step(StepRecord(1, 10, 20, True, {"metrics/accuracy/cumulative": 0.5},
    ...                                  importance={"ipfi": {"a/b": 0.1}}))
    ...     sorted(os.listdir(logdir)), sorted(os.listdir(os.path.join(logdir, "feature")))
    (['feature', 'run'], ['a%2Fb', 'age'])
    >>> sink.state_dict()["tags"], sink.explainers
    (['metrics/accuracy/cumulative', 'ipfi/age', 'ipfi/a/b'], ('ipfi',))
    """

    def __init__(
        self,
        logdir: str | os.PathLike[str],
        *,
        run: str = "run",
        predictors: Sequence[str] = (),
        figures: ExplanationFigures | None = None,
        figure_every: int | None = None,
        flush_secs: int = 10,
        hparam_metrics: Sequence[str] | None = None,
    ) -> None:
        self.logdir = os.fspath(logdir)
        #: The main run's name (its directory under :attr:`logdir`, escaped).
        self.run = run
        #: The explainers whose importance was logged (from the step records), in order.
        self.explainers: tuple[str, ...] = ()
        self.predictors = (predictors,) if isinstance(predictors, str) else tuple(predictors)
        if run in self.predictors or run == FEATURE_RUNS:
            raise ValueError(f"the main run {run!r} has the name of a predictor (or of the "
                             f"features' directory {FEATURE_RUNS!r})")
        if FEATURE_RUNS in self.predictors:
            raise ValueError(f"a predictor may not be named {FEATURE_RUNS!r} (the features' "
                             "directory)")
        if figure_every is not None and (isinstance(figure_every, bool)
                                         or operator.index(figure_every) < 1):
            raise ValueError(f"figure_every must be an integer >= 1, got {figure_every!r}")
        self.figures = figures
        self.figure_every = figure_every
        if isinstance(hparam_metrics, str):
            hparam_metrics = (hparam_metrics,)
        self.hparam_metrics = None if hparam_metrics is None else tuple(hparam_metrics)
        self._flush_secs = flush_secs
        self._writers: dict[str, SummaryWriter] = {}
        self._writer = self._run_writer(escape_run_name(run))
        self._tags: list[str] = []
        self._layout_stale = False
        self._session_end: Any = None
        self._closed = False
        self._explained = History()
        self._alarms: dict[str, list[int]] = {}
        self._drifts: tuple[int, ...] = ()
        self._last_step: int | None = None
        self._drawn_at: int | None = None
        self._next_figure = figure_every

    @property
    def run_dir(self) -> str:
        """The main run's directory."""
        return os.path.join(self.logdir, escape_run_name(self.run))

    # -- Sink -----------------------------------------------------------------------------------

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Write the flattened config as hparams of the main run and the config as text."""
        self._check_open()
        flat = flatten_config(config)
        metrics = {tag: 0.0 for tag in self.hparam_metrics or ()}
        experiment, session_start, session_end = hparams(flat, metrics)
        bools = {key for key, value in flat.items() if isinstance(value, bool)}
        session_start = _fix_session_start(session_start, bools)
        file_writer = self._file_writer()
        if self.hparam_metrics is not None:
            file_writer.add_summary(_fix_experiment(experiment, bools), 0)
        file_writer.add_summary(session_start, 0)
        self._session_end = session_end
        text = json.dumps(_jsonable(config), indent=2)
        self._writer.add_text("config", f"```json\n{text}\n```", 0)

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        """``add_scalar`` for each tag, in its run (see the module docstring); the layout is
        rewritten when a new tag appears, the figures drawn every ``figure_every`` steps."""
        self._check_open()
        step = operator.index(step)
        checked = [(tag, as_scalar(tag, value)) for tag, value in scalars.items()]
        explained: dict[str, float] = {}
        for tag, value in checked:
            if tag not in self._tags:
                self._tags.append(tag)
                self._layout_stale = True
            run, routed = self.route(tag)
            self._run_writer(run).add_scalar(routed, value, step)
            if run != escape_run_name(self.run) and routed.startswith(IMPORTANCE + "/"):
                explained[tag] = value
            elif tag.startswith(ALARMS + "/"):  # the count of alarms so far: each rise is one
                alarms = self._alarms.setdefault(tag[len(ALARMS) + 1:], [])
                alarms += [step] * max(0, int(value) - len(alarms))
        if explained:
            with warnings.catch_warnings():  # the record for the figures keeps the last points;
                warnings.simplefilter("ignore")  # the event files keep them all
                self._explained.log_scalars(step, explained)
        if self._layout_stale:
            self._write_layout(step)
        self._last_step = step
        if self._next_figure is not None and step >= self._next_figure:
            assert self.figure_every is not None
            self._next_figure = (step // self.figure_every + 1) * self.figure_every
            self._draw(step)

    def log_step(self, record: StepRecord) -> None:
        """A step record: the alarm and known-drift counts at their rows, then, at a logged
        step, each explainer's importance in the feature runs and the other values in the
        main run (see the module docstring)."""
        for name in record.importance:
            if name in self.predictors or name == self.run:
                raise ValueError(f"explainer {name!r} has the name of a predictor or of the "
                                 "main run")
            if name not in self.explainers:
                self.explainers += (name,)
        self._drifts += tuple(r for r in record.known_drifts if r not in self._drifts)
        super().log_step(record)

    def log_figure(self, tag: str, figure: Figure, step: int) -> None:
        """A matplotlib figure as an image of the main run at ``step`` (IMAGES tab; e.g. a PDP
        over rows). The figure is closed afterwards."""
        self._check_open()
        self._writer.add_figure(tag, figure, step, close=True)

    def log_image(self, tag: str, image: np.ndarray, step: int) -> None:
        """An RGB(A) image ``[H, W, 3 or 4]`` (uint8) in the main run at ``step`` (IMAGES tab;
        e.g. a figure already drawn for a file)."""
        self._check_open()
        self._writer.add_image(tag, image[..., :3], operator.index(step), dataformats="HWC")

    def log_text(self, tag: str, text: str, step: int) -> None:
        """Markdown ``text`` in the main run at ``step`` (TEXT tab; e.g. a drift report at its
        row)."""
        self._check_open()
        self._writer.add_text(tag, text, operator.index(step))

    def close(self) -> None:
        """Draw the figures once more (when anything was logged since they were last drawn),
        write the session end info (when a config was logged), flush and close every run."""
        if self._closed:
            return
        if self._last_step is not None and self._drawn_at != self._last_step:
            self._draw(self._last_step)
        if self._session_end is not None:
            self._file_writer().add_summary(self._session_end, 0)
        for writer in self._writers.values():
            writer.flush()
            writer.close()
        self._closed = True

    def flush(self) -> None:
        """Flush pending events of every run to disk."""
        self._check_open()
        for writer in self._writers.values():
            writer.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- runs and layout ------------------------------------------------------------------------

    def route(self, tag: str) -> tuple[str, str]:
        """``(run directory relative to logdir, tag in that run)`` of a logged tag.

        >>> sink = TensorBoardSink.__new__(TensorBoardSink)
        >>> sink.run, sink.explainers, sink.predictors = "run", ("ipfi",), ("probit",)
        >>> sink.route("ipfi/a/b"), sink.route("metrics/accuracy/probit"), sink.route("loss")
        (('feature/a%2Fb', 'importance/ipfi'), ('probit', 'metrics/accuracy'), ('run', 'loss'))
        """
        head, _, rest = tag.partition("/")
        if head in self.explainers and rest:
            return f"{FEATURE_RUNS}/{escape_run_name(rest)}", f"{IMPORTANCE}/{head}"
        chart, _, last = tag.rpartition("/")
        if last in self.predictors and chart.count("/") >= 1:
            return escape_run_name(last), chart
        return escape_run_name(self.run), tag

    def layout(self) -> dict[str, dict[str, list[Any]]]:
        """The custom-scalars layout of the tags seen so far, as ``add_custom_scalars`` takes it:
        ``{category: {chart: ["Multiline", [exact-match regex of each tag]]}}``, the
        explainers' category first (each chart with the alarm and drift markers), then the
        alarms, the known drifts, then the others."""
        main = escape_run_name(self.run)
        first: list[tuple[str, str, str]] = []  # (category, chart, tag): explainers, markers
        rest: list[tuple[str, str, str]] = []
        markers = [t for t in self._tags if t.startswith((ALARMS + "/", DRIFTS + "/"))]
        for tag in self._tags:
            run, routed = self.route(tag)
            if run != main and routed.startswith(IMPORTANCE + "/"):
                chart = routed.split("/", 1)[1]
                first += [(IMPORTANCE, chart, t) for t in (routed, *markers)]
            elif run != main:  # a predictor's "<category>/<chart>": a chart of its own
                category, chart = routed.split("/", 1)
                rest.append((category, chart, routed))
            else:
                entry = (*chart_of(routed), routed)
                (first if routed in markers else rest).append(entry)
        order = {IMPORTANCE: 0, ALARMS: 1, DRIFTS: 2}
        first.sort(key=lambda entry: order[entry[0]])  # stable: explainers, alarms, drifts
        groups: dict[str, dict[str, list[str]]] = {}
        for category, chart, tag in first + rest:
            series = groups.setdefault(category, {}).setdefault(chart, [])
            if tag not in series:
                series.append(tag)
        return {
            category: {
                chart: ["Multiline", ["^" + re.escape(tag) + "$" for tag in tags]]
                for chart, tags in charts.items()
            }
            for category, charts in groups.items()
        }

    def _run_writer(self, run: str) -> SummaryWriter:
        writer = self._writers.get(run)
        if writer is None:
            writer = SummaryWriter(log_dir=os.path.join(self.logdir, run),
                                   flush_secs=self._flush_secs)
            self._writers[run] = writer
        return writer

    def _file_writer(self) -> FileWriter:
        """The main run's event file writer (raw summaries: hparams, the layout)."""
        file_writer = self._writer.file_writer
        if file_writer is None:  # only after SummaryWriter.close
            raise RuntimeError(f"the TensorBoard writer of {self.run_dir!r} is closed")
        return file_writer

    def _write_layout(self, step: int) -> None:
        # Same summary as ``add_custom_scalars``, with a step: that method notes it may be
        # called once per writer, but the plugin simply shows the latest layout of the run.
        self._file_writer().add_summary(custom_scalars(self.layout()), step)
        self._layout_stale = False

    # -- explanations and drifts ----------------------------------------------------------------

    def explanation_log(self) -> ExplanationLog:
        """A snapshot of what was logged of the explainers, the known drifts and the alarms."""
        history = History(self._explained.max_points)
        history.load_state_dict(self._explained.state_dict())
        return ExplanationLog(history, self.explainers, self._drifts,
                              {d: tuple(s) for d, s in self._alarms.items()})

    def alarm_table(self) -> str:
        """The known drifts and every detector's alarm steps as a Markdown table."""
        lines = ["| what | rows (numbered from 0) |", "| --- | --- |"]
        lines.append(f"| known drifts | {_rows(self._drifts)} |")
        for detector, steps in self._alarms.items():
            lines.append(f"| alarms of {detector} | {_rows(steps)} |")
        return "\n".join(lines)

    def _draw(self, step: int) -> None:
        self._drawn_at = step
        if self._alarms or self._drifts:
            self._writer.add_text(ALARMS, self.alarm_table(), step)
        if self.figures is None:
            return
        for tag, figure in self.figures(self.explanation_log()).items():
            self._writer.add_figure(tag, figure, step, close=True)

    # -- checkpointing --------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The tags seen so far (in order of first appearance) and the explanation record. An
        open sink first flushes its events to disk, so that a checkpoint taken with this state
        never runs ahead of the events files it resumes into."""
        if not self._closed:
            self.flush()
        return {"tags": list(self._tags), "explainers": list(self.explainers),
                "explained": self._explained.state_dict(),
                "alarms": {d: list(s) for d, s in self._alarms.items()},
                "drifts": list(self._drifts), "next_figure": self._next_figure}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the known tags and the record; the next logged step writes the complete
        layout once."""
        self.explainers = tuple(dict.fromkeys([*map(str, state["explainers"]),
                                               *self.explainers]))
        tags = [str(tag) for tag in state["tags"]]
        self._tags = tags + [tag for tag in self._tags if tag not in tags]
        self._layout_stale = bool(self._tags)
        if "explained" in state:
            self._explained.load_state_dict(state["explained"])
            self._alarms = {str(d): [int(s) for s in steps]
                            for d, steps in state["alarms"].items()}
            self._drifts = tuple(int(p) for p in state["drifts"])
            if self.figure_every is not None and state["next_figure"] is not None:
                self._next_figure = int(state["next_figure"])

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"TensorBoardSink({self.logdir!r}) is closed")


def _rows(steps: Sequence[int]) -> str:
    return ", ".join(f"{s:,}" for s in steps) or "none"


def _fix_session_start(summary: Any, bools: set[str]) -> Any:
    """Record bools as bools (``hparams`` stores them as numbers) and set the start time."""
    plugin_data = summary.value[0].metadata.plugin_data
    content = HParamsPluginData.FromString(plugin_data.content)
    info = content.session_start_info
    for key in bools:
        info.hparams[key].bool_value = bool(info.hparams[key].number_value)
    info.start_time_secs = time.time()
    plugin_data.content = content.SerializeToString()
    return summary


def _fix_experiment(summary: Any, bools: set[str]) -> Any:
    """Declare bool hparams as ``DATA_TYPE_BOOL`` in the experiment summary."""
    plugin_data = summary.value[0].metadata.plugin_data
    content = HParamsPluginData.FromString(plugin_data.content)
    for info in content.experiment.hparam_infos:
        if info.name in bools:
            info.type = DataType.DATA_TYPE_BOOL
    plugin_data.content = content.SerializeToString()
    return summary
