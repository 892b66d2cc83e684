"""In-memory sink: keeps every logged scalar, for notebooks, tests and plots."""

from __future__ import annotations

import copy
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torchstream.sinks.base import as_scalar, group_tags

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["History"]


class History:
    """A :class:`~torchstream.sinks.base.Sink` that keeps everything in memory.

    ``config`` holds a deep copy of the logged configuration and ``series`` maps each tag to its
    ``(step, value)`` pairs in logging order. Values are stored as floats, non-finite ones
    included; a non-numeric value raises ``TypeError`` naming its tag (and nothing of that step
    is stored).

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

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}
        self.series: dict[str, list[tuple[int, float]]] = {}

    # -- Sink -----------------------------------------------------------------------------------

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Store a deep copy of ``config`` as :attr:`config`."""
        self.config = copy.deepcopy(dict(config))

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        """Append ``(step, value)`` to the series of each tag."""
        step = operator.index(step)
        checked = [(tag, as_scalar(tag, value)) for tag, value in scalars.items()]
        for tag, value in checked:
            self.series.setdefault(tag, []).append((step, value))

    def close(self) -> None:
        """Nothing to release; the data stays available."""

    # -- queries --------------------------------------------------------------------------------

    @property
    def tags(self) -> list[str]:
        """All tags, in order of first appearance."""
        return list(self.series)

    def _get(self, tag: str) -> list[tuple[int, float]]:
        try:
            return self.series[tag]
        except KeyError:
            raise KeyError(f"unknown tag {tag!r} (known: {self.tags})") from None

    def steps(self, tag: str) -> list[int]:
        """The logged steps of ``tag``."""
        return [step for step, _ in self._get(tag)]

    def values(self, tag: str) -> list[float]:
        """The logged values of ``tag``."""
        return [value for _, value in self._get(tag)]

    def last(self) -> dict[str, float]:
        """The latest value of every tag."""
        return {tag: pairs[-1][1] for tag, pairs in self.series.items() if pairs}

    def to_frame(self) -> pd.DataFrame:
        """A DataFrame indexed by ``step`` (sorted) with one column per tag.

        Steps where a tag was not logged hold NaN; if a tag was logged twice at one step, the
        later value wins.
        """
        import pandas as pd

        columns = {}
        for tag, pairs in self.series.items():
            column = pd.Series(
                [value for _, value in pairs], index=[step for step, _ in pairs], dtype=float
            )
            columns[tag] = column[~column.index.duplicated(keep="last")]
        if not columns:
            return pd.DataFrame(index=pd.Index([], dtype="int64", name="step"))
        frame = pd.concat(columns, axis=1).sort_index()
        frame.index.name = "step"
        return frame

    # -- plots ----------------------------------------------------------------------------------

    def plot(self, tags: Sequence[str] | None = None, ax: Axes | None = None) -> Any:
        """Plot one line per tag against the step.

        With ``ax``, every line goes on that Axes (labelled by the full tag), which is returned.
        Without it, a new pyplot figure gets one subplot per chart (tags grouped as in the
        module :mod:`torchstream.sinks.base`), and the Axes is returned when there is a single
        chart, otherwise a 1-D numpy array of Axes (like ``plt.subplots``). Nothing is shown;
        call ``plt.show()`` or save ``ax.figure``.
        """
        selected = self._select(tags)
        if ax is not None:
            for tag in selected:
                ax.plot(self.steps(tag), self.values(tag), label=tag)
            ax.set_xlabel("step")
            if selected:
                ax.legend()
            return ax
        import matplotlib.pyplot as plt

        groups = _charts(selected)
        fig = plt.figure(figsize=_figsize(len(groups)))
        axes = self.draw_charts(fig, selected)
        return axes[0] if len(axes) == 1 else _array(axes)

    def draw_charts(self, fig: Figure, tags: Sequence[str] | None = None) -> list[Axes]:
        """Draw one subplot per chart on ``fig`` (stacked vertically, shared step axis)."""
        groups = _charts(self._select(tags))
        if not groups:
            return [fig.add_subplot(1, 1, 1)]
        axes = fig.subplots(len(groups), 1, sharex=True, squeeze=False)[:, 0]
        for ax, (title, chart_tags) in zip(axes, groups.items()):
            prefix = title + "/"
            for tag in chart_tags:
                label = tag.removeprefix(prefix)
                ax.plot(self.steps(tag), self.values(tag), label=label)
            ax.set_title(title)
            ax.legend()
        axes[-1].set_xlabel("step")
        fig.tight_layout()
        return list(axes)

    def _select(self, tags: Iterable[str] | None) -> list[str]:
        if tags is None:
            return self.tags
        if isinstance(tags, str):
            tags = [tags]
        selected = list(tags)
        for tag in selected:
            self._get(tag)
        return selected

    # -- checkpointing --------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """A copy of the configuration and all series, for :meth:`load_state_dict`."""
        return {
            "config": copy.deepcopy(self.config),
            "series": {tag: list(pairs) for tag, pairs in self.series.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace the contents by those of a :meth:`state_dict`; logging then continues."""
        self.config = copy.deepcopy(dict(state["config"]))
        self.series = {
            str(tag): [(int(step), float(value)) for step, value in pairs]
            for tag, pairs in state["series"].items()
        }


def _charts(tags: Iterable[str]) -> dict[str, list[str]]:
    """``{"category/chart": [tags]}`` in order of first appearance."""
    return {
        f"{category}/{chart}": chart_tags
        for category, charts in group_tags(tags).items()
        for chart, chart_tags in charts.items()
    }


def _figsize(n_charts: int) -> tuple[float, float]:
    return (8.0, 1.0 + 2.5 * max(n_charts, 1))


def _array(axes: list[Axes]) -> Any:
    import numpy as np

    out = np.empty(len(axes), dtype=object)
    out[:] = axes
    return out
