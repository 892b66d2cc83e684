"""Drift reports: what changed in the model's reliance on features around a drift alarm.

:class:`DriftReporter` is a plug-in placed *after* the explainers and drift detectors in the
runner's plug-in list. Every batch it records, in a bounded deque, one entry per batch: the row
range, each explainer's importance snapshot (the explainer's EMA after that batch), the batch's
per-feature sum and sum of squares, and the primary metric signal per row (0/1 correctness of the
arg-max prediction for classification, squared error for regression).

When a detector's ``alerts`` list grows, or the stream passes a row of ``known_drifts``, a report
is opened at that row ``r``; once ``window`` rows after ``r`` have been seen it is built from

* the *before* window: batches lying entirely in ``[r - window, r)``;
* the *after* window: batches lying entirely in ``[r, r + window)``

(a batch that straddles ``r`` belongs to neither). For every feature of every explainer:

* ``importance_before`` / ``importance_after``: the mean of the snapshots in each window;
* ``bound_before`` / ``bound_after``: the half-width ``z * s / sqrt(n_eff)`` with ``s`` the
  batch-to-batch standard deviation of the snapshots in the window, ``n_eff`` the number of
  non-overlapping EMA spans in it (``rows * alpha / 2``, at least 1: snapshots of an EMA with
  span ``2 / alpha`` are strongly autocorrelated, so the batches are not independent draws) and
  ``z`` the two-sided normal quantile at ``level`` with a Bonferroni correction over the
  features of the explainer (``z = Phi^-1(1 - level / (2 d))``);
* ``verdict``: ``"gained"`` if the intervals do not overlap and after > before, ``"lost"`` if
  they do not overlap and after < before, else ``"unchanged"``;
* ``input_shift``: Welch's t statistic of the feature's mean, after minus before, over the rows
  of the two windows, ``(m_a - m_b) / sqrt(v_a / n_a + v_b / n_b)``, flagged (``input_moved``)
  when ``|t|`` exceeds the normal quantile Bonferroni-corrected over the input columns
  (large-sample test; rows treated as independent draws); ``smd`` is the standardized mean
  difference ``(m_a - m_b) / sqrt((v_a + v_b) / 2)``.

The report's ``kind`` is ``"real"`` when some verdict is ``"gained"`` or ``"lost"`` (the model's
reliance changed), ``"virtual"`` when no verdict changed but some input moved, else ``"none"``.
``changes`` are ranked by evidence: changed verdicts first, then by the gap between the
intervals relative to their combined width, ``|after - before| / (bound_before + bound_after)``.

Memory: entries older than ``2 * window`` rows behind the newest row are dropped (a pending
report needs at most ``window`` rows before its alarm and ``window`` rows after it).
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Protocol, TypedDict

import torch

from torchstream.base import PluginBase
from torchstream.evaluate.plugins import plugin_name
from torchstream.typing import BatchView

__all__ = ["DriftReporter", "Change", "Report"]


class _Explained(Protocol):
    feature_names: list[str]
    alpha: float

    @property
    def importance(self) -> torch.Tensor: ...


class _Alarming(Protocol):
    alerts: list[int]


class _Column(TypedDict):
    """How one input column moved between the two windows."""

    input_shift: float
    smd: float
    input_moved: bool
    mean_before: float
    mean_after: float
    var_before: float
    var_after: float


class Change(_Column):
    """One feature's entry in a report: its importance before / after and how its input
    moved."""

    explainer: str
    feature: str
    verdict: str
    importance_before: float
    importance_after: float
    bound_before: float
    bound_after: float
    evidence: float


class Report(TypedDict):
    """A drift report (the JSON shape of :attr:`DriftReporter.reports`)."""

    row: int
    detector: str
    summary: str
    kind: str
    metric: str
    metric_before: float
    metric_after: float
    rows_before: int
    rows_after: int
    inputs_moved: bool
    changes: list[Change]


class _Entry(TypedDict):
    start: int
    end: int
    snapshots: list[list[float]]
    sums: list[float]
    squares: list[float]
    metric: float


def _z(level: float, m: int) -> float:
    """Two-sided normal quantile with a Bonferroni correction over ``m`` tests."""
    return NormalDist().inv_cdf(1.0 - level / (2.0 * max(m, 1)))


def _fmt(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else "nan"


class DriftReporter(PluginBase):
    """Builds a report of feature-importance changes, input shifts and the metric around each
    drift alarm (the statistics are described in the module's docstring).

    Parameters
    ----------
    explainers
        Incremental explainers (e.g. :class:`~torchstream.explain.IncrementalPFI`) with
        ``importance``, ``feature_names`` and ``alpha``; placed before the reporter in the
        runner's plug-ins.
    detectors
        Drift detectors with an ``alerts`` list of stream rows; placed before the reporter.
    window
        Rows on each side of an alarm; default ``round(2 / alpha)`` of the explainer with the
        smallest ``alpha`` (the EMA's span).
    known_drifts
        Stream rows of known drifts: a report is opened when the stream passes each.
    level
        Family-wise error level of the importance and input tests (Bonferroni over features).
    """

    name = "drift_report"

    def __init__(
        self,
        explainers: Sequence[_Explained],
        detectors: Sequence[_Alarming] = (),
        *,
        window: int | None = None,
        known_drifts: Sequence[int] | None = None,
        level: float = 0.05,
    ) -> None:
        if not explainers:
            raise ValueError("explainers is empty: a drift report needs at least one explainer")
        if not 0.0 < level < 1.0:
            raise ValueError(f"level must be in (0, 1), got {level!r}")
        if window is None:
            window = max(1, round(2.0 / min(float(e.alpha) for e in explainers)))
        if not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive number of rows, got {window!r}")
        self.explainers = list(explainers)
        self.detectors = list(detectors)
        self.window = window
        self.level = float(level)
        self.known_drifts = sorted(int(r) for r in (known_drifts or ()))
        self.explainer_names = [plugin_name(e, i) for i, e in enumerate(self.explainers)]
        self.detector_names = [plugin_name(d, i) for i, d in enumerate(self.detectors)]
        self.reports: list[Report] = []
        self._entries: deque[_Entry] = deque()
        self._pending: list[tuple[int, str]] = []
        self._seen_alerts = [0] * len(self.detectors)
        self._next_known = 0
        self._task: str | None = None

    def _settings(self) -> dict[str, object]:
        """What a state must match: the window, the known drift rows and the level."""
        return {"window": self.window, "known_drifts": list(self.known_drifts),
                "level": self.level}

    # ----------------------------------------------------------------------- recording
    def on_batch(self, batch: BatchView) -> Mapping[str, float] | None:
        X = batch.X.detach().to("cpu", torch.float64)
        start, end = batch.start, batch.start + int(batch.X.shape[0])
        y_pred = batch.y_pred.detach().to("cpu")
        y = batch.y.detach().to("cpu")
        if y_pred.ndim == 2:
            self._task = "classification"
            signal = (y_pred.argmax(1) == y.long()).to(torch.float64)
        else:
            self._task = "regression"
            signal = (y_pred.to(torch.float64) - y.to(torch.float64)) ** 2
        self._entries.append({
            "start": start,
            "end": end,
            "snapshots": [e.importance.detach().to("cpu", torch.float64).tolist()
                          for e in self.explainers],
            "sums": X.sum(0).tolist(),
            "squares": (X * X).sum(0).tolist(),
            "metric": float(signal.sum()),
        })
        for i, detector in enumerate(self.detectors):  # only the alerts new since last batch
            alerts = detector.alerts
            for row in alerts[self._seen_alerts[i]:]:
                self._pending.append((int(row), self.detector_names[i]))
            self._seen_alerts[i] = len(alerts)
        known = self.known_drifts
        while self._next_known < len(known) and known[self._next_known] < end:
            self._pending.append((self.known_drifts[self._next_known], "known"))
            self._next_known += 1
        due = [p for p in self._pending if end >= p[0] + self.window]
        self._pending = [p for p in self._pending if end < p[0] + self.window]
        for row, source in due:
            self.reports.append(self._build(row, source))
        while self._entries and self._entries[0]["start"] < end - 2 * self.window:
            self._entries.popleft()
        return {"reports": float(len(self.reports))} if due else None

    def finish(self) -> list[Report]:
        """Build the pending reports from the rows seen so far (e.g. at the end of a stream,
        when fewer than ``window`` rows followed an alarm) and return all reports."""
        for row, source in self._pending:
            self.reports.append(self._build(row, source))
        self._pending = []
        return self.reports

    # ----------------------------------------------------------------------- building
    def _build(self, row: int, detector: str) -> Report:
        w = self.window
        before = [e for e in self._entries if e["start"] >= row - w and e["end"] <= row]
        after = [e for e in self._entries if e["start"] >= row and e["end"] <= row + w]
        n_b = sum(e["end"] - e["start"] for e in before)
        n_a = sum(e["end"] - e["start"] for e in after)
        n_inputs = len(self._entries[-1]["sums"]) if self._entries else 0
        shift = _input_shift(before, after, _z(self.level, n_inputs))
        changes: list[Change] = []
        for k, explainer in enumerate(self.explainers):
            names = list(explainer.feature_names)
            z = _z(self.level, len(names))
            n_eff_b = max(1.0, n_b * float(explainer.alpha) / 2.0)
            n_eff_a = max(1.0, n_a * float(explainer.alpha) / 2.0)
            imp_b, hw_b = _mean_bound([e["snapshots"][k] for e in before], len(names), z, n_eff_b)
            imp_a, hw_a = _mean_bound([e["snapshots"][k] for e in after], len(names), z, n_eff_a)
            for j, feature in enumerate(names):
                verdict = "unchanged"
                if imp_a[j] - hw_a[j] > imp_b[j] + hw_b[j]:
                    verdict = "gained"
                elif imp_a[j] + hw_a[j] < imp_b[j] - hw_b[j]:
                    verdict = "lost"
                width = hw_a[j] + hw_b[j]
                gap = abs(imp_a[j] - imp_b[j])
                evidence = gap / width if width > 0 else (math.inf if gap > 0 else 0.0)
                column = _input_column(shift, j, len(names), explainer)
                changes.append({
                    "explainer": self.explainer_names[k],
                    "feature": feature,
                    "verdict": verdict,
                    "importance_before": imp_b[j],
                    "importance_after": imp_a[j],
                    "bound_before": hw_b[j],
                    "bound_after": hw_a[j],
                    "evidence": evidence,
                    **column,
                })
        changes.sort(key=lambda c: (c["verdict"] == "unchanged", -c["evidence"]))
        real = any(c["verdict"] != "unchanged" for c in changes)
        moved = bool(shift["moved"])
        kind = "real" if real else ("virtual" if moved else "none")
        metric = "accuracy" if self._task != "regression" else "squared error"
        m_b = sum(e["metric"] for e in before) / n_b if n_b else math.nan
        m_a = sum(e["metric"] for e in after) / n_a if n_a else math.nan
        report: Report = {
            "row": int(row), "detector": detector, "summary": "", "kind": kind,
            "metric": metric, "metric_before": m_b, "metric_after": m_a,
            "rows_before": n_b, "rows_after": n_a, "inputs_moved": moved, "changes": changes,
        }
        report["summary"] = _summary(report)
        return report

    # ----------------------------------------------------------------------- output
    def to_json(self, indent: int | None = 2) -> str:
        """The reports as a JSON array (non-finite numbers as ``null``)."""
        return json.dumps(_json_safe(self.reports), indent=indent)

    def to_markdown(self) -> str:
        """One section per report: its summary and a table of the changes."""
        out: list[str] = []
        for r in self.reports:
            out.append(f"### Row {r['row']:,} ({r['detector']}): {r['kind']} drift\n")
            out.append(r["summary"] + "\n")
            out.append("| explainer | feature | verdict | before | after | input shift (t) |")
            out.append("|---|---|---|---|---|---|")
            for c in r["changes"]:
                moved = " (moved)" if c["input_moved"] else ""
                out.append(
                    f"| {c['explainer']} | {c['feature']} | {c['verdict']} | "
                    f"{_fmt(c['importance_before'])} ± {_fmt(c['bound_before'])} | "
                    f"{_fmt(c['importance_after'])} ± {_fmt(c['bound_after'])} | "
                    f"{_fmt(c['input_shift'])}{moved} |")
            out.append("")
        return "\n".join(out)

    def state_dict(self) -> dict[str, object]:
        return {
            "settings": self._settings(),
            "entries": [dict(e) for e in self._entries],
            "pending": [list(p) for p in self._pending],
            "seen_alerts": list(self._seen_alerts),
            "next_known": self._next_known,
            "task": self._task,
            "reports": json.loads(json.dumps(_json_safe(self.reports))),
        }

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        self._check_settings(state)
        seen = list(state["seen_alerts"])  # type: ignore[call-overload]
        if len(seen) != len(self.detectors):
            raise ValueError(f"state has alert counts for {len(seen)} detectors, "
                             f"this reporter has {len(self.detectors)}")
        self._entries = deque(dict(e) for e in state["entries"])  # type: ignore[misc, attr-defined]
        self._pending = [(int(r), str(d)) for r, d in state["pending"]]  # type: ignore[attr-defined]
        self._seen_alerts = [int(s) for s in seen]
        self._next_known = int(state["next_known"])  # type: ignore[call-overload]
        task = state["task"]
        self._task = None if task is None else str(task)
        self.reports = [_from_json(r) for r in state["reports"]]  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- statistics
def _mean_bound(snaps: list[list[float]], d: int, z: float, n_eff: float
                ) -> tuple[list[float], list[float]]:
    """Per-feature mean of the snapshots and the half-width ``z * s / sqrt(n_eff)``."""
    if not snaps:
        return [math.nan] * d, [math.nan] * d
    t = torch.tensor(snaps, dtype=torch.float64)
    mean = t.mean(0)
    sd = t.std(0, correction=1) if t.shape[0] > 1 else torch.zeros(d, dtype=torch.float64)
    return mean.tolist(), (z * sd / math.sqrt(n_eff)).tolist()


def _input_shift(before: list[_Entry], after: list[_Entry], z: float) -> dict[str, object]:
    """Row means and variances of each input column in the two windows and Welch's t."""
    def pooled(entries: list[_Entry]) -> tuple[torch.Tensor, torch.Tensor, int]:
        n = sum(e["end"] - e["start"] for e in entries)
        if n == 0:
            return torch.empty(0), torch.empty(0), 0
        s = torch.tensor([e["sums"] for e in entries], dtype=torch.float64).sum(0)
        q = torch.tensor([e["squares"] for e in entries], dtype=torch.float64).sum(0)
        mean = s / n
        var = (q - n * mean * mean).clamp_min(0.0) / max(n - 1, 1)
        return mean, var, n

    mb, vb, nb = pooled(before)
    ma, va, na = pooled(after)
    if nb == 0 or na == 0:
        return {"mean_before": mb, "mean_after": ma, "var_before": vb, "var_after": va,
                "t": None, "smd": None, "moved": False}
    se = torch.sqrt(vb / nb + va / na)
    diff = ma - mb
    t = torch.where(se > 0, diff / se, torch.where(diff == 0, 0.0, math.inf * diff.sign()))
    sd = torch.sqrt((vb + va) / 2)
    smd = torch.where(sd > 0, diff / sd, torch.zeros_like(diff))
    flags = t.abs() > z
    return {"mean_before": mb, "mean_after": ma, "var_before": vb, "var_after": va,
            "t": t, "smd": smd, "flags": flags, "moved": bool(flags.any())}


def _input_column(shift: Mapping[str, object], j: int, d: int, explainer: _Explained
                  ) -> _Column:
    """Input statistics of feature ``j``; NaN where the explainer's features are groups (their
    count differs from the inputs') or a window is empty."""
    t = shift.get("t")
    if not isinstance(t, torch.Tensor) or t.numel() != d:
        nan = math.nan
        return {"input_shift": nan, "smd": nan, "input_moved": False, "mean_before": nan,
                "mean_after": nan, "var_before": nan, "var_after": nan}

    def at(key: str) -> float:
        value = shift[key]
        assert isinstance(value, torch.Tensor)
        return float(value[j])

    flags = shift["flags"]
    assert isinstance(flags, torch.Tensor)
    return {"input_shift": float(t[j]), "smd": at("smd"), "input_moved": bool(flags[j]),
            "mean_before": at("mean_before"), "mean_after": at("mean_after"),
            "var_before": at("var_before"), "var_after": at("var_after")}


def _summary(r: Report) -> str:
    """One plain-language line, e.g. "after row 5,000 the model relies more on `elevel`, less
    on `age`; inputs unchanged; accuracy 0.93 → 0.71"."""
    more = list(dict.fromkeys(c["feature"] for c in r["changes"] if c["verdict"] == "gained"))
    less = list(dict.fromkeys(c["feature"] for c in r["changes"] if c["verdict"] == "lost"))
    parts = []
    if more:
        parts.append("more on " + ", ".join(f"`{f}`" for f in more))
    if less:
        parts.append("less on " + ", ".join(f"`{f}`" for f in less))
    reliance = ("the model relies " + ", ".join(parts)) if parts else \
        "the model's feature reliance is unchanged"
    moved = list(dict.fromkeys(c["feature"] for c in r["changes"] if c["input_moved"]))
    inputs = ("inputs moved: " + ", ".join(f"`{f}`" for f in moved) if moved
              else "inputs unchanged")
    metric = f"{r['metric']} {r['metric_before']:.2f} → {r['metric_after']:.2f}"
    return f"after row {r['row']:,} {reliance}; {inputs}; {metric}"


def _json_safe(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _from_json(value: object) -> Report:
    """A report read back from :func:`_json_safe`'s form (``null`` numbers -> NaN)."""
    def back(v: object) -> object:
        if v is None:
            return math.nan
        if isinstance(v, Mapping):
            return {k: back(x) for k, x in v.items()}
        if isinstance(v, list):
            return [back(x) for x in v]
        return v

    return back(value)  # type: ignore[return-value]
