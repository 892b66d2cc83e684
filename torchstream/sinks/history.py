"""In-memory sink: keeps the logged scalars (the last points of each tag), for notebooks and
tests; :func:`torchstream.viz.history.plot_history` draws them."""

from __future__ import annotations

import copy
import operator
import warnings
from array import array
from collections.abc import Mapping
from typing import Any

import pandas as pd
import torch

from torchstream.base import SinkBase
from torchstream.sinks.base import as_scalar

__all__ = ["DEFAULT_MAX_POINTS", "History"]

#: Points kept per tag (16 bytes each): the last ten thousand logged steps.
DEFAULT_MAX_POINTS = 10_000


class History(SinkBase):
    """A sink (:class:`~torchstream.base.SinkBase`) that keeps the logged scalars in memory.

    ``config`` holds a deep copy of the logged configuration and ``series`` maps each tag to its
    ``(step, value)`` pairs in logging order: the last ``max_points`` of each tag (default
    :data:`DEFAULT_MAX_POINTS`), so memory and checkpoints stay bounded on long runs; older
    points are dropped, counted in :attr:`dropped`, with a warning the first time. Values are
    stored as floats, non-finite ones included; a non-numeric value raises ``TypeError`` naming
    its tag (and nothing of that step is stored). A run's step records arrive through
    :meth:`~torchstream.base.SinkBase.log_step`, which hands their values to :meth:`log_scalars`;
    :func:`torchstream.viz.history.plot_history` draws the series.

    >>> history = History()
    >>> history.log_config({"model": {"hidden": [64]}})
    >>> history.log_scalars(0, {"metrics/accuracy/cumulative": 1.0, "loss": 0.5})
    >>> history.log_scalars(10, {"metrics/accuracy/cumulative": 0.75, "loss": 0.25})
    >>> history.values("metrics/accuracy/cumulative")
    [1.0, 0.75]
    >>> history.steps("loss")
    [0, 10]
    >>> history.last()
    {'metrics/accuracy/cumulative': 0.75, 'loss': 0.25}
    """

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS) -> None:
        if not isinstance(max_points, int) or isinstance(max_points, bool) or max_points < 1:
            raise ValueError(f"max_points must be an integer >= 1, got {max_points!r}")
        self.max_points = max_points
        self.config: dict[str, Any] = {}
        self._series: dict[str, _Ring] = {}
        self._warned = False

    @property
    def series(self) -> dict[str, list[tuple[int, float]]]:
        """``{tag: [(step, value), ...]}``: the points kept, in logging order (a copy)."""
        return {tag: ring.pairs() for tag, ring in self._series.items()}

    @property
    def dropped(self) -> dict[str, int]:
        """Points dropped per tag (only tags that dropped some)."""
        return {tag: ring.dropped for tag, ring in self._series.items() if ring.dropped}

    # -- Sink -----------------------------------------------------------------------------------

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Store a deep copy of ``config`` as :attr:`config`."""
        self.config = copy.deepcopy(dict(config))

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        """Append ``(step, value)`` to the series of each tag."""
        step = operator.index(step)
        checked = [(tag, as_scalar(tag, value)) for tag, value in scalars.items()]
        for tag, value in checked:
            ring = self._series.get(tag)
            if ring is None:
                ring = self._series[tag] = _Ring(self.max_points)
            ring.append(step, value)
            if ring.dropped and not self._warned:
                self._warned = True
                warnings.warn(f"History keeps the last {self.max_points:,} points of each tag; "
                              f"older points of {tag!r} and other tags are dropped from step "
                              f"{step:,} on (History(max_points=...) keeps more)", stacklevel=2)

    def close(self) -> None:
        """Nothing to release; the data stays available."""

    # -- queries --------------------------------------------------------------------------------

    @property
    def tags(self) -> list[str]:
        """All tags, in order of first appearance."""
        return list(self._series)

    def _get(self, tag: str) -> _Ring:
        try:
            return self._series[tag]
        except KeyError:
            raise KeyError(f"unknown tag {tag!r} (known: {self.tags})") from None

    def steps(self, tag: str) -> list[int]:
        """The logged steps of ``tag`` (the last ``max_points``)."""
        return self._get(tag).ordered(0)

    def values(self, tag: str) -> list[float]:
        """The logged values of ``tag`` (the last ``max_points``)."""
        return self._get(tag).ordered(1)

    def last(self) -> dict[str, float]:
        """The latest value of every tag."""
        return {tag: ring.last() for tag, ring in self._series.items() if len(ring)}

    def to_frame(self) -> pd.DataFrame:
        """A DataFrame indexed by ``step`` (sorted) with one column per tag.

        Steps where a tag was not logged hold NaN; if a tag was logged twice at one step, the
        later value wins.
        """
        columns = {}
        for tag, ring in self._series.items():
            column = pd.Series(ring.ordered(1), index=ring.ordered(0), dtype=float)
            columns[tag] = column[~column.index.duplicated(keep="last")]
        if not columns:
            return pd.DataFrame(index=pd.Index([], dtype="int64", name="step"))
        frame = pd.concat(columns, axis=1).sort_index()
        frame.index.name = "step"
        return frame

    # -- checkpointing --------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """A copy of the configuration and of the kept points (at most ``max_points`` per tag),
        as ``{tag: tensor}`` of steps (int64) and values (float64), for :meth:`load_state_dict`."""
        return {
            "config": copy.deepcopy(self.config),
            "steps": {tag: ring.tensor(0) for tag, ring in self._series.items()},
            "values": {tag: ring.tensor(1) for tag, ring in self._series.items()},
            "dropped": self.dropped,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace the contents by those of a :meth:`state_dict`; logging then continues. With
        a smaller ``max_points`` than the saved one, the oldest points are dropped. (A state with
        ``"series"`` of ``(step, value)`` pairs is read too.)"""
        config = copy.deepcopy(dict(state["config"]))
        if "series" in state:
            pairs = {str(t): list(p) for t, p in state["series"].items()}
            steps = {t: [int(s) for s, _ in p] for t, p in pairs.items()}
            values = {t: [float(v) for _, v in p] for t, p in pairs.items()}
        else:
            steps = {str(t): torch.as_tensor(v).tolist() for t, v in state["steps"].items()}
            values = {str(t): torch.as_tensor(v).tolist() for t, v in state["values"].items()}
        bad = sorted(t for t in set(steps) | set(values)
                     if len(steps.get(t, ())) != len(values.get(t, ())) or t not in steps)
        if bad:
            raise ValueError(f"History state: the steps and values of tags {bad} do not match")
        dropped = state.get("dropped", {})
        self.config, self._series = config, {}
        for tag in steps:
            ring = self._series[tag] = _Ring(self.max_points)
            ring.load(steps[tag], values[tag])
            ring.dropped += int(dropped.get(tag, 0))
        self._warned = any(ring.dropped for ring in self._series.values())


class _Ring:
    """The last ``size`` ``(step, value)`` points of a tag, in two flat arrays used as a ring."""

    __slots__ = ("dropped", "head", "size", "steps", "values")

    def __init__(self, size: int) -> None:
        self.size, self.head, self.dropped = size, 0, 0
        self.steps, self.values = array("q"), array("d")

    def __len__(self) -> int:
        return len(self.steps)

    def append(self, step: int, value: float) -> None:
        if len(self.steps) < self.size:
            self.steps.append(step)
            self.values.append(value)
            return
        self.steps[self.head], self.values[self.head] = step, value
        self.head = (self.head + 1) % self.size
        self.dropped += 1

    def ordered(self, which: int) -> list[Any]:
        data = self.steps if which == 0 else self.values
        return data[self.head:].tolist() + data[:self.head].tolist()

    def tensor(self, which: int) -> torch.Tensor:
        """Steps (``which=0``, int64) or values (float64), oldest first, as a new tensor."""
        data, dtype = (self.steps, torch.int64) if which == 0 else (self.values, torch.float64)
        if not data:
            return torch.zeros(0, dtype=dtype)
        flat = torch.frombuffer(data, dtype=dtype)  # shares the array's memory: copied below
        return torch.cat([flat[self.head:], flat[:self.head]])

    def load(self, steps: list[int], values: list[float]) -> None:
        cut = max(len(steps) - self.size, 0)
        self.steps, self.values = array("q", steps[cut:]), array("d", values[cut:])
        self.head, self.dropped = 0, cut

    def pairs(self) -> list[tuple[int, float]]:
        return list(zip(self.ordered(0), self.ordered(1)))

    def last(self) -> float:
        return self.values[self.head - 1]
