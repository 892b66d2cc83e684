"""The drift report's files and ``torchstream report RUN_DIR``.

``torchstream run --report`` writes, in the run directory, ``report.json`` (``{"alarms":
[...]}``, the reports of :class:`~torchstream.report.reporter.DriftReporter`), ``report.md`` (the
same in words and tables, with the figures) and the figures in ``report/``; each report also
goes to TensorBoard at its row (the text, tag ``drift_report``; the figures, tags
``drift_report/<figure>``). ``torchstream report RUN_DIR`` draws the figures and writes
``report.md`` again from ``report.json``.
"""

from __future__ import annotations

import argparse
import re
import types
import typing
from collections.abc import Sequence
from pathlib import Path

from matplotlib.image import imsave

from torchstream.report.format import from_json, reports_to_json, to_markdown
from torchstream.report.reporter import Report
from torchstream.files import atomic_write
from torchstream.sinks import TensorBoardSink
from torchstream.viz.report import figure_pixels, report_figures

__all__ = ["REPORT_JSON", "REPORT_MD", "ReportWriter", "report_command", "write_report"]

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
FIGURES = "report"


def _stem(report: Report) -> str:
    """The file name stem of a report's figures, e.g. ``row5000_drift_adwin``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"row{report['row']}_{report['detector']}")


def _figure_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def draw_figures(run_dir: Path, report: Report, sink: TensorBoardSink | None = None
                 ) -> list[tuple[str, str]]:
    """Save a report's figures in ``run_dir/report/`` (and, with a ``sink``, log them to
    TensorBoard at the report's row); ``(caption, path relative to run_dir)`` of each."""
    folder = run_dir / FIGURES
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, fig in report_figures(report):
        rel = f"{FIGURES}/{_stem(report)}_{_figure_name(name)}.png"
        image = figure_pixels(fig)  # drawn once, for the file and TensorBoard
        imsave(run_dir / rel, image)
        if sink is not None:
            sink.log_image(f"drift_report/{name}", image, report["row"])
        out.append((name, rel))
    return out


def write_report(run_dir: Path, reports: Sequence[Report],
                 figures: dict[int, list[tuple[str, str]]]) -> None:
    """Write ``report.json`` and ``report.md`` (with the figures ``figures[i]`` of report ``i``)
    atomically."""
    for name, text in ((REPORT_JSON, reports_to_json(reports)),
                       (REPORT_MD, to_markdown(reports, figures))):
        atomic_write(run_dir / name, text.encode("utf-8"))


class ReportWriter:
    """The ``on_report`` callback of a run's :class:`DriftReporter`: each report's figures go
    to ``run_dir/report/`` and, with a ``sink``, the report's text and figures to TensorBoard
    at its row; :meth:`write` writes ``report.json`` / ``report.md`` of all reports."""

    def __init__(self, run_dir: str | Path, sink: TensorBoardSink | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.sink = sink
        self._figures: dict[str, list[tuple[str, str]]] = {}  # by the report's file stem

    def attach(self, sink: TensorBoardSink) -> None:
        """Send the reports' text and figures to ``sink`` too (a run's TensorBoard sink,
        made once its outputs have been checked)."""
        self.sink = sink

    def __call__(self, report: Report) -> None:
        self._figures[_stem(report)] = draw_figures(self.run_dir, report, self.sink)
        if self.sink is not None:
            self.sink.log_text("drift_report", to_markdown([report]).split("\n", 2)[2],
                               report["row"])

    def write(self, reports: Sequence[Report]) -> None:
        """Write the files of ``reports`` (figures of reports built before a resume are drawn
        now)."""
        figures = {}
        for i, report in enumerate(reports):
            stem = _stem(report)
            if stem not in self._figures:
                self._figures[stem] = draw_figures(self.run_dir, report)
            figures[i] = self._figures[stem]
        write_report(self.run_dir, reports, figures)


def _expected(hint: object) -> str:
    """A type hint in words: ``an integer``, ``a list``, ``a number or null``."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return " or ".join("null" if a is type(None) else _expected(a) for a in args)
    origin = typing.get_origin(hint) or hint
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "an object"}
    return words.get(origin, "an object") if isinstance(origin, type) else str(hint)


def _fits(value: object, hint: object) -> bool:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_fits(value, a) for a in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if typing.is_typeddict(hint) or typing.get_origin(hint) is dict:
        return isinstance(value, dict)
    origin = typing.get_origin(hint) or hint
    return isinstance(origin, type) and isinstance(value, origin)


def check_fields(value: object, hint: object, where: str) -> None:
    """Raise ``ValueError`` naming the first field of ``value`` (a report read from JSON) whose
    value does not have the type of its ``hint`` (a TypedDict such as :class:`Report`, lists
    and dicts of them, numbers, strings, ``X | None``), e.g. ``alarm 0 field row is '5000' (a
    string), expected an integer``.

    >>> check_fields({"row": "5000"}, Report, "alarm 0")
    Traceback (most recent call last):
    ...
    ValueError: alarm 0 field row is '5000' (a string), expected an integer
    """
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            raise ValueError(f"{where} is {_shown(value)}, expected an object")
        for key, sub in typing.get_type_hints(hint).items():
            if key in value:
                field = f"{where} field {key}" if " field " not in where else f"{where}.{key}"
                check_fields(value[key], sub, field)
        return
    if not _fits(value, hint):
        raise ValueError(f"{where} is {_shown(value)}, expected {_expected(hint)}")
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list and isinstance(value, list):
        for i, item in enumerate(value):
            check_fields(item, args[0], f"{where}[{i}]")
    elif origin is dict and isinstance(value, dict):
        for key, item in value.items():
            check_fields(item, args[1], f"{where}[{key!r}]")
    elif isinstance(hint, types.UnionType) or origin is typing.Union:
        for a in args:  # the members of the union that fit, checked inside
            if _fits(value, a):
                check_fields(value, a, where)
                return


def _shown(value: object) -> str:
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    kind = {bool: "true/false", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object", type(None): "null"}.get(type(value),
                                                                      type(value).__name__)
    return f"{text} ({kind})"


def report_command(args: argparse.Namespace) -> int:
    """Run ``torchstream report``."""
    run_dir = Path(args.run_dir)
    path = run_dir / REPORT_JSON
    if not path.is_file():
        raise SystemExit(f"error: {path} does not exist: `torchstream run --report --logdir "
                         f"{run_dir}` writes it")
    try:
        reports = from_json(path.read_text(encoding="utf-8"))
        for i, r in enumerate(reports):
            check_fields(r, Report, f"alarm {i}")
    except ValueError as e:
        raise SystemExit(f"error: {path}: {e}") from None
    figures = {i: draw_figures(run_dir, r) for i, r in enumerate(reports)}
    write_report(run_dir, reports, figures)
    for r in reports:
        print(f"[{r['detector']}] {r['summary']}")
    print(f"{len(reports)} report{'s' if len(reports) != 1 else ''}: {run_dir / REPORT_MD}")
    return 0
