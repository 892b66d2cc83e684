"""TensorBoard sink: scalars, a custom-scalars layout, hparams and the config as text.

Everything goes to one run directory, ``logdir``:

* **Scalars** through ``SummaryWriter.add_scalar`` (stored as float32 by TensorBoard).
* **Custom-scalars layout** (the CUSTOM SCALARS tab): one multiline chart per chart of the tag
  convention of :mod:`torchstream.sinks.base`, e.g. ``metrics/accuracy/cumulative`` and
  ``metrics/accuracy/window`` share the chart ``accuracy`` in category ``metrics``. Each series
  is the exact-match regex of its tag. TensorBoard's custom_scalars plugin reads only the
  *latest* layout summary of a run (the last point of the ``custom_scalars__config__`` tag), so
  the sink writes the complete layout (every tag seen so far) whenever a tag appears that was not
  seen before, and once more at the first step after ``load_state_dict``. Tags are stable after
  the first step, so this is normally written once; the last layout written always covers all
  charts, also across resumed runs (files of one run directory are read in order).
* **Hparams** (the HPARAMS tab) in the run directory itself, not in a sub-run as
  ``SummaryWriter.add_hparams`` does: :meth:`TensorBoardSink.log_config` writes the session start
  info (the flattened config, see :func:`flatten_config`) and :meth:`TensorBoardSink.close`
  writes the session end info (status success), so an interrupted run shows no end status.
  Metric columns are the run's own scalar tags, read at their last value by TensorBoard:

  - with ``hparam_metrics=None`` (the default) no experiment summary is written, and TensorBoard
    derives the experiment from the runs: every hyperparameter of every run, and *every* scalar
    tag as a metric column;
  - with ``hparam_metrics=(tags...)`` an experiment summary is also written that lists only those
    tags as metrics (TensorBoard then uses the experiment summary of one run for the whole
    logdir, so runs compared together should declare the same metrics).

* **Config as text**: ``add_text("config", ...)`` with the config as a JSON code block.
"""

from __future__ import annotations

import json
import numbers
import operator
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torchstream.sinks.base import as_scalar, group_tags

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["TensorBoardSink", "flatten_config"]

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


class TensorBoardSink:
    """A :class:`~torchstream.sinks.base.Sink` writing one TensorBoard run to ``logdir``.

    See the module docstring for what is written where. ``state_dict()`` holds the tags seen so
    far: after ``load_state_dict`` (resuming into the same ``logdir``, where ``SummaryWriter``
    starts a new events file) the first logged step rewrites the complete layout once, so charts
    of tags that are logged only now and then are never dropped from it.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as logdir:
    ...     with TensorBoardSink(logdir) as sink:
    ...         sink.log_config({"model": {"hidden": [64]}, "lr": 0.01})
    ...         sink.log_scalars(0, {"metrics/accuracy/cumulative": 1.0})
    ...         sink.log_scalars(1, {"metrics/accuracy/cumulative": 0.5})
    ...     sink.state_dict()
    {'tags': ['metrics/accuracy/cumulative']}
    """

    def __init__(
        self,
        logdir: str | os.PathLike[str],
        *,
        flush_secs: int = 10,
        hparam_metrics: Sequence[str] | None = None,
    ) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.logdir = os.fspath(logdir)
        if isinstance(hparam_metrics, str):
            hparam_metrics = (hparam_metrics,)
        self.hparam_metrics = None if hparam_metrics is None else tuple(hparam_metrics)
        self._writer = SummaryWriter(log_dir=self.logdir, flush_secs=flush_secs)
        self._tags: list[str] = []
        self._layout_stale = False
        self._session_end: Any = None
        self._closed = False

    # -- Sink -----------------------------------------------------------------------------------

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Write the flattened config as hparams of this run and the config as text."""
        from torch.utils.tensorboard.summary import hparams

        self._check_open()
        flat = flatten_config(config)
        metrics = {tag: 0.0 for tag in self.hparam_metrics or ()}
        experiment, session_start, session_end = hparams(flat, metrics)
        bools = {key for key, value in flat.items() if isinstance(value, bool)}
        session_start = _fix_session_start(session_start, bools)
        file_writer = self._writer.file_writer
        if self.hparam_metrics is not None:
            file_writer.add_summary(_fix_experiment(experiment, bools), 0)
        file_writer.add_summary(session_start, 0)
        self._session_end = session_end
        text = json.dumps(_jsonable(config), indent=2)
        self._writer.add_text("config", f"```json\n{text}\n```", 0)

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        """``add_scalar`` for each tag; the layout is rewritten when a new tag appears."""
        self._check_open()
        step = operator.index(step)
        checked = [(tag, as_scalar(tag, value)) for tag, value in scalars.items()]
        for tag, value in checked:
            if tag not in self._tags:
                self._tags.append(tag)
                self._layout_stale = True
            self._writer.add_scalar(tag, value, step)
        if self._layout_stale:
            self._write_layout(step)

    def log_figure(self, tag: str, figure: Any, step: int) -> None:
        """A matplotlib figure as an image at ``step`` (IMAGES tab; e.g. a PDP over steps).
        The figure is closed afterwards."""
        self._check_open()
        self._writer.add_figure(tag, figure, step, close=True)

    def close(self) -> None:
        """Write the session end info (when a config was logged), flush and close."""
        if self._closed:
            return
        if self._session_end is not None:
            self._writer.file_writer.add_summary(self._session_end, 0)
        self._writer.flush()
        self._writer.close()
        self._closed = True

    def flush(self) -> None:
        """Flush pending events to disk."""
        self._check_open()
        self._writer.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- layout ---------------------------------------------------------------------------------

    def layout(self) -> dict[str, dict[str, list[Any]]]:
        """The custom-scalars layout of the tags seen so far, as ``add_custom_scalars`` takes it:
        ``{category: {chart: ["Multiline", [exact-match regex of each tag]]}}``."""
        return {
            category: {
                chart: ["Multiline", [re.escape(tag) + "$" for tag in tags]]
                for chart, tags in charts.items()
            }
            for category, charts in group_tags(self._tags).items()
        }

    def _write_layout(self, step: int) -> None:
        from torch.utils.tensorboard.summary import custom_scalars

        # Same summary as ``add_custom_scalars``, with a step: that method notes it may be
        # called once per writer, but the plugin simply shows the latest layout of the run.
        self._writer.file_writer.add_summary(custom_scalars(self.layout()), step)
        self._layout_stale = False

    # -- checkpointing --------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The tags seen so far, in order of first appearance."""
        return {"tags": list(self._tags)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the known tags; the next logged step writes the complete layout once."""
        tags = [str(tag) for tag in state["tags"]]
        self._tags = tags + [tag for tag in self._tags if tag not in tags]
        self._layout_stale = bool(self._tags)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"TensorBoardSink({self.logdir!r}) is closed")


def _fix_session_start(summary: Any, bools: set[str]) -> Any:
    """Record bools as bools (``hparams`` stores them as numbers) and set the start time."""
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

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
    from tensorboard.plugins.hparams.api_pb2 import DataType
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    plugin_data = summary.value[0].metadata.plugin_data
    content = HParamsPluginData.FromString(plugin_data.content)
    for info in content.experiment.hparam_infos:
        if info.name in bools:
            info.type = DataType.DATA_TYPE_BOOL
    plugin_data.content = content.SerializeToString()
    return summary
