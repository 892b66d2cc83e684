"""The evaluation loop: one loop for every strategy, predictor count and plug-in.

Pseudocode of one run (``k`` instances of each predictor; ``k = 1`` except for k-fold)::

    pre-train every instance once on the first n_pretrain rows (not evaluated)
    for step, (X, y) in enumerate(stream.batches(B)):          # after pre-training
        X = plugin.transform(X, step) for each plug-in (default: X)   # e.g. feature masks
        plan = strategy.plan(step, X, y)                         # test rows, testers, weights
        for every predictor p, instance i with plan.testers[i]:
            y_pred = p_i(plan.test_X); metrics[p, i].update(plan.test_y, y_pred)   # test
        scalars = plugin.on_batch(Batch(step, start, X, y, y_pred of predictor 0, ...))
        alarms[d] = d.new_alerts for each drift detector d            # rows
        record = StepRecord(step, rows, alarms, partial alarms, regions, known drifts
                            passed, and every log_every steps: metrics, explainers'
                            importance, scalars)
        plugin.on_record(record) for each plug-in                 # e.g. the drift report
        X_t, y_t, w_t = label_delay(X, y, plan.train_weights)    # the rows whose label arrived
        for every predictor p, instance i: p_i.learn(rows of X_t repeated w_t[:, i] times)
        record.loss = the first predictor's training loss (a logged step)
        sink.log_step(record) for each sink
    plugin.on_end() for each plug-in, when the stream's end is reached

Test before train at every step: a row's prediction never depends on its own label. The plug-in
transforms apply to the test rows *and* the training rows of the batch (a feature mask that
a learner is trained with is also the one it is tested with). A holdout set is taken from the
transformed rows. Steps without a test record NaN, so every per-step series has one entry per
step. A run can be stopped after any step and resumed from its ``state_dict()`` with identical
results.

The sinks' step is the number of stream rows seen after the batch (:attr:`Evaluator.position`,
pre-training included), so a drift at row 5,000 shows at 5,000 whatever the batch size. Rows
are numbered from 0 everywhere (the stream's known drifts, a detector's ``alerts``, the
printed lines, the drift report): a plug-in with ``alerts`` (a drift detector) adds
``alarms/<name>``, the number of its alarms so far, logged at each alarm's row (also between
logged steps) and at the last row of each logged batch, and a stream with known drifts adds
``drifts/known`` the same way: a step up at row 767 is an alarm at row 767 (a count, not a
spike, so that TensorBoard's smoothing and outlier scaling keep it visible). The per-step
records keep the batch index.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
import tracemalloc
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from tqdm.auto import tqdm

from torchstream._version import __version__
from torchstream.base import (
    DriftDetectorBase,
    ExplainerBase,
    Learner,
    LearnerAdapter,
    PluginAdapter,
    PluginBase,
    SinkBase,
    as_learner,
    as_plugin,
    as_sink,
)
from torchstream.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from torchstream.evaluate.book import MetricBook
from torchstream.evaluate.delay import LabelDelay
from torchstream.evaluate.identity import differences, plain_config, settings, stream_identity
from torchstream.evaluate.metrics import Metric, default_metrics
from torchstream.evaluate.plugins import plugin_name
from torchstream.evaluate.records import DEFAULT_MAX_RECORDS, StepRecords
from torchstream.evaluate.result import RunResult
from torchstream.evaluate.strategies import Strategy, get_strategy
from torchstream.step import Batch, StepRecord
from torchstream.streams.base import Stream

__all__ = ["Evaluator"]


class Evaluator:
    """Evaluate one or several online learners on a stream with a strategy.

    Parameters
    ----------
    learners
        One learner, or ``{name: learner}`` to compare several on the same rows. A learner is
        an :class:`~torchstream.learners.OnlineLearner` or anything with ``__call__(X)``
        returning probabilities / values and ``learn(X, y)`` (the
        :class:`~torchstream.base.Learner` contract; river models through
        :class:`~torchstream.learners.RiverLearner`). The logged loss is the learner's
        ``last_loss`` after ``learn``.
    stream
        A :class:`~torchstream.streams.Stream`.
    strategy
        ``"prequential"`` (default), ``"holdout"``, ``"kfold"`` or a strategy object
        (:mod:`torchstream.evaluate.strategies`); ``strategy_args`` are passed to the named one.
    batch_size
        Rows per step.
    n_pretrain
        Rows learned once, before the first step, by every instance (not evaluated; step 0
        starts after them, and ``Batch.start`` counts them: it is the row's index in the stream).
    label_delay
        ``(min, max)`` steps (upper bound exclusive) between testing a row and training on it,
        drawn per row; None: no delay.
    metrics
        Metric objects (copied for every predictor and instance); default: the task's standard
        metrics, cumulative and over ``window`` rows.
    plugins
        Plug-ins (:mod:`torchstream.evaluate.plugins`), called in order; they see the first
        predictor (its first instance). Objects that are not a
        :class:`~torchstream.base.PluginBase` are wrapped once, here
        (:func:`~torchstream.base.as_plugin`).
    sinks
        Receive the config once and scalars every ``log_every`` steps, at the number of rows
        seen (objects that are not a :class:`~torchstream.base.SinkBase` are wrapped once, by
        :func:`~torchstream.base.as_sink`).
    figure_every
        Every this many rows, the plug-ins' figures go to the sinks' ``log_figure`` (at the
        number of rows seen, after the batch that reaches a multiple of it).
    figures
        How a plug-in's figures are drawn: ``figures(plugin) -> {tag: Figure}``, called with
        each plug-in as given (e.g. :func:`torchstream.viz.figures.plugin_figures`, which
        draws the package's plug-ins); None: each plug-in's own ``figures()`` hook (none for a
        :class:`~torchstream.base.PluginBase` that does not define it).
    record_steps
        Keep per-step records (:attr:`RunResult.steps`).
    records_path
        CSV file the per-step records are appended to, one line per record as each step ends
        (e.g. ``<logdir>/steps.csv``); a checkpoint holds only the file's length, and resuming
        truncates the file to it. None: the records stay in memory, the last ``max_records``.
    max_records
        Records kept in memory without ``records_path`` (default 10,000, about 5 MB); older ones
        are dropped, and :attr:`RunResult.records_dropped` counts them.
    seed
        Seed of the label-delay draws. A named ``"kfold"`` strategy without its own ``seed``
        draws with :func:`~torchstream.evaluate.strategies.derived_seed` ``(seed, "kfold")``.
    step_measures
        Per-step measures ``f(y_true, y_pred) -> float`` with a ``name`` (e.g.
        :class:`~torchstream.evaluate.measures.MetricSpec` around any scikit-learn or river
        metric, keyword arguments checked when it is built): computed on every tested step,
        kept in the per-step records, and their mean over the tested steps in the results.
    track_memory
        Record each step's peak memory in the per-step records (``memory_mb``): Python
        allocations traced by ``tracemalloc`` (slow; torch's CPU tensors are not traced) plus,
        on CUDA, the peak of ``torch.cuda.max_memory_allocated``.
    reset_on_drift
        When a plug-in reports ``drift_detected`` (e.g. an
        :class:`~torchstream.drift.ErrorDetector`), reset these predictors (True: all) to their
        state at construction before they learn that step's batch; :attr:`reset_steps` lists
        the steps.
    """

    def __init__(
        self,
        learners: Any,
        stream: Stream,
        *,
        strategy: str | Strategy | None = "prequential",
        strategy_args: Mapping[str, Any] | None = None,
        batch_size: int = 1,
        n_pretrain: int = 0,
        label_delay: tuple[int, int] | None = None,
        metrics: Sequence[Metric] | None = None,
        window: int | None = 1000,
        plugins: Sequence[Any] = (),
        sinks: Sequence[Any] = (),
        log_every: int = 1,
        figure_every: int | None = None,
        figures: Callable[[object], Mapping[str, Figure]] | None = None,
        record_steps: bool = True,
        records_path: str | os.PathLike[str] | None = None,
        max_records: int = DEFAULT_MAX_RECORDS,
        progress: bool = False,
        config: Mapping[str, Any] | None = None,
        seed: int | None = 0,
        reset_on_drift: bool | Sequence[str] = False,
        step_measures: Sequence[Any] = (),
        track_memory: bool = False,
    ) -> None:
        _check_int(batch_size, "batch_size", 1)
        _check_int(log_every, "log_every", 1)
        _check_int(n_pretrain, "n_pretrain", 0)
        if figure_every is not None:
            _check_int(figure_every, "figure_every", 1)
        self.strategy = get_strategy(strategy, run_seed=seed, **dict(strategy_args or {}))
        self.single = not isinstance(learners, Mapping)
        named = {"learner": learners} if self.single else dict(learners)
        if not named:
            raise ValueError("learners is empty: give a learner or {name: learner}")
        for name, given in named.items():
            try:
                learner = named[name] = as_learner(given)
            except TypeError as e:
                raise TypeError(f"learner {name!r}: {e}") from None
            task = learner.task or stream.task
            if task != stream.task:
                raise ValueError(
                    f"learner {name!r} has task {task!r} but the stream's task is {stream.task!r}"
                )
            if stream.task == "classification" and stream.classes:
                learner.register_classes(list(stream.classes))
        self.names = list(named)
        k = self.strategy.n_instances
        #: ``instances[name][i]``: the i-th copy of a predictor (the given object is copy 0),
        #: in the :class:`~torchstream.base.Learner` shape (:func:`~torchstream.base.as_learner`).
        self.instances: dict[str, list[Learner]] = {
            n: [learner] + [copy.deepcopy(learner) for _ in range(k - 1)]
            for n, learner in named.items()
        }
        templates = list(metrics) if metrics is not None else default_metrics(stream.task, window)
        #: Every predictor's and instance's metrics and step measures.
        self.book = MetricBook(self.names, k, templates, step_measures)
        self.stream = stream
        self.batch_size = batch_size
        self.n_pretrain = n_pretrain
        self.label_delay = None if label_delay is None else LabelDelay(*label_delay, seed=seed)
        self.plugins = list(plugins)
        self.plugin_names = [plugin_name(p, i) for i, p in enumerate(self.plugins)]
        #: The plug-ins in the contract's shape (foreign ones wrapped once, here).
        self._plugins: list[PluginBase] = [as_plugin(p) for p in self.plugins]
        #: The names of the plug-ins that are drift detectors (their alarms are logged).
        self._detectors = [n for n, p in zip(self.plugin_names, self._plugins) if _detects(p)]
        #: The plug-ins that are explainers, by name (their step importance is recorded).
        self._explainers = {n: p for n, p in zip(self.plugin_names, self._plugins)
                            if isinstance(p, ExplainerBase)}
        #: Each detector's alarms so far; the stream's known drift rows.
        self._alarms = {name: 0 for name in self._detectors}
        self._known = sorted(int(r) for r in stream.drift_positions)
        self._ended = False  # the plug-ins' on_end was called (the stream's end reached)
        self.sinks = list(sinks)
        #: The sinks in the contract's shape (foreign ones wrapped once, here).
        self._sinks: list[SinkBase] = [as_sink(s) for s in self.sinks]
        self.log_every = log_every
        self.figure_every = figure_every
        if figures is not None and not callable(figures):
            raise TypeError(f"figures must be a function plugin -> {{tag: Figure}}, got "
                            f"{type(figures).__name__}")
        #: The drawing strategy (None: each plug-in's own ``figures()`` hook).
        self.figures = figures
        self.record_steps = record_steps
        self.progress = progress
        self.config = dict(config or {})
        self.position = 0  # rows consumed, pre-training included
        self.step = 0  # evaluation steps done
        self.seconds = 0.0
        #: The per-step records (:class:`~torchstream.evaluate.records.StepRecords`).
        self.records = StepRecords(records_path, max_records=max_records, enabled=record_steps)
        self._config_logged = False
        if reset_on_drift is True:
            reset_on_drift = self.names
        unknown = [n for n in (reset_on_drift or ()) if n not in self.names]
        if unknown:
            raise ValueError(f"reset_on_drift names unknown predictors {unknown}; "
                             f"known: {self.names}")
        self._initial = {n: copy.deepcopy(self.instances[n][0]) for n in (reset_on_drift or ())}
        self.reset_steps: list[int] = []
        self.track_memory = bool(track_memory)
        #: The settings part of :meth:`identity`, read from the objects as they are built.
        self._settings = {
            "protocol": {"batch_size": batch_size, "strategy": repr(self.strategy),
                         "n_pretrain": n_pretrain, "label_delay": repr(self.label_delay),
                         "metrics": list(self.book.metric_names),
                         "step_measures": list(self.book.measure_names)},
            "predictors": {n: settings(_given(self.instances[n][0])) for n in self.names},
            "plugins": {n: settings(p) for n, p in zip(self.plugin_names, self.plugins)},
        }
        self._stream_identity: dict[str, object] | None = None

    # ------------------------------------------------------------------ conveniences
    def add_sink(self, sink: object) -> None:
        """Send the run's logs to ``sink`` too (e.g. a TensorBoard writer made once the run's
        checkpoint has been checked); before the first step or after a resume."""
        self.sinks.append(sink)
        self._sinks.append(as_sink(sink))

    @property
    def learner(self) -> Any:
        """The first predictor (its first instance), as it was given."""
        return _given(self.instances[self.names[0]][0])

    @property
    def metrics(self) -> list[Metric]:
        """The metrics of the first predictor (its first instance)."""
        return self.book.metrics[self.names[0]][0]

    def _device_dtype(self) -> tuple[torch.device | None, torch.dtype]:
        """Where and in which dtype the stream's batches are made for the first predictor."""
        first = self.instances[self.names[0]][0]
        return first.device, first.dtype

    # ------------------------------------------------------------------ the loop
    def run(
        self,
        steps: int | None = None,
        *,
        checkpoint_every: int | None = None,
        checkpoint_path: str | os.PathLike[str] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> RunResult:
        """Run ``steps`` more steps (default: to the end of the stream). ``should_stop`` is
        asked before each step; when it answers True the run ends there, between two steps (a
        state to checkpoint and resume exactly), and ``RunResult.stopped`` is True."""
        if checkpoint_every is not None and checkpoint_path is None:
            raise ValueError("checkpoint_every needs a checkpoint_path")
        n = self.stream.n_samples
        if steps is None and n is None:
            raise ValueError(f"stream {self.stream.name!r} is infinite: pass steps=")
        if n == 0:
            raise ValueError(f"stream {self.stream.name!r} is empty")
        if n is not None and self.n_pretrain >= n:
            raise ValueError(f"n_pretrain={self.n_pretrain} leaves no rows of the "
                             f"{n}-row stream {self.stream.name!r} to evaluate")
        if not self._config_logged:
            for sink in self._sinks:
                sink.log_config(self.run_config())
            self._config_logged = True
        device, dtype = self._device_dtype()
        started_tracing = False
        if self.track_memory and not tracemalloc.is_tracing():
            tracemalloc.start()
            started_tracing = True
        t0 = time.perf_counter()
        if self.position < self.n_pretrain:
            self._pretrain(device, dtype)
        stop = None if steps is None else self.position + steps * self.batch_size
        if n is not None:
            stop = n if stop is None else min(stop, n)
        batches = self.stream.batches(self.batch_size, device=device, dtype=dtype,
                                      start=self.position, stop=stop)
        remaining = self.stream.n_batches(self.batch_size, self.position) if n is not None else None
        total = steps if steps is not None else remaining
        last_step = None if remaining is None else self.step + remaining - 1
        bar = _progress(total, self.progress, self.stream.name)
        first_step = self.step
        saved: str | None = None
        stopped = False
        try:
            for X, y in batches:
                if should_stop is not None and should_stop():
                    stopped = True
                    break
                record = self._one_step(X, y, last=self.step == last_step)
                for sink in self._sinks:
                    sink.log_step(record)
                if self.figure_every and (record.stop // self.figure_every
                                          > record.start // self.figure_every):
                    self._log_figures()
                if bar is not None:
                    bar.update(1)
                if checkpoint_every and self.step % checkpoint_every == 0:
                    self.seconds += time.perf_counter() - t0
                    t0 = time.perf_counter()
                    saved = self.save(checkpoint_path)  # type: ignore[arg-type]
            if not stopped and n is not None and self.position >= n and not self._ended:
                self._ended = True  # the stream's end: e.g. the drift report's last reports
                for p in self._plugins:
                    p.on_end()
        finally:
            if started_tracing:
                tracemalloc.stop()
            if bar is not None:
                bar.close()
            self.seconds += time.perf_counter() - t0
            self.records.flush()
            for sink in self._sinks:
                sink.flush()
        if not stopped and self.step == first_step and self.position <= self.n_pretrain:
            raise ValueError(f"stream {self.stream.name!r} yielded no rows to evaluate")
        path = None if self.records.path is None else str(self.records.path)
        return RunResult(self.position, self.step, self.seconds, self.results(), saved,
                         self.records.rows(), list(self.names), path, self.records.n_dropped,
                         stopped)

    def _pretrain(self, device: Any, dtype: torch.dtype) -> None:
        for X, y in self.stream.batches(self.n_pretrain - self.position, device=device,
                                        dtype=dtype, start=self.position, stop=self.n_pretrain):
            for p in self._plugins:  # a feature mask the learner will be tested with
                X = p.transform(X, -1)
            for name in self.names:
                for learner in self.instances[name]:
                    learner.learn(X, y)
            self.position += X.shape[0]

    def _one_step(self, X: torch.Tensor, y: torch.Tensor, *, last: bool) -> StepRecord:
        if self.track_memory:
            tracemalloc.reset_peak()
            if X.is_cuda:
                torch.cuda.reset_peak_memory_stats(X.device)
        self.records.pending.clear()  # left by a step that failed
        record = self._step(X, y, last=last)
        if self.track_memory and self.record_steps:
            peak = tracemalloc.get_traced_memory()[1]
            if X.is_cuda:
                peak += torch.cuda.max_memory_allocated(X.device)
            for row in self.records.pending:
                row["memory_mb"] = peak / 2**20
        self.records.commit()
        return record

    def _step(self, X: torch.Tensor, y: torch.Tensor, *, last: bool) -> StepRecord:
        step, start = self.step, self.position
        for p in self._plugins:
            X = p.transform(X, step)
        plan = self.strategy.plan(step, X, y, last=last)
        testers = plan.testers.tolist()
        primary_pred: torch.Tensor | None = None
        timings: dict[tuple[str, int], float] = {}
        for name in self.names:
            for i, learner in enumerate(self.instances[name]):
                if not testers[i] or plan.test_X is None:
                    self._record(step, start, name, i, None, None, float("nan"))
                    continue
                t = time.perf_counter()
                with torch.no_grad():
                    y_pred = learner(plan.test_X)
                timings[name, i] = time.perf_counter() - t
                assert plan.test_y is not None  # test rows come with their labels
                measured = self.book.update(name, i, plan.test_y, y_pred)
                self._record(step, start, name, i, plan.test_y, y_pred, timings[name, i],
                             measured)
                if name == self.names[0] and i == 0 and plan.test_X is X:
                    primary_pred = y_pred
        extra: dict[str, float] = {}
        alerts: dict[str, tuple[int, ...]] = {}
        partial: dict[str, tuple[int | str, ...]] = {}
        regions: dict[str, torch.Tensor] = {}
        if self.plugins:
            if primary_pred is None:
                with torch.no_grad():
                    primary_pred = self.learner(X)
            batch = Batch(step, start, X, y, primary_pred, self.learner)
            for pname, p in zip(self.plugin_names, self._plugins):
                out = p.on_batch(batch)
                if out:
                    extra.update({(k if "/" in k else f"{pname}/{k}"): v for k, v in out.items()})
                if pname in self._detectors:
                    alerts[pname] = tuple(p.new_alerts)  # type: ignore[attr-defined]
                    self._alarms[pname] += len(alerts[pname])
                if isinstance(p, DriftDetectorBase):
                    if p.partial:
                        partial[pname] = tuple(p.new_partial_alerts)
                    if p.new_regions is not None:
                        regions[pname] = p.new_regions
        if self._initial and any(p.drift_detected for p in self._plugins):
            for name, initial in self._initial.items():
                self.instances[name] = [copy.deepcopy(initial) for _ in self.instances[name]]
            self.reset_steps.append(step)
        stop = start + X.shape[0]
        known = tuple(r for r in self._known if start <= r < stop)
        logged = bool(self.sinks) and (step + 1) % self.log_every == 0
        metrics: dict[str, float] = {}
        importance: dict[str, dict[str, float]] = {}
        if logged:
            metrics = self.book.scalars()
            for pname, explainer in self._explainers.items():
                values = explainer.step_importance()
                if values:
                    importance[pname] = values
        record = StepRecord(step, start, stop, logged, metrics, None, importance, alerts,
                            dict(self._alarms), known,
                            sum(r < stop for r in self._known) if self._known else None,
                            extra if logged else {}, partial, regions)
        for p in self._plugins:
            p.on_record(record)
        X_t, y_t, w_t = X, y, plan.train_weights
        if self.label_delay is not None:
            X_t, y_t, w_t = self.label_delay.push_and_release(step, X, y, plan.train_weights)
        primary_learned = False  # its loss is read only when logged (no device sync otherwise)
        for name in self.names:
            for i, learner in enumerate(self.instances[name]):
                rows = _repeat_rows(w_t[:, i])
                if rows is None:
                    continue
                primary_learned = primary_learned or (name == self.names[0] and i == 0)
                Xi, yi = (X_t, y_t) if rows is True else (X_t[rows], y_t[rows])
                t = time.perf_counter()
                learner.learn(Xi, yi)
                if self.record_steps:
                    _add_train_time(self.records.pending, name, i, step,
                                    time.perf_counter() - t)
        self.step += 1
        self.position = stop
        if logged and self.single:
            primary = self.instances[self.names[0]][0]
            loss = primary.last_loss if primary_learned else float("nan")
            record = dataclasses.replace(record, loss=loss)
        return record

    def _record(self, step: int, start: int, name: str, instance: int, y: torch.Tensor | None,
                y_pred: torch.Tensor | None, seconds: float,
                measured: Mapping[str, float] | None = None) -> None:
        if not self.record_steps:
            return
        row: dict[str, Any] = {"step": step, "start": start, "predictor": name,
                               "instance": instance, "test_seconds": seconds,
                               "train_seconds": float("nan")}
        row.update(self.book.step_row(name, instance, y, y_pred, measured))
        self.records.add(row)

    def _log_figures(self) -> None:
        for given, p in zip(self.plugins, self._plugins):
            drawn = p.figures() if self.figures is None else self.figures(given)
            for tag, fig in drawn.items():
                for sink in self._sinks:
                    sink.log_figure(tag, fig, self.position)
                _close_figure(fig)

    def results(self) -> dict[str, float]:
        """Current value of every metric: by metric name for one predictor, by
        ``"<predictor>/<metric>"`` for several; k-fold adds the spread over instances
        (:meth:`MetricBook.results <torchstream.evaluate.book.MetricBook.results>`)."""
        return self.book.results({n: _n_parameters(_given(self.instances[n][0]))
                                  for n in self.names})

    def run_config(self) -> dict[str, Any]:
        """The configuration logged to the sinks (hparams)."""
        cfg: dict[str, Any] = {
            "stream": {"name": self.stream.name, "task": self.stream.task,
                       "n_samples": self.stream.n_samples, "n_features": self.stream.n_features,
                       "drift_positions": list(self.stream.drift_positions)},
            "batch_size": self.batch_size,
            "strategy": repr(self.strategy),
            "n_pretrain": self.n_pretrain,
            "label_delay": repr(self.label_delay),
            "plugins": ", ".join(self.plugin_names) or "none",
        }
        for name in self.names:
            learner = _given(self.instances[name][0])
            key = "learner" if self.single else f"learner_{name}"
            cfg[key] = {"class": type(learner).__name__,
                        "module": type(getattr(learner, "module", None)).__name__,
                        "optimizer": str(getattr(learner, "optimizer_name", "")),
                        "lr": getattr(learner, "lr", float("nan")),
                        "device": str(getattr(learner, "device", "cpu"))}
        cfg.update(self.config)
        return cfg

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The whole run: learners, metrics, strategy, delay buffer, plug-ins, sinks, RNG."""
        return {
            "position": self.position,
            "step": self.step,
            "seconds": self.seconds,
            "batch_size": self.batch_size,
            "learner": self.learner.state_dict(),
            "instances": {n: [lr.state_dict() for lr in ls] for n, ls in self.instances.items()},
            **self.book.state_dict(),  # metrics, instance_metrics, step_sums
            "strategy": self.strategy.state_dict(),
            "label_delay": None if self.label_delay is None else self.label_delay.state_dict(),
            "records": self.records.state_dict(),
            "reset_steps": list(self.reset_steps),
            "plugins": _states(self.plugin_names, self._plugins),
            "sinks": _states([str(i) for i in range(len(self.sinks))], self._sinks),
            "torch_rng": torch.get_rng_state(),
            "config_logged": self._config_logged,
            "alarms": dict(self._alarms),
            "ended": self._ended,
            "stream_classes": list(self.stream.classes or []),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state["batch_size"] != self.batch_size:
            raise ValueError(
                f"checkpoint has batch_size={state['batch_size']}, this run {self.batch_size}"
            )
        self.book.check_state(state)
        unknown = [n for n in self.names if n not in state["instances"]]
        if unknown:
            raise ValueError(f"checkpoint has no state for predictors {unknown}")
        self.records.check_state(state["records"])
        self.position, self.step, self.seconds = state["position"], state["step"], state["seconds"]
        for n, ls in self.instances.items():
            for lr, s in zip(ls, state["instances"][n]):
                lr.load_state_dict(s)
        self.book.load_state_dict(state)
        self.strategy.load_state_dict(state["strategy"])
        if self.label_delay is not None:
            self.label_delay.load_state_dict(state["label_delay"])
        self.records.load_state_dict(state["records"])
        self.reset_steps = list(state["reset_steps"])
        _load_states(state["plugins"], self.plugin_names, self._plugins)
        _load_states(state["sinks"], [str(i) for i in range(len(self.sinks))], self._sinks)
        torch.set_rng_state(state["torch_rng"])
        self._config_logged = state["config_logged"]
        self._alarms = {name: int(state["alarms"].get(name, 0)) for name in self._detectors}
        self._ended = bool(state["ended"])
        if self.stream.classes is not None:
            self.stream.register_classes(state["stream_classes"])  # no-op for known labels

    def identity(self) -> dict[str, object]:
        """What identifies this run (:mod:`torchstream.evaluate.identity`): the stream and a
        fingerprint of its first rows, the protocol, every predictor's and plug-in's settings,
        the ``config`` given to the constructor and the package version."""
        if self._stream_identity is None:
            self._stream_identity = stream_identity(self.stream)
        return {"torchstream": __version__, "stream": self._stream_identity, **self._settings,
                "config": plain_config(self.config)}

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write :meth:`state_dict` and :meth:`identity` as a signed checkpoint (atomically;
        :func:`~torchstream.checkpoint.save_checkpoint`) and return the path."""
        return save_checkpoint({"identity": self.identity(), "state": self.state_dict()}, path)

    def read_checkpoint(self, path: str | os.PathLike[str], *, trusted: bool = False,
                        strict: bool = True) -> dict[str, Any]:
        """The state in a checkpoint of this same run, checked and not yet loaded.

        Raises :class:`~torchstream.checkpoint.CheckpointError` (one line per difference) when
        the file is missing, damaged, untrusted (see :func:`~torchstream.checkpoint.
        load_checkpoint`) or was written by a run with another identity; ``strict=False``
        turns the identity differences into a warning.
        """
        saved = load_checkpoint(path, trusted=trusted)
        if set(saved) != {"identity", "state"}:
            raise CheckpointError(f"checkpoint {path} was not written by Evaluator.save")
        diffs = differences(saved["identity"], self.identity())  # type: ignore[arg-type]
        if diffs:
            message = (f"checkpoint {path} belongs to another run; differing keys: "
                       + "; ".join(diffs))
            if strict:
                raise CheckpointError(message)
            warnings.warn(message, stacklevel=2)
        state: dict[str, Any] = saved["state"]  # type: ignore[assignment]
        try:
            self.records.check_state(state["records"])
        except (KeyError, ValueError) as e:
            raise CheckpointError(f"checkpoint {path}: {e}") from None
        return state

    def resume(self, path: str | os.PathLike[str], *, trusted: bool = False,
               strict: bool = True) -> None:
        """Load a checkpoint of this same run written by :meth:`save` (see
        :meth:`read_checkpoint`); nothing is changed when it cannot be loaded."""
        self.load_state_dict(self.read_checkpoint(path, trusted=trusted, strict=strict))

    def close(self) -> None:
        self.records.close()
        for sink in self._sinks:
            sink.close()


def _detects(plugin: PluginBase) -> bool:
    """Whether a plug-in is a drift detector: a :class:`~torchstream.base.DriftDetectorBase`,
    or a foreign plug-in with an ``alerts`` list."""
    return isinstance(plugin, DriftDetectorBase) or (isinstance(plugin, PluginAdapter)
                                                     and plugin.detects)


def _n_parameters(learner: Any) -> int | None:
    """Model complexity: the parameters of a torch learner's module, or a learner's own count
    (``complexity()["params"]``, e.g. the Dynamic Model Tree); None when unknown."""
    module = getattr(learner, "module", None)
    if isinstance(module, torch.nn.Module):
        return sum(p.numel() for p in module.parameters())
    complexity = getattr(learner, "complexity", None)
    if callable(complexity):
        value = complexity()
        if isinstance(value, Mapping) and "params" in value:
            return int(value["params"])
    return None


def _check_int(value: Any, name: str, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _repeat_rows(w: torch.Tensor) -> torch.Tensor | bool | None:
    """Row indices repeating row ``r`` ``w[r]`` times; True for all ones; None for none."""
    if w.numel() == 0 or not bool((w > 0).any()):
        return None
    if bool((w == 1).all()):
        return True
    return torch.repeat_interleave(torch.arange(w.numel(), device=w.device), w)


def _add_train_time(records: list[dict[str, Any]], name: str, instance: int, step: int,
                    seconds: float) -> None:
    for row in reversed(records):
        if row["step"] != step:
            break
        if row["predictor"] == name and row["instance"] == instance:
            row["train_seconds"] = seconds
            return


def _close_figure(fig: Figure) -> None:
    plt.close(fig)


def _given(learner: Learner) -> Any:
    """The learner as the user gave it (unwrapped from a :class:`LearnerAdapter`)."""
    return learner.learner if isinstance(learner, LearnerAdapter) else learner


def _states(names: Iterable[str], objs: Iterable[PluginBase | SinkBase]) -> dict[str, Any]:
    return {n: o.state_dict() for n, o in zip(names, objs)}


def _load_states(states: Mapping[str, Any], names: Iterable[str],
                 objs: Iterable[PluginBase | SinkBase]) -> None:
    for n, o in zip(names, objs):
        if n not in states:
            raise ValueError(f"checkpoint has no state for {n!r}")
        o.load_state_dict(states[n])


def _progress(total: int | None, enabled: bool, name: str) -> Any:
    if not enabled:
        return None
    return tqdm(total=total, desc=name, unit="batch", leave=False,
                mininterval=0.5 if total is None or total < math.inf else 1.0)
