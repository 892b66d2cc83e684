"""The prequential loop: test -> explain -> learn, over a stream, in batches of B >= 1 rows.

Pseudocode of one run::

    for step, (X, y) in enumerate(stream.batches(B)):
        X = plugin.transform(X, step) for each plug-in that has one
        y_pred = learner(X)                    # test: the model before it sees y
        metrics.update(y, y_pred)
        scalars = plugin.on_batch(Batch(step, start, X, y, y_pred, learner)) for each plug-in
        learner.learn(X, y)                    # learn
        every log_every steps: sinks.log_scalars(step, metrics + scalars + loss)
        every checkpoint_every steps: torch.save(runner.state_dict(), checkpoint_path)

A run can be stopped after any step and resumed from its ``state_dict()`` with identical
results: the state holds the learner, the metrics, the plug-ins and sinks that have state,
the stream position and torch's global random state.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from torchstream.evaluate.metrics import Metric, default_metrics
from torchstream.evaluate.plugins import Batch, plugin_name
from torchstream.streams.base import Stream

__all__ = ["Prequential", "RunResult"]


@dataclass
class RunResult:
    """Summary of a (possibly resumed) run."""

    n_rows: int
    n_steps: int
    seconds: float
    metrics: dict[str, float] = field(default_factory=dict)
    checkpoint: str | None = None

    @property
    def rows_per_second(self) -> float:
        return self.n_rows / self.seconds if self.seconds > 0 else float("nan")

    def table(self) -> str:
        """The summary as an aligned two-column text table."""
        rows = [("rows", f"{self.n_rows:,}"), ("batches", f"{self.n_steps:,}"),
                ("seconds", f"{self.seconds:.2f}"), ("rows / s", f"{self.rows_per_second:,.0f}")]
        rows += [(k, f"{v:.4f}") for k, v in self.metrics.items()]
        w = max(len(k) for k, _ in rows)
        v = max(len(x) for _, x in rows)
        line = "+" + "-" * (w + 2) + "+" + "-" * (v + 2) + "+"
        body = [f"| {k:<{w}} | {x:>{v}} |" for k, x in rows]
        return "\n".join([line, *body, line])


class Prequential:
    """Test-then-train evaluation of an online learner on a stream.

    Parameters
    ----------
    learner
        An :class:`~torchstream.learners.OnlineLearner` (anything with ``__call__(X)`` returning
        probabilities / values and ``learn(X, y)``).
    stream
        A :class:`~torchstream.streams.Stream`.
    batch_size
        Rows per step (B = 1 is the classic per-row protocol).
    metrics
        Metric objects; default: the task's standard metrics, cumulative and over ``window`` rows.
    plugins
        Plug-ins (see :mod:`torchstream.evaluate.plugins`), called in order.
    sinks
        Sinks (:mod:`torchstream.sinks`) receiving the config once and scalars every
        ``log_every`` steps.
    figure_every
        Every this many steps, plug-ins with ``figures()`` send pictures to the sinks with
        ``log_figure`` (None: never).
    progress
        Show a progress bar (tqdm).

    >>> from torchstream.learners import OnlineLearner
    >>> from torchstream.models import MLP
    >>> from torchstream.streams import agrawal_drift
    >>> stream = agrawal_drift(n_samples=2000, position=1000)
    >>> learner = OnlineLearner(lambda d, k: MLP(d, k), lr=0.01, scale_inputs=True, seed=0)
    >>> result = Prequential(learner, stream, batch_size=16).run()
    >>> result.n_rows, result.n_steps, round(result.metrics["accuracy"], 3)
    (2000, 125, 0.692)
    """

    def __init__(
        self,
        learner: Any,
        stream: Stream,
        *,
        batch_size: int = 1,
        metrics: Sequence[Metric] | None = None,
        window: int | None = 1000,
        plugins: Sequence[Any] = (),
        sinks: Sequence[Any] = (),
        log_every: int = 1,
        figure_every: int | None = None,
        progress: bool = False,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if not isinstance(log_every, int) or log_every < 1:
            raise ValueError(f"log_every must be a positive integer, got {log_every!r}")
        task = getattr(learner, "task", stream.task)
        if task != stream.task:
            raise ValueError(f"the learner's task is {task!r} but the stream's is {stream.task!r}")
        self.learner = learner
        self.stream = stream
        self.batch_size = batch_size
        self.metrics = list(metrics) if metrics is not None else default_metrics(stream.task, window)
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"metric names must be unique, got {names}")
        self.plugins = list(plugins)
        self.plugin_names = [plugin_name(p, i) for i, p in enumerate(self.plugins)]
        self.sinks = list(sinks)
        self.log_every = log_every
        if figure_every is not None and (not isinstance(figure_every, int) or figure_every < 1):
            raise ValueError(f"figure_every must be a positive integer or None, got {figure_every!r}")
        self.figure_every = figure_every
        self.progress = progress
        self.config = dict(config or {})
        self.position = 0  # rows consumed
        self.step = 0  # batches done
        self.seconds = 0.0
        self._config_logged = False
        if stream.task == "classification" and stream.classes and hasattr(learner, "classes_"):
            _align_classes(learner, stream)

    # ------------------------------------------------------------------ the loop
    def run(
        self,
        steps: int | None = None,
        *,
        checkpoint_every: int | None = None,
        checkpoint_path: str | os.PathLike[str] | None = None,
    ) -> RunResult:
        """Run ``steps`` more batches (default: to the end of the stream)."""
        if checkpoint_every is not None and checkpoint_path is None:
            raise ValueError("checkpoint_every needs a checkpoint_path")
        if steps is None and self.stream.n_samples is None:
            raise ValueError(f"stream {self.stream.name!r} is infinite: pass steps=")
        if self.stream.n_samples == 0:
            raise ValueError(f"stream {self.stream.name!r} is empty")
        if not self._config_logged:
            for sink in self.sinks:
                sink.log_config(self.run_config())
            self._config_logged = True
        stop = None if steps is None else self.position + steps * self.batch_size
        batches = self.stream.batches(
            self.batch_size, device=getattr(self.learner, "device", None),
            dtype=getattr(self.learner, "dtype", torch.float32), start=self.position, stop=stop,
        )
        total = steps if steps is not None else self.stream.n_batches(self.batch_size, self.position)
        bar = _progress(total, self.progress, self.stream.name)
        t0 = time.perf_counter()
        first_step = self.step
        saved: str | None = None
        try:
            for X, y in batches:
                scalars = self._one_step(X, y)
                if scalars is not None:
                    for sink in self.sinks:
                        sink.log_scalars(self.step - 1, scalars)
                if self.figure_every and self.step % self.figure_every == 0:
                    self._log_figures()
                if bar is not None:
                    bar.update(1)
                if checkpoint_every and self.step % checkpoint_every == 0:
                    self.seconds += time.perf_counter() - t0
                    t0 = time.perf_counter()
                    saved = self.save(checkpoint_path)  # type: ignore[arg-type]
        finally:
            if bar is not None:
                bar.close()
            self.seconds += time.perf_counter() - t0
            for sink in self.sinks:
                flush = getattr(sink, "flush", None)
                if flush is not None:
                    flush()
        if self.step == first_step and self.position == 0:
            raise ValueError(f"stream {self.stream.name!r} yielded no rows")
        return RunResult(self.position, self.step, self.seconds, self.results(), saved)

    def _one_step(self, X: torch.Tensor, y: torch.Tensor) -> dict[str, float] | None:
        step, start = self.step, self.position
        for p in self.plugins:
            transform = getattr(p, "transform", None)
            if transform is not None:
                X = transform(X, step)
        with torch.no_grad():
            y_pred = self.learner(X)
        for m in self.metrics:
            m.update(y, y_pred)
        extra: dict[str, float] = {}
        if self.plugins:
            batch = Batch(step, start, X, y, y_pred, self.learner)
            for name, p in zip(self.plugin_names, self.plugins):
                out = p.on_batch(batch)
                if out:
                    extra.update({(k if "/" in k else f"{name}/{k}"): v for k, v in out.items()})
        loss = self.learner.learn(X, y)
        self.step += 1
        self.position += X.shape[0]
        if not self.sinks or self.step % self.log_every:
            return None
        scalars = self._metric_scalars()
        scalars["learner/loss"] = float(loss)
        scalars.update(extra)
        return scalars

    def _log_figures(self) -> None:
        sinks = [s for s in self.sinks if hasattr(s, "log_figure")]
        for p in self.plugins:
            figures = getattr(p, "figures", None)
            if figures is None:
                continue
            for tag, fig in figures().items():
                for sink in sinks:
                    sink.log_figure(tag, fig, self.step - 1)
                _close_figure(fig)

    def _metric_scalars(self) -> dict[str, float]:
        out = {}
        for m in self.metrics:
            kind = "cumulative" if m.window is None else "window"
            out[f"metrics/{m.base_name}/{kind}"] = m.get()
        return out

    def results(self) -> dict[str, float]:
        """Current value of every metric, by metric name."""
        return {m.name: m.get() for m in self.metrics}

    def run_config(self) -> dict[str, Any]:
        """The configuration logged to the sinks (hparams)."""
        learner = self.learner
        cfg: dict[str, Any] = {
            "stream": {"name": self.stream.name, "task": self.stream.task,
                       "n_samples": self.stream.n_samples, "n_features": self.stream.n_features,
                       "drift_positions": list(self.stream.drift_positions)},
            "learner": {"class": type(learner).__name__,
                        "module": type(getattr(learner, "module", None)).__name__,
                        "optimizer": str(getattr(learner, "optimizer_name", "")),
                        "lr": getattr(learner, "lr", float("nan")),
                        "device": str(getattr(learner, "device", "cpu"))},
            "batch_size": self.batch_size,
            "plugins": ", ".join(self.plugin_names) or "none",
        }
        cfg.update(self.config)
        return cfg

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The whole run: learner, metrics, plug-ins and sinks with state, position, RNG."""
        return {
            "position": self.position,
            "step": self.step,
            "seconds": self.seconds,
            "batch_size": self.batch_size,
            "learner": self.learner.state_dict(),
            "metrics": {m.name: m.state_dict() for m in self.metrics},
            "plugins": _states(self.plugin_names, self.plugins),
            "sinks": _states([str(i) for i in range(len(self.sinks))], self.sinks),
            "torch_rng": torch.get_rng_state(),
            "config_logged": self._config_logged,
            "stream_classes": list(self.stream.classes or []),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state["batch_size"] != self.batch_size:
            raise ValueError(
                f"checkpoint has batch_size={state['batch_size']}, this run {self.batch_size}"
            )
        missing = [m.name for m in self.metrics if m.name not in state["metrics"]]
        if missing:
            raise ValueError(f"checkpoint has no state for metrics {missing}")
        self.position, self.step, self.seconds = state["position"], state["step"], state["seconds"]
        self.learner.load_state_dict(state["learner"])
        for m in self.metrics:
            m.load_state_dict(state["metrics"][m.name])
        _load_states(state["plugins"], self.plugin_names, self.plugins)
        _load_states(state["sinks"], [str(i) for i in range(len(self.sinks))], self.sinks)
        torch.set_rng_state(state["torch_rng"])
        self._config_logged = state["config_logged"]
        if self.stream.classes is not None:
            for c in state["stream_classes"]:
                self.stream._register(c)  # no-op for known labels

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write :meth:`state_dict` with ``torch.save`` (atomically) and return the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        torch.save(self.state_dict(), tmp)
        os.replace(tmp, path)
        return str(path)

    def resume(self, path: str | os.PathLike[str]) -> None:
        """Load a checkpoint written by :meth:`save`."""
        self.load_state_dict(torch.load(path, weights_only=False))

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


def _close_figure(fig: Any) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


def _align_classes(learner: Any, stream: Stream) -> None:
    """Give a fresh learner the stream's classes, so class indices mean the same in both."""
    assert stream.classes is not None
    have = list(learner.classes_)
    if have == list(stream.classes[: len(have)]):
        for c in stream.classes[len(have):]:
            learner._add_class(c)
        if hasattr(learner, "_grow_if_needed"):
            learner._grow_if_needed()
    else:
        raise ValueError(
            f"the learner's classes {have!r} do not match the stream's {stream.classes!r}"
        )


def _states(names: Iterable[str], objs: Iterable[Any]) -> dict[str, Any]:
    return {n: o.state_dict() for n, o in zip(names, objs) if hasattr(o, "state_dict")}


def _load_states(states: Mapping[str, Any], names: Iterable[str], objs: Iterable[Any]) -> None:
    for n, o in zip(names, objs):
        if hasattr(o, "load_state_dict"):
            if n not in states:
                raise ValueError(f"checkpoint has no state for {n!r}")
            o.load_state_dict(states[n])


def _progress(total: int | None, enabled: bool, name: str) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=name, unit="batch", leave=False,
                mininterval=0.5 if total is None or total < math.inf else 1.0)
