"""Drift reports: what changed in the model's reliance on features around a drift alarm, how
the relationship changed, whether the inputs moved, where, and what it cost.

:class:`DriftReporter` is a plug-in placed *after* the explainers in the runner's plug-in list.
Every batch (its ``on_batch``) it records, in a bounded deque, one entry per batch: the row
range, each explainer's importance snapshot (the explainer's EMA after that batch), the batch's
per-column sum and sum of squares, and the metric signal per row (0/1 correctness of the arg-max
prediction for classification, squared error for regression) with its sum of squares, and the
rows of a bounded sample with their labels (the distribution tests, the test of ``P(y|x)``).

Then it reads the step's record (its ``on_record``, before the learner learns the batch): when
a detector of the run raised alarms (the record's ``alerts``), or the batch passed a known drift
of the stream (its ``known_drifts``) or a row of ``at``, a report
is opened at that row ``r`` (the PD curves are taken then: those of the iPDPs in ``pdps``, and
for every other feature the model's PD over the last ``pd_rows`` rows); once ``settle + window``
rows after ``r`` have been seen it is built from

* the *before* window: batches lying entirely in ``[r - window, r)``;
* the *after* window: batches lying entirely in ``[r + settle, r + settle + window)``

(a batch that straddles a window's edge belongs to neither; ``settle`` rows, one window by
default, give the learner time to learn the new concept, and the explainers' EMA time to forget
the old one, before the reliance is measured). The default window
is the explainers' EMA span ``2 / alpha`` (the smallest ``alpha``): one span is what an EMA
snapshot summarises. For every feature of every explainer (a feature of several encoded columns,
``feature_groups``, counts once):

* ``importance_before`` / ``importance_after``: the mean of the snapshots in each window;
* ``bound_before`` / ``bound_after``: the half-width ``z * s / sqrt(n_eff)`` with ``s`` the
  batch-to-batch standard deviation of the snapshots in the window, ``n_eff`` the number of
  non-overlapping EMA spans in it (``rows * alpha / 2``, at least 1: snapshots of an EMA with
  span ``2 / alpha`` are strongly autocorrelated, so the batches are not independent draws) and
  ``z`` the two-sided normal quantile at ``level`` with a Bonferroni correction over the
  features of the explainer (``z = Phi^-1(1 - level / (2 d))``);
* ``verdict``: ``"gained"`` if the intervals do not overlap and after > before, ``"lost"`` if
  they do not overlap and after < before, else ``"unchanged"``; a change smaller than
  ``min_effect`` times the explainer's largest mean importance is ``"unchanged"`` too;
* ``input_test``, ``input_statistic``, ``input_p``, ``input_moved``: a test of the feature's
  distribution between the windows fit for its kind — the two-sample Kolmogorov-Smirnov
  statistic ``D = max |F_after - F_before|`` for a numeric column, on the rows each window
  keeps (a share ``input_rows / window`` of its rows, picked by a hash of the row number: a
  bounded, resumable sample), and Pearson's chi-squared on the category counts of a one-hot
  block or a missing indicator (statistic shown: the total variation distance of the
  shares); ``input_moved`` when ``p`` is below ``level / d`` (Bonferroni over the ``d``
  features) and the statistic is at least ``min_shift``; ``input_before`` / ``input_after``:
  the deciles or the category shares (the report's distribution figure). ``share_moved``: the
  share of the features that moved. ``input_shift`` (Welch's t of the means, its column in
  ``input_column``) and ``smd`` describe the mean's move;
* ``partial_drift``: a detector that tests single features (ERICS with ``partial``; the
  record's ``partial_alerts``) raised a partial alert on the feature near the alarm,
  between ``r - window // 4`` and ``r + settle + window // 4``;
* ``pdp_distance``: how far the shape of the feature's PD curve moved between ``r`` and the
  end of the after window: the root mean square of the differences less their mean (the
  mean, a shift of the whole curve, is the curve's ``level_shift``); the curve of an iPDP in
  ``pdps``, else the model's PD over the last ``pd_rows`` rows at each end, on the grid taken
  at ``r`` (NaN without a curve).

**Interactions.** With :class:`~torchstream.explain.IncrementalInteraction` explainers in
``interactions``, every batch also records each one's pair values (:attr:`~torchstream.explain.
IncrementalInteraction.interaction`, NaN for a pair outside its ``top_k`` at that batch) and
every pair of every such explainer gets an entry in ``interactions``, by the same interval rule
as the features: ``value_before`` / ``value_after`` the mean of the pair's snapshots in each
window, ``bound_before`` / ``bound_after`` the half-width ``z * s / sqrt(n_eff)`` over the
snapshots where the pair was explained (``n_eff`` from their rows), ``z`` Bonferroni-corrected
over the explainer's pairs, and ``min_effect`` times its largest mean ``|SII|``; the verdict is
``"gained"`` / ``"lost"`` when the intervals are apart and ``|SII|`` grew / shrank (a negative
SII, redundancy, counts by its size), ``"not compared"`` when a window holds no estimate of the
pair (its features were not among the ``top_k`` there), else ``"unchanged"``. Pairs are ranked
like the features; the summary names the pairs that gained or lost. They do not enter the
report's ``kind``.

**Real or virtual: a test of P(y|x).** A change of importance does not show a change of
``P(y|x)``: importance is a property of the model *and* the data, and moves when the inputs
move. For a classifier whose outputs are probabilities the report tests ``P(y|x)`` itself
with a *reference model*: a copy of the learner taken every ``window // 2`` rows (the copies
no alarm can use are let go), the report using the oldest copy taken in its before window
(between ``window // 2`` and ``window`` rows before the row: a model that has not learned the
rows it is scored on, and does not learn after). Its calibration gap per row is
``g(x, y) = 1[argmax_k p_k(x) = y] - max_k p_k(x)`` (correct less confident), scored on the
kept rows (``input_rows``, with their labels) from the copy's row to the alarm's (*before*,
``B``) and from the alarm's to the end of the after window (*after*, ``A``: every kept row the
model would have got wrong while the learner adapts).

For a fixed model ``E[g | x] = c(x) - conf(x)``, ``c(x)`` its probability to be right at ``x``
under the current ``P(y|x)``, ``conf(x)`` its confidence there. So, with ``h_b(x)`` the
before concept's ``E[g | x]`` and ``h_a(x)`` the after concept's,

    E_A[g] - E_B[g] = (E_{p_a}[h_b] - E_{p_b}[h_b])  +  (E_{p_a}[h_a] - E_{p_a}[h_b])
                      the part due to P(x)            the part due to P(y|x)

and the test estimates the second part: ``gap_expected`` is ``E_{p_a}[h_b]``, the before rows
reweighted to the after rows' inputs, ``gap_after`` is ``E_{p_a}[h_a]``. With no input moved
``p_a = p_b`` and ``gap_expected`` is the before rows' mean gap; when inputs moved, the before
rows are post-stratified on the moved feature with the largest distribution statistic: ``q =
10`` cells at the before rows' deciles of its value (a one-hot block: its categories; a
nullable feature: a cell for its missing rows), ``gap_expected = sum_c w_c mean_B(c)`` with
``w_c`` the share of the after rows in cell ``c`` — a histogram estimate of the density ratio
``p_a(x) / p_b(x)`` on that feature. After rows whose cell holds fewer than two before rows
(inputs outside the before rows' range: the old model says nothing there) are left out
(``rows_left_out``). The drop ``gap_expected - gap_after`` has the standard error
``sqrt(sum_c w_c^2 s_B(c)^2 / n_B(c) + s_A^2 / n_A)``
(:func:`~torchstream.report.stats.reweighted_gap`); ``conditional.changed`` when the drop
exceeds ``z = Phi^-1(1 - level / 2)`` of them (a one-sided test at ``level / 2``) and
``min_conditional``. Under an
unchanged ``P(y|x)`` the drop is zero whatever ``P(x)`` did on the reweighted feature (the
reweighting assumes the other inputs given that feature did not move); a new ``P(y|x)``
labels inputs the reference model knew otherwise than it expects, and as the model does not
adapt, every after row where the concept differs counts, not only the few before the learner
relearns (a threshold that moves through ~10 % of the inputs costs a learner that relearns
within a few hundred rows almost nothing right after the alarm, and its reference model
~0.05-0.1 of accuracy over all the after rows). Closed forms (tests): a fixed model with
confidence ``c`` and a band of share ``s`` of the inputs relabelled: drop ``s (2c - 1)``;
a calibration that varies with ``x0`` and ``x0`` moved with ``P(y|x)`` fixed: the plain drop
is not zero, the reweighted one is.

Without a reference model (a learner that cannot be copied, said in ``conditional.note``, or
an alarm in the stream's first rows) the test falls back on the learner's own predictions:
the before window's mean gap against that of the ``window // 4`` rows right after the alarm.

The report's ``kind``, the first that applies:

* ``"warm-up"``: the alarm came before one ``window`` of rows had passed (``row < window``):
  the model is new and still learning, so its changing reliance is not a drift of the data;
* with the test of ``P(y|x)``: ``"real"`` when it changed, or when no input moved and the
  metric dropped (over the rows right after the alarm, or over its ``window // 4`` first rows,
  before the model adapts: ``conditional.accuracy_dropped``) or some feature ``"lost"``
  reliance (a concept that stops reading a feature);
  ``"learning"`` when no input moved and the accuracy rose (``metric_improved``) or features
  only *gained* reliance (neither ``P(x)`` nor ``P(y|x)`` changed: the model is still
  converging on the same data); ``"virtual"`` when an input moved (a changed reliance then
  "moved with the inputs"); else ``"none"``;
* without it (a regression, outputs that are not probabilities): ``"learning"`` when the
  metric improved and no input moved; ``"real"`` when some verdict is ``"gained"`` or
  ``"lost"`` or the metric dropped while no input moved; ``"virtual"`` when an input moved;
  else ``"none"``.

A new change (an alarm that joins no report, or a known drift) ends the windows of a report
still waiting for its rows: they never reach past it (``cut_at``), so an early alarm is not
blamed for a later change.

The summary of a ``warm-up`` or ``learning`` report says so and calls nothing a drift; its
changes are still listed in the report.
``changes`` are ranked by evidence: changed verdicts first, then by the gap between the
intervals relative to their combined width, ``|after - before| / (bound_before + bound_after)``.
``where`` lists the partial alerts and the regions a detector located (the record's
``regions``: the CDLEEDS neighbourhoods that flagged a local change, their centroids and most
distinctive columns) in the same span. A detector's alarm
joins an earlier report (listed in its ``also`` with the reason) when it lies within
``window // 4`` rows of that report's row (the same change), or when it comes less than
``max(window, settle)`` rows after that report's row (while the model adapts to the change:
its before window would hold rows of both concepts, and ``settle`` is the time the learner is
given to adapt). One change, one report; every alarm is in
``reports`` as a report's ``row`` or in one ``also`` (a known drift always opens its own).

The cost: ``metric_before`` / ``metric_after`` over the two windows and ``metric_right_after``
over the rows ``[r, r + min(settle, window))`` (the after window when ``settle`` is 0);
``metric_dropped`` when those first rows are worse than the before window by more than ``z``
standard errors (Welch, two-sided quantile at ``level``): the drift's immediate cost. Then, as
in the
drift restoration time of the float evaluation (Haug et al. 2022, Eq. 3), ``rows_to_recovery``
is the number of rows from ``r`` to the end of the first batch where the mean over the last
``window // 4`` rows (all after ``r``) is back at ``metric_before``; it is followed for at most
``horizon`` rows after ``r`` (``recovered`` False then; None while followed).

Memory: entries older than ``2 * window + settle`` rows behind the newest row are dropped (a
pending report needs at most ``window`` rows before its alarm and ``settle + window`` after it),
and consecutive batches of fewer than ``window // 100`` rows join into one entry (its snapshot
the last one), so a window holds at most about 100 entries whatever the batch size; recovery
keeps the last ``window // 4`` rows' metric sums. The reference models: about three copies of
the learner (the last ``window + window // 2`` rows'), plus one per report waiting for its
rows; a state holds each copy's ``state_dict()`` (rebuilt on a copy of the learner at the
next batch after a resume) or, for a model without one, the model itself.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypedDict, cast

import torch

from torchstream.base import PluginBase
from torchstream.evaluate.plugins import plugin_name
from torchstream.explain.interaction import IncrementalInteraction
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.explain.pdp_grid import GroupSpec, group_spec
from torchstream.report.format import (
    Also,
    Change,
    Conditional,
    Curve,
    PairChange,
    Region,
    Report,
    json_safe,
    nan_back,
    reports_to_json,
    summary,
    to_markdown,
)
from torchstream.report.pd import PDCurve, pd_curves, pd_grids
from torchstream.report.stats import (
    Distribution,
    GapDrop,
    curve_difference,
    group_columns,
    input_shift,
    kept_rows,
    mean_bound,
    reweighted_gap,
    sample_mean_se,
    z_quantile,
)
from torchstream.report.windows import (
    Entry,
    cells,
    classify,
    distribution_test,
    interval_verdict,
    pair_changes,
    sample_rows,
    window_labels,
    window_metric,
)
from torchstream.step import StepRecord
from torchstream.typing import BatchView, ModelFn

__all__ = ["Change", "Curve", "DriftReporter", "PairChange", "Region", "Report", "json_safe"]


class _Explained(Protocol):
    feature_names: list[str]
    alpha: float

    @property
    def importance(self) -> torch.Tensor: ...


class _Recovery(TypedDict):
    """The metric's recovery after an alarm at ``row``: back at ``threshold`` (the before
    window's mean) after ``rows_to_recovery`` rows; None while followed."""

    row: int
    threshold: float
    recovered: bool | None
    rows_to_recovery: int | None


class _Pending(_Recovery):
    detector: str
    also: list[Also]
    cut: int | None  # the next change's row: the windows end before it
    reference: int | None  # the row of the copy of the model that tests P(y|x)
    curves: list[dict[str, list[float] | list[str]]]
    grids: dict[str, dict[str, object]]
    pd: dict[str, PDCurve]
    output: int | None


class _Built(_Recovery):
    report: int


#: Called with every report when it is built (e.g. to write it to TensorBoard at its row).
OnReport = Callable[["Report"], None]


def _also(also: list[Also], detector: str, row: int, note: str) -> None:
    """Record an alarm that joins a report: a run of consecutive rows of one detector with
    one reason is one entry (every row from ``first`` to ``last`` alarmed)."""
    last = also[-1] if also else None
    if (last is not None and last["detector"] == detector and last["note"] == note
            and last["last"] == row - 1):
        last["last"] = row
    else:
        also.append({"detector": detector, "first": row, "last": row, "note": note})


def _model_state(model: ModelFn) -> object:
    """What a state saves of a copy of the model: its state dict, or the model itself when it
    has none (e.g. a plain function)."""
    get = getattr(model, "state_dict", None)
    return get() if callable(get) and hasattr(model, "load_state_dict") else model


def _pair_values(explainer: IncrementalInteraction) -> list[float]:
    """The explainer's pairs ``(a, c)``, ``a < c``, in column order: the SII of each pair
    explained on the last batch, NaN for the others."""
    matrix = explainer.interaction
    a, c = torch.triu_indices(matrix.shape[0], matrix.shape[1], 1)
    return matrix[a, c].tolist()


def _pair_names(explainer: IncrementalInteraction) -> list[list[str]]:
    """The names of the pairs of :func:`_pair_values`, in the same order."""
    names = list(explainer.feature_names)
    a, c = torch.triu_indices(len(names), len(names), 1)
    return [[names[i], names[j]] for i, j in zip(a.tolist(), c.tolist())]


def _curve(pdp: IncrementalPDP) -> dict[str, list[float] | list[str]]:
    return {"grid": pdp.grid.tolist(), "pd": pdp.pd.tolist(), "labels": pdp.grid_labels}


class DriftReporter(PluginBase):
    """Builds a report of feature-importance changes, PD-curve changes, input shifts, the
    regions of change and the metric around each drift alarm (the statistics are described in
    the module's docstring).

    Parameters
    ----------
    explainers
        Incremental explainers (e.g. :class:`~torchstream.explain.IncrementalPFI`) with
        ``importance``, ``feature_names`` and ``alpha``; placed before the reporter in the
        runner's plug-ins.
    detectors
        The names of the run's drift detectors whose alarms open reports and whose partial
        alerts and regions the reports cite (the keys of the step records' ``alerts``);
        None (default): every detector of the run.
    at
        Stream rows where a report is opened besides the detectors' alarms and the stream's
        known drifts (both read from each step's record).
    window
        Rows on each side of an alarm; default ``round(2 / alpha)`` of the explainer with the
        smallest ``alpha`` (the EMA's span).
    level
        Family-wise error level of the importance, input and metric tests (Bonferroni over
        features).
    settle
        Rows after the alarm left out before the after window starts (the learner's time to
        adapt, and its explainers' to forget the old concept); default one ``window``.
    pdps
        Incremental PDPs (placed before the reporter) whose curves are compared.
    interactions
        :class:`~torchstream.explain.IncrementalInteraction` explainers (placed before the
        reporter) whose pairs are compared (``interactions`` of each report). Their own
        importance (SAGE values) enters ``changes`` only if they are also in ``explainers``.
    horizon
        Rows after the alarm during which the recovery of the metric is followed (default
        ``10 * window``).
    pd_rows, pd_grid
        The PD curves of every feature without an iPDP in ``pdps`` are computed from the model
        at the alarm and at the end of the after window over the last ``pd_rows`` rows, at
        ``pd_grid`` points (:mod:`~torchstream.report.pd`): no cost per batch, one
        batched model call at each end; ``pd_rows=0``: no such curves.
    min_effect
        A verdict also needs ``|after - before|`` of at least this share of the explainer's
        largest mean importance (either window): a change too small to matter to the model is
        ``unchanged`` however sure (default 0.05; 0: the interval test alone).
    input_rows
        About how many rows of each window are kept for the distribution tests (a fixed share
        ``input_rows / window`` of the rows, chosen by row number; default 500).
    min_shift
        The effect floor of an input flag: the KS statistic or the total variation distance
        must reach it (default 0.1), as ``min_effect`` is the floor of a reliance verdict.
    min_conditional
        The effect floor of the test of ``P(y|x)``: the reference model's accuracy after the
        alarm must lie at least this far below what its confidence and its record before the
        alarm predict (default 0.01).
    on_report
        Called with each report when it is built.
    """

    name = "drift_report"

    def __init__(
        self,
        explainers: Sequence[_Explained],
        *,
        detectors: Sequence[str] | None = None,
        at: Sequence[int] = (),
        window: int | None = None,
        level: float = 0.05,
        settle: int | None = None,
        pdps: Sequence[IncrementalPDP] = (),
        interactions: Sequence[IncrementalInteraction] = (),
        horizon: int | None = None,
        min_effect: float = 0.05,
        pd_rows: int = 200,
        pd_grid: int = 20,
        input_rows: int = 500,
        min_shift: float = 0.1,
        min_conditional: float = 0.01,
        on_report: OnReport | None = None,
    ) -> None:
        if not explainers:
            raise ValueError("explainers is empty: a drift report needs at least one explainer")
        if not 0.0 < level < 1.0:
            raise ValueError(f"level must be in (0, 1), got {level!r}")
        for label, share in (("min_effect", min_effect), ("min_shift", min_shift),
                             ("min_conditional", min_conditional)):
            if not 0.0 <= share < 1.0:
                raise ValueError(f"{label} must be in [0, 1), got {share!r}")
        if window is None:
            window = max(1, round(2.0 / min(float(e.alpha) for e in [*explainers,
                                                                       *interactions])))
        if settle is None:
            settle = window
        for label, value, low in (("window", window, 1), ("settle", settle, 0),
                                  ("horizon", horizon, 1), ("pd_rows", pd_rows, 0),
                                  ("pd_grid", pd_grid, 2), ("input_rows", input_rows, 1)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < low):
                raise ValueError(f"{label} must be a number of rows >= {low}, got {value!r}")
        self.explainers = list(explainers)
        self.detectors = None if detectors is None else [str(d) for d in detectors]
        self.at = sorted({int(r) for r in at})
        self.window = window
        self.level = float(level)
        self.settle = settle
        self.pdps = list(pdps)
        self.interactions = list(interactions)
        self.horizon = 10 * window if horizon is None else horizon
        self.min_effect = float(min_effect)
        self.pd_rows = pd_rows
        self.pd_grid = pd_grid
        self.input_rows = input_rows
        self.min_shift = float(min_shift)
        self.min_conditional = float(min_conditional)
        self.on_report = on_report
        self.explainer_names = [plugin_name(e, i) for i, e in enumerate(self.explainers)]
        self.pdp_names = [plugin_name(p, i) for i, p in enumerate(self.pdps)]
        self.interaction_names = [plugin_name(e, i) for i, e in enumerate(self.interactions)]
        self.recovery_rows = max(1, window // 4)
        #: Rows between the copies of the model kept for the test of P(y|x).
        self.reference_every = max(1, window // 2)
        #: Rows one recorded entry covers at least (consecutive batches join up to it).
        self.block = max(1, window // 100)
        self._reset()

    def _reset(self) -> None:
        self.reports: list[Report] = []
        #: Seconds spent recording batches and building reports.
        self.seconds = 0.0
        self._entries: deque[Entry] = deque()
        self._pending: list[_Pending] = []
        self._recovering: list[_Built] = []
        self._recent: deque[tuple[int, float]] = deque()  # (rows, metric sum) of recent batches
        self._recent_rows, self._recent_sum = 0, 0.0  # their totals
        self._partial: list[tuple[int, str, str]] = []  # (row, detector, feature)
        self._partial_detectors: list[str] = []  # the run's detectors that test features
        #: what on_record needs of the batch on_batch recorded (None: none waiting): its end
        #: (last row + 1), rows, metric sum, learner and whether its outputs were probabilities
        self._batch: tuple[int, int, float, object, bool] | None = None
        self._regions: list[Region] = []
        self._next_known = 0
        self._task: str | None = None
        # the last pd_rows rows (for the PDs; their order does not matter): a ring buffer
        self._ring = torch.empty(0, dtype=torch.float64)
        self._ring_n = 0  # rows written so far
        self._model: Callable[[torch.Tensor], torch.Tensor] | None = None
        self._input: tuple[torch.dtype, torch.device] = (torch.float32, torch.device("cpu"))
        # copies of the learner by the row they were taken at (the test of P(y|x)); states of
        # copies to rebuild from the learner at the next batch (after a resume)
        self._references: dict[int, ModelFn] = {}
        self._restore: dict[int, object] = {}
        self._next_reference = self.reference_every
        self._reference_error: str | None = None

    def _settings(self) -> dict[str, object]:
        """What a state must match."""
        return {"window": self.window, "at": list(self.at), "detectors": self.detectors,
                "level": self.level, "settle": self.settle, "horizon": self.horizon,
                "min_effect": self.min_effect, "pd_rows": self.pd_rows, "pd_grid": self.pd_grid,
                "pdps": list(self.pdp_names), "interactions": list(self.interaction_names),
                "input_rows": self.input_rows, "min_shift": self.min_shift,
                "min_conditional": self.min_conditional}

    @property
    def _columns(self) -> list[str]:
        names = getattr(self.explainers[0], "column_names", None)
        return list(names) if names is not None else []

    # ----------------------------------------------------------------------- recording
    def on_batch(self, batch: BatchView) -> Mapping[str, float] | None:
        began = time.perf_counter()
        X = batch.X.detach().to("cpu", torch.float64)
        start, end = batch.start, batch.start + int(batch.X.shape[0])
        signal = self._signal(batch)
        metric = float(signal.sum())
        gap = self._gap(batch, signal)
        keep = kept_rows(start, int(X.shape[0]), min(1.0, self.input_rows / self.window))
        sample = X[keep]
        labels = batch.y.detach().to("cpu", torch.float64).reshape(-1)[keep].tolist()
        learner = batch.learner
        if self._restore:
            self._rebuild(learner)
        snapshots = [e.importance.detach().to("cpu", torch.float64).tolist()
                     for e in self.explainers]
        pairs = [_pair_values(e) for e in self.interactions]
        last = self._entries[-1] if self._entries else None
        if last is not None and last["end"] == start and last["end"] - last["start"] < self.block:
            # a short batch joins the entry before it: its snapshot is the block's last
            last["end"] = end
            last["snapshots"] = snapshots
            last["pairs"] = pairs
            last["sums"] = (torch.tensor(last["sums"], dtype=torch.float64) + X.sum(0)).tolist()
            last["squares"] = (torch.tensor(last["squares"], dtype=torch.float64)
                               + (X * X).sum(0)).tolist()
            last["metric"] += metric
            last["metric_sq"] += float((signal * signal).sum())
            last["sample"] += sample.tolist()
            last["labels"] += labels
            last["gap"] += float(gap.sum())
            last["gap_sq"] += float((gap * gap).sum())
        else:
            self._entries.append({
                "start": start, "end": end, "snapshots": snapshots, "pairs": pairs,
                "sums": X.sum(0).tolist(), "squares": (X * X).sum(0).tolist(),
                "metric": metric, "metric_sq": float((signal * signal).sum()),
                "sample": sample.tolist(), "labels": labels, "gap": float(gap.sum()),
                "gap_sq": float((gap * gap).sum()),
            })
        if self.pd_rows:
            self._keep_rows(X)
        self._model = learner if callable(learner) else None
        self._input = (batch.X.dtype, batch.X.device)
        self._batch = (end, end - start, metric, learner,
                       bool(gap.numel()) and bool(torch.isfinite(gap).all()))
        self.seconds += time.perf_counter() - began
        return None

    def on_record(self, record: StepRecord) -> None:
        """The step's record (after :meth:`on_batch` of the same batch, before the learner
        learns it): its partial alerts and regions are kept, a report is opened at each of
        its alarms and known drifts (and rows of ``at`` the batch passed), and the reports
        whose windows are complete are built."""
        if self._batch is None or self._batch[0] != record.stop:
            waiting = "none" if self._batch is None else f"one ending at row {self._batch[0]}"
            raise ValueError(f"the drift report was given the record of rows {record.start:,}"
                             f"-{record.stop - 1:,}, but the batch it recorded last is "
                             f"{waiting}: on_record follows on_batch of the same batch")
        began = time.perf_counter()
        end, rows, metric, learner, probabilities = self._batch
        self._batch = None
        self._record_where(record)
        self._open(record)
        self._follow_recovery(rows, metric, end)
        span = self.settle + self.window
        due = [p for p in self._pending if end >= p["row"] + span or p["cut"] is not None]
        self._pending = [p for p in self._pending if p not in due]
        built = [self._add(pending) for pending in due]
        self._keep_reference(learner, end, probabilities)
        while self._entries and self._entries[0]["start"] < end - self.window - span:
            self._entries.popleft()
        oldest = end - self.window - span
        self._partial = [p for p in self._partial if p[0] >= oldest]
        self._regions = [r for r in self._regions if r["row"] >= oldest]
        self.seconds += time.perf_counter() - began
        if self.on_report is not None:  # the caller's time, not the reporter's
            for report in built:
                self.on_report(report)

    def _signal(self, batch: BatchView) -> torch.Tensor:
        y_pred = batch.y_pred.detach().to("cpu")
        y = batch.y.detach().to("cpu")
        if y_pred.ndim == 2:
            self._task = "classification"
            return (y_pred.argmax(1) == y.long()).to(torch.float64)
        self._task = "regression"
        return (y_pred.to(torch.float64).reshape(-1) - y.to(torch.float64).reshape(-1)) ** 2

    def _gap(self, batch: BatchView, signal: torch.Tensor) -> torch.Tensor:
        """Per row: correct (0/1) less the model's confidence (its largest class probability);
        NaN for a regression or outputs that are not probabilities (rows in [0, 1] summing to
        1): the test of P(y|x) then does not apply."""
        y_pred = batch.y_pred.detach().to("cpu", torch.float64)
        if y_pred.ndim != 2 or y_pred.shape[0] == 0:
            return torch.full_like(signal, math.nan)
        ok = bool(((y_pred >= 0) & (y_pred <= 1)).all()) and bool(
            ((y_pred.sum(1) - 1).abs() < 1e-3).all())
        if not ok:
            return torch.full_like(signal, math.nan)
        return signal - y_pred.max(1).values

    def _open(self, record: StepRecord) -> None:
        """Open a report for every alarm of the step, every known drift it passed and every
        row of ``at`` the stream passed; the PD curves are taken now (at the alarm)."""
        opened = [(int(row), name) for name, rows in record.alerts.items()
                  if self._reads(name) for row in rows]
        known = set(record.known_drifts)
        while self._next_known < len(self.at) and self.at[self._next_known] < record.stop:
            known.add(self.at[self._next_known])
            self._next_known += 1
        opened += [(row, "known") for row in known]
        for row, source in sorted(opened):
            if source != "known" and self._join(row, source):
                continue
            before = [e for e in self._entries if e["start"] >= row - self.window
                      and e["end"] <= row]
            for earlier in self._pending:  # a new change: the earlier windows end before it
                if earlier["cut"] is None and row < earlier["row"] + self.settle + self.window:
                    earlier["cut"] = row
            grids, curves, output = self._pd_now()
            # the oldest copy of the model in the row's before window (from window // 2 to
            # window rows before it when a copy is taken every window // 2 rows)
            copies = [r for r in self._references if row - self.window <= r < row]
            self._pending.append({"row": row, "detector": source, "also": [], "cut": None,
                                  "reference": min(copies) if copies else None,
                                  "curves": [_curve(p) for p in self.pdps],
                                  "grids": grids, "pd": curves, "output": output,
                                  "threshold": window_metric(before)[0], "recovered": None,
                                  "rows_to_recovery": None})

    def _keep_reference(self, learner: object, end: int, probabilities: bool) -> None:
        """Take a copy of the learner when the stream passes a multiple of
        ``reference_every`` rows (a classifier with probability outputs only), and drop the
        copies that no report holds and no later alarm can use."""
        if end >= self._next_reference:
            self._next_reference = (end // self.reference_every + 1) * self.reference_every
            if probabilities and callable(learner) and self._reference_error is None:
                try:
                    self._references[end] = copy.deepcopy(learner)
                except (TypeError, ValueError, RuntimeError, AttributeError,
                        pickle.PicklingError) as e:  # said in every report's test of P(y|x)
                    self._reference_error = (f"the learner could not be copied "
                                             f"({type(e).__name__}: {e})")
        held = {p.get("reference") for p in self._pending}
        oldest = end - self.window - self.reference_every
        self._references = {r: m for r, m in self._references.items()
                            if r >= oldest or r in held}

    def _rebuild(self, learner: object) -> None:
        """The copies of a loaded state: the learner's copy with each copy's state loaded
        (a copy saved whole, e.g. a plain function, as it was saved)."""
        for row, state in sorted(self._restore.items()):
            if isinstance(state, Mapping):
                load = getattr(learner, "load_state_dict", None)
                if load is None:
                    raise ValueError(f"the drift report's copy of the model at row {row:,} is a "
                                     f"state dict, but the learner "
                                     f"({type(learner).__name__}) has no load_state_dict")
                model = copy.deepcopy(learner)
                model.load_state_dict(state)  # type: ignore[attr-defined]
            else:
                model = state
            self._references[row] = cast(ModelFn, model)
        self._restore = {}

    def _join(self, row: int, source: str) -> bool:
        """Add a detector's alarm at ``row`` to the report of the change it belongs to, if
        any: one opened within ``window // 4`` rows of it (the same change), else the latest
        one opened less than ``max(window, settle)`` rows before it (the alarm comes while the
        model adapts to that change, and a report of its own would compare against rows of
        the change)."""
        near = max(1, self.window // 4)
        reports: list[_Pending | Report] = [*self._pending, *self.reports]
        same = next((r for r in reports if abs(r["row"] - row) <= near), None)
        if same is not None:
            _also(same["also"], source, row, "the same change")
            return True
        adapting = max(self.window, self.settle)
        during = max((r for r in reports if row - adapting <= r["row"] < row),
                     key=lambda r: r["row"], default=None)
        if during is None:
            return False
        why = (f"the {self.window:,}-row before window of these alarms holds that row"
               if row - self.window <= during["row"] else
               f"{self.settle:,} rows, the settle, have not passed since")
        _also(during["also"], source, row,
              f"while the model adapts to the change at row {during['row']:,} ({why})")
        return True

    def _keep_rows(self, X: torch.Tensor) -> None:
        """Write the batch's rows (its last ``pd_rows``) over the oldest of the ring."""
        if self._ring.numel() == 0:
            self._ring = torch.empty(self.pd_rows, X.shape[1], dtype=torch.float64)
        X = X[-self.pd_rows:]
        slots = (self._ring_n + torch.arange(X.shape[0])) % self.pd_rows
        self._ring[slots] = X
        self._ring_n += int(X.shape[0])

    @property
    def _rows(self) -> torch.Tensor:
        """The last ``pd_rows`` rows seen (fewer at the start), in no particular order."""
        return self._ring[: min(self._ring_n, self.pd_rows)]

    def _features(self) -> tuple[list[str], dict[str, list[int]]]:
        """The features of the first explainer and the columns of each (without groups, the
        feature at position ``j`` is column ``j``)."""
        explainer = self.explainers[0]
        groups = getattr(explainer, "groups", None)
        if groups is None:
            names = list(explainer.feature_names)
            return names, {n: [j] for j, n in enumerate(names)}
        return list(groups.names), {n: list(m) for n, m in zip(groups.names, groups.members)}

    def _pd_now(self, grids: Mapping[str, object] | None = None, output: int | None = None
                ) -> tuple[dict[str, dict[str, object]], dict[str, PDCurve], int | None]:
        """The model's PD curves now over the last rows, for the features without an iPDP:
        ``grids`` and ``output`` those of the alarm, else new ones — the grids from the rows,
        the output the probability of class 1 for two classes, of the class predicted most
        often over the rows for more (None: a model with one output)."""
        if not self.pd_rows or self._model is None or self._rows.shape[0] == 0:
            return {}, {}, None
        rows = self._rows.to(self._input[1], self._input[0])
        if grids is None:
            features, groups = self._features()
            covered = {p.feature_name for p in self.pdps}
            columns = self._columns or [f"x{j}" for j in range(self._rows.shape[1])]
            todo = [f for f in features if f not in covered]
            grids = dict(pd_grids(self._rows, todo, groups, columns, self.pd_grid))
            with torch.no_grad():
                out = self._model(rows)
            output = None
            if out.dim() == 2:
                k = int(out.shape[1])
                output = 1 if k == 2 else (0 if k == 1 else int(
                    torch.bincount(out.argmax(1).cpu(), minlength=k).argmax()))
        curves = pd_curves(self._model, rows, grids, output=output)  # type: ignore[arg-type]
        return cast(dict[str, dict[str, object]], dict(grids)), curves, output

    def _output_label(self, index: int | None, *, ipdp: bool = False) -> str:
        """What a PD curve shows: ``"P(class <label>)"`` or ``"output"`` (an iPDP's default
        for class outputs: class 1)."""
        if index is None and not ipdp:
            return "output"
        if index is None:  # the iPDP's default: class 1 of a class output, else the output
            return "output" if self._task == "regression" else self._output_label(1)
        classes = getattr(self._model, "classes_", None)
        label = classes[index] if classes is not None and index < len(classes) else index
        return f"P(class {label})"

    def _record_where(self, record: StepRecord) -> None:
        """The step's partial alerts and the regions its detectors located (at the batch's
        last row)."""
        names = self._columns
        for detector, features in record.partial_alerts.items():
            if not self._reads(detector):
                continue
            if detector not in self._partial_detectors:
                self._partial_detectors.append(detector)
            for feature in features:
                label = feature if isinstance(feature, str) else (
                    names[feature] if feature < len(names) else f"x{feature}")
                self._partial.append((record.last_row, detector, label))
        for detector, centroids in record.regions.items():
            if self._reads(detector):
                self._regions += self._flagged(centroids, detector, record.last_row)

    def _reads(self, detector: str) -> bool:
        """Whether the report reads the alarms of the run's detector named ``detector``."""
        return self.detectors is None or detector in self.detectors

    def _flagged(self, centroids: torch.Tensor, name: str, row: int) -> list[Region]:
        """The regions at ``centroids [r, d]`` (inputs' units) with their most distinctive
        columns."""
        centroids = centroids.to("cpu", torch.float64)
        cols = self._columns or [f"x{j}" for j in range(centroids.shape[1])]
        sums = torch.tensor([e["sums"] for e in self._entries], dtype=torch.float64).sum(0)
        squares = torch.tensor([e["squares"] for e in self._entries], dtype=torch.float64).sum(0)
        n = sum(e["end"] - e["start"] for e in self._entries)
        mean = sums / n
        sd = ((squares - n * mean * mean).clamp_min(0) / max(n - 1, 1)).sqrt()
        out: list[Region] = []
        for c in centroids:
            z = torch.where(sd > 0, (c - mean) / sd, torch.zeros_like(c))
            top = z.abs().argsort(descending=True)[:3].tolist()
            out.append({"detector": name, "row": row,
                        "centroid": {cols[j]: float(c[j]) for j in range(c.numel())},
                        "distinctive": [{"column": cols[j], "value": float(c[j]),
                                         "z": float(z[j])} for j in top]})
        return out

    def _follow_recovery(self, rows: int, metric: float, end: int) -> None:
        """Update the mean metric of the last ``recovery_rows`` rows and settle the recovery
        of every alarm followed (pending or built)."""
        self._recent.append((rows, metric))
        self._recent_rows += rows
        self._recent_sum += metric
        m = self.recovery_rows
        while self._recent_rows - self._recent[0][0] >= m:  # running totals: O(1) a batch
            old_rows, old_sum = self._recent.popleft()
            self._recent_rows -= old_rows
            self._recent_sum -= old_sum
        n_recent = self._recent_rows
        recent = self._recent_sum / n_recent
        for pending in self._pending:
            if pending["recovered"] is None:
                self._settle(pending, recent, end - n_recent, end)
        still: list[_Built] = []
        for rec in self._recovering:
            report = self.reports[rec["report"]]
            if self._settle(rec, recent, end - n_recent, end):
                report["recovered"] = rec["recovered"]
                report["rows_to_recovery"] = rec["rows_to_recovery"]
                report["summary"] = summary(report)
            else:
                still.append(rec)
        self._recovering = still

    def _settle(self, rec: _Pending | _Recovery, recent: float, first: int, end: int) -> bool:
        """Whether the recovery of ``rec`` is now known: the mean over the last rows, all
        after the alarm, is back at the before window's metric, or ``horizon`` rows passed."""
        row, threshold = rec["row"], rec["threshold"]
        if not math.isfinite(threshold):
            return False
        if first >= row and end - first >= self.recovery_rows:
            back = recent >= threshold if self._task != "regression" else recent <= threshold
            if back:
                rec["recovered"], rec["rows_to_recovery"] = True, end - row
                return True
        if end - row >= self.horizon:
            rec["recovered"], rec["rows_to_recovery"] = False, end - row
            return True
        return False

    def _add(self, pending: _Pending) -> Report:
        report = self._build(pending)
        self.reports.append(report)
        if report["recovered"] is None:
            self._recovering.append({"report": len(self.reports) - 1, "row": report["row"],
                                     "threshold": pending["threshold"], "recovered": None,
                                     "rows_to_recovery": None})
        return report

    def on_end(self) -> None:
        """The runner's end hook (the stream's end): :meth:`finish`, then the copies of the
        model are let go (no alarm can come after the end)."""
        self.finish()
        self._references = {}
        self._restore = {}

    def finish(self) -> list[Report]:
        """Build the pending reports from the rows seen so far (e.g. at the end of a stream,
        when fewer than ``settle + window`` rows followed an alarm) and return all reports;
        recoveries still followed stay ``None``."""
        built = [self._add(pending) for pending in self._pending]
        self._pending = []
        if self.on_report is not None:
            for report in built:
                self.on_report(report)
        return self.reports

    # ----------------------------------------------------------------------- building
    def _build(self, pending: _Pending) -> Report:
        began = time.perf_counter()
        row, w = pending["row"], self.window
        cut = pending["cut"] if pending["cut"] is not None else math.inf
        before = [e for e in self._entries if e["start"] >= row - w and e["end"] <= row]
        a0 = row + self.settle
        after = [e for e in self._entries if e["start"] >= a0 and e["end"] <= min(a0 + w, cut)]
        n_b = sum(e["end"] - e["start"] for e in before)
        n_a = sum(e["end"] - e["start"] for e in after)
        n_inputs = len(self._entries[-1]["sums"]) if self._entries else 0
        shift = input_shift(([e["sums"] for e in before], [e["squares"] for e in before], n_b),
                            ([e["sums"] for e in after], [e["squares"] for e in after], n_a),
                            z_quantile(self.level, n_inputs))
        near = max(1, w // 4)
        partial: dict[str, list[str]] = {  # every such detector: checked, even with no alert
            name: [] for name in self._partial_detectors}
        for r, det, feature in self._partial:
            if row - near <= r < a0 + near and feature not in partial.setdefault(det, []):
                partial[det].append(feature)
        flagged = {f for features in partial.values() for f in features}
        columns = self._columns
        samples = (sample_rows(before), sample_rows(after))  # built once for every feature's test
        tested: dict[str, Distribution] = {}
        spec_of: dict[str, GroupSpec] = {}
        changes: list[Change] = []
        for k, explainer in enumerate(self.explainers):
            names = list(explainer.feature_names)
            groups = getattr(explainer, "groups", None)
            members = group_columns(getattr(groups, "members", None), len(names))
            specs = {n: list(m) for n, m in zip(names, members)}
            for feature in names:
                if feature not in tested:
                    spec_of[feature] = self._spec(feature, specs)
                    tested[feature] = distribution_test(
                        spec_of[feature], before, after, samples, len(names), level=self.level,
                        min_shift=self.min_shift)
            z = z_quantile(self.level, len(names))
            n_eff_b = max(1.0, n_b * float(explainer.alpha) / 2.0)
            n_eff_a = max(1.0, n_a * float(explainer.alpha) / 2.0)
            imp_b, hw_b = mean_bound([e["snapshots"][k] for e in before], len(names), z, n_eff_b)
            imp_a, hw_a = mean_bound([e["snapshots"][k] for e in after], len(names), z, n_eff_a)
            scale = max((abs(v) for v in imp_b + imp_a if math.isfinite(v)), default=0.0)
            for j, feature in enumerate(names):
                verdict, evidence = interval_verdict(imp_b[j], hw_b[j], imp_a[j], hw_a[j],
                                                     scale=scale, min_effect=self.min_effect)
                changes.append({
                    "explainer": self.explainer_names[k], "feature": feature,
                    "verdict": verdict,
                    "importance_before": imp_b[j], "importance_after": imp_a[j],
                    "bound_before": hw_b[j], "bound_after": hw_a[j], "evidence": evidence,
                    **shift.column(members[j], columns), **tested[feature],
                    "partial_drift": feature in flagged, "pdp_distance": math.nan,
                })
        changes.sort(key=lambda c: (c["verdict"] == "unchanged", -c["evidence"]))
        pairs = pair_changes(self.interaction_names,
                             [_pair_names(e) for e in self.interactions],
                             [float(e.alpha) for e in self.interactions], before, after,
                             level=self.level, min_effect=self.min_effect)
        changed = {c["feature"] for c in changes if c["verdict"] != "unchanged"}
        curves = self._curves(pending, changed)
        distance = {c["feature"]: c["distance"] for c in curves}
        for c in changes:
            c["pdp_distance"] = distance.get(c["feature"], math.nan)
        m_b, se_b = window_metric(before)
        m_a, _ = window_metric(after)
        first = min(w, self.settle) if self.settle else w  # the rows right after the alarm
        right_after = [e for e in self._entries
                       if e["start"] >= row and e["end"] <= min(row + first, cut)]
        m_f, se_f = window_metric(right_after)
        worse = (m_b - m_f) if self._task != "regression" else (m_f - m_b)
        z_metric = z_quantile(self.level, 1)
        margin = z_metric * math.hypot(se_b, se_f)
        dropped = bool(math.isfinite(worse) and worse > margin)
        improved = bool(math.isfinite(worse) and -worse > margin)
        soon = [e for e in right_after if e["end"] <= row + self.recovery_rows]
        conditional = self._conditional(pending, before, soon, z_metric, tested, spec_of,
                                        min(a0 + w, cut))
        moved = any(d["input_moved"] for d in tested.values())
        kind = classify(warm_up=row < w, moved=moved, dropped=dropped, improved=improved,
                        changed=bool(changed), lost=any(c["verdict"] == "lost" for c in changes),
                        conditional_changed=None if conditional is None else
                        conditional["changed"],
                        accuracy_dropped=conditional is not None
                        and conditional["accuracy_dropped"])
        report: Report = {
            "row": int(row), "detector": pending["detector"], "also": list(pending["also"]),
            "summary": "", "kind": kind,
            "metric": "accuracy" if self._task != "regression" else "squared error",
            "metric_before": m_b, "metric_right_after": m_f, "metric_after": m_a,
            "metric_dropped": dropped, "metric_improved": improved,
            "rows_to_recovery": pending["rows_to_recovery"], "recovered": pending["recovered"],
            "rows_before": n_b, "rows_after": n_a, "settle": self.settle,
            "cut_at": pending["cut"], "conditional": conditional,
            "inputs_moved": moved,
            "share_moved": (sum(d["input_moved"] for d in tested.values()) / len(tested)
                            if tested else math.nan),
            "changes": changes, "interactions": pairs, "curves": curves,
            "where": {"partial": partial,
                      "regions": [r for r in self._regions
                                  if row - near <= r["row"] < a0 + near][:5]},
            "build_ms": 0.0,
        }
        report["summary"] = summary(report)
        report["build_ms"] = 1000.0 * (time.perf_counter() - began)
        return report

    def _spec(self, feature: str, specs: Mapping[str, list[int]]) -> GroupSpec:
        """The feature's columns and kind (numeric, nullable, one-hot block)."""
        columns = self._columns
        return group_spec(feature, specs,
                          columns if len(columns) > max(max(c) for c in specs.values()) else None)

    def _conditional(self, pending: _Pending, before: list[Entry], soon: list[Entry],
                     z: float, tested: Mapping[str, Distribution],
                     spec_of: Mapping[str, GroupSpec], last: float) -> Conditional | None:
        """The test of ``P(y|x)`` (module docstring): the reference model's calibration gap on
        the rows after the alarm (up to row ``last``) against its gap on the rows before it,
        reweighted to the moved input; without a reference model the prequential gap of the
        ``soon`` rows against the before window's. None for a regression or outputs that are
        not probabilities."""
        n_b = sum(e["end"] - e["start"] for e in before)
        n_f = sum(e["end"] - e["start"] for e in soon)
        g_b, se_b = sample_mean_se(sum(e["gap"] for e in before),
                                   sum(e["gap_sq"] for e in before), n_b)
        g_f, se_f = sample_mean_se(sum(e["gap"] for e in soon),
                                   sum(e["gap_sq"] for e in soon), n_f)
        if self._task == "regression" or not (math.isfinite(g_b) and math.isfinite(g_f)):
            return None
        m_b, sm_b = window_metric(before)
        m_f, sm_f = window_metric(soon)
        row, reference = pending["row"], pending.get("reference")
        model = self._references.get(reference) if reference is not None else None
        by = max(((d["input_statistic"], f) for f, d in tested.items() if d["input_moved"]),
                 default=(0.0, None))[1]
        found = None if model is None else self._reference_test(
            model, cast(int, reference), row, last, spec_of[by] if by is not None else None)
        note = ""
        if found is not None:
            drop, accuracy = found
            test, stratified = "reference model", by
        else:
            reason = (self._reference_error if self._reference_error is not None else
                      "no copy of the model was taken in the window before the row" if
                      model is None else "too few kept rows a side for the reference model")
            note = f"{reason}: the prequential gap of the rows right after the row instead"
            drop = GapDrop(g_b, g_b, g_f, g_b - g_f, math.hypot(se_b, se_f), n_b, n_f, 0)
            accuracy, test, stratified, reference = m_f, "right after the row", None, None
        return {"test": test, "note": note, "model_row": reference,
                "stratified_by": stratified, "rows_before": drop.rows_before,
                "rows": drop.rows_after, "rows_left_out": drop.rows_left_out,
                "gap_before": drop.gap_before, "gap_expected": drop.expected,
                "gap_after": drop.gap_after, "accuracy": accuracy,
                "expected": accuracy + drop.drop,
                "z": (drop.drop / drop.se if drop.se > 0 else
                      math.inf if drop.drop > 0 else 0.0),
                "changed": bool(drop.drop > z * drop.se and drop.drop >= self.min_conditional),
                "rows_right_after": n_f, "accuracy_right_after": m_f,
                "accuracy_dropped": bool(m_b - m_f > z * math.hypot(sm_b, sm_f))}

    def _reference_test(self, model: ModelFn, reference: int, row: int, last: float,
                        spec: GroupSpec | None) -> tuple[GapDrop, float] | None:
        """The reference model's calibration gap on the kept rows from its own row to the
        alarm's against the kept rows from the alarm's to ``last``, reweighted by the cells of
        ``spec`` (the moved feature; None: no input moved), and its accuracy on the after rows
        used; None with fewer than two rows a side."""
        before = [e for e in self._entries if e["start"] >= reference and e["end"] <= row]
        after = [e for e in self._entries if e["start"] >= row and e["end"] <= last]
        Xb, Xa = sample_rows(before), sample_rows(after)
        if Xb.shape[0] < 2 or Xa.shape[0] < 2:
            return None
        right_b, gap_b = self._scored(model, Xb, window_labels(before))
        right_a, gap_a = self._scored(model, Xa, window_labels(after))
        found = cells(spec, Xb, Xa) if spec is not None else (None, None)
        drop = reweighted_gap(gap_b, gap_a, *found)
        if not math.isfinite(drop.drop):
            return None
        return drop, reweighted_gap(right_b, right_a, *found).gap_after

    def _scored(self, model: ModelFn, X: torch.Tensor, y: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """A model's 0/1 correctness and calibration gap (correct less its largest class
        probability) on the rows ``X`` with labels ``y`` (in chunks of 4,096 rows)."""
        dtype, device = self._input
        with torch.no_grad():
            out = torch.cat([model(X[i:i + 4096].to(device, dtype)).detach().to(
                "cpu", torch.float64) for i in range(0, X.shape[0], 4096)])
        right = (out.argmax(1) == y.long()).to(torch.float64)
        return right, right - out.max(1).values

    def _curves(self, pending: _Pending, changed: set[str]) -> list[Curve]:
        """The PD curves at the alarm and now (the iPDPs', then the computed ones), changed
        features first."""
        out: list[Curve] = []
        for pdp, name, then in zip(self.pdps, self.pdp_names, pending["curves"]):
            now = _curve(pdp)
            grid_b = [float(v) for v in then["grid"]]
            pd_b = [float(v) for v in then["pd"]]
            grid_a, pd_a = [float(v) for v in now["grid"]], [float(v) for v in now["pd"]]
            distance, level = curve_difference(grid_b, pd_b, grid_a, pd_a)
            out.append({"explainer": name, "feature": pdp.feature_name,
                        "output": self._output_label(pdp.output_index, ipdp=True),
                        "labels_before": [str(v) for v in then["labels"]],
                        "labels_after": [str(v) for v in now["labels"]],
                        "grid_before": grid_b, "pd_before": pd_b,
                        "grid_after": grid_a, "pd_after": pd_a,
                        "distance": distance, "level_shift": level,
                        "verdict_changed": pdp.feature_name in changed})
        _, now_pd, _ = self._pd_now(pending["grids"], pending["output"])
        what = self._output_label(pending["output"])
        for feature, then_pd in pending["pd"].items():
            now_curve = now_pd.get(feature)
            if now_curve is None:
                continue
            grid_b = [float(v) for v in then_pd["grid"]]
            pd_b = [float(v) for v in then_pd["pd"]]
            grid_a = [float(v) for v in now_curve["grid"]]
            pd_a = [float(v) for v in now_curve["pd"]]
            distance, level = curve_difference(grid_b, pd_b, grid_a, pd_a)
            out.append({"explainer": "pd", "feature": feature, "output": what,
                        "labels_before": list(then_pd["labels"]),
                        "labels_after": list(now_curve["labels"]),
                        "grid_before": grid_b, "pd_before": pd_b,
                        "grid_after": grid_a, "pd_after": pd_a,
                        "distance": distance, "level_shift": level,
                        "verdict_changed": feature in changed})
        out.sort(key=lambda c: not c["verdict_changed"])
        return out

    # ----------------------------------------------------------------------- output
    def to_json(self, indent: int | None = 2) -> str:
        """``{"alarms": [report, ...]}`` as JSON (non-finite numbers as ``null``)."""
        return reports_to_json(self.reports, indent)

    def to_markdown(self, figures: Mapping[int, Sequence[tuple[str, str]]] | None = None
                    ) -> str:
        """The reports as markdown (``figures[i]``: ``(caption, path)`` of report ``i``)."""
        return to_markdown(self.reports, figures)

    def state_dict(self) -> dict[str, object]:
        return {
            "settings": self._settings(),
            "entries": [dict(e) for e in self._entries],
            "pending": json.loads(json.dumps(json_safe(self._pending))),
            "recovering": json.loads(json.dumps(json_safe(self._recovering))),
            "recent": [list(r) for r in self._recent],
            "recent_totals": [self._recent_rows, self._recent_sum],
            "partial": [list(p) for p in self._partial],
            "partial_detectors": list(self._partial_detectors),
            "regions": json.loads(json.dumps(json_safe(self._regions))),
            "next_known": self._next_known,
            "task": self._task,
            "seconds": self.seconds,
            "rows": self._ring[: min(self._ring_n, self.pd_rows)].tolist(),
            "rows_written": self._ring_n,
            "reports": json.loads(json.dumps(json_safe(self.reports))),
            # the copies of the model: a state dict each (a model without one: itself)
            "references": {str(r): m for r, m in sorted(self._restore.items())} | {
                str(r): _model_state(m) for r, m in sorted(self._references.items())},
            "next_reference": self._next_reference,
            "reference_error": self._reference_error,
        }

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        self._check_settings(state)
        self._reset()
        self._entries = deque(dict(e) for e in state["entries"])  # type: ignore[misc, attr-defined]
        self._pending = [cast(_Pending, nan_back(p)) for p in state["pending"]]  # type: ignore[attr-defined]
        self._recovering = [cast(_Built, nan_back(r)) for r in state["recovering"]]  # type: ignore[attr-defined]
        self._recent = deque((int(n), float(s)) for n, s in state["recent"])  # type: ignore[attr-defined]
        totals = state.get("recent_totals")
        if totals is None:  # a state saved before the totals were kept
            totals = [sum(n for n, _ in self._recent), sum(v for _, v in self._recent)]
        self._recent_rows, self._recent_sum = int(totals[0]), float(totals[1])  # type: ignore[index]
        self._partial = [(int(r), str(d), str(f)) for r, d, f in state["partial"]]  # type: ignore[attr-defined]
        self._partial_detectors = [str(d) for d in state["partial_detectors"]]  # type: ignore[attr-defined]
        self._regions = [cast(Region, nan_back(r)) for r in state["regions"]]  # type: ignore[attr-defined]
        self._next_known = int(state["next_known"])  # type: ignore[call-overload]
        task = state["task"]
        self._task = None if task is None else str(task)
        self.seconds = float(state["seconds"])  # type: ignore[arg-type]
        rows = state.get("rows") or []
        self._ring = torch.empty(0, dtype=torch.float64)
        self._ring_n = 0
        if rows:
            kept = torch.tensor(rows, dtype=torch.float64)
            self._ring = torch.empty(self.pd_rows, kept.shape[1], dtype=torch.float64)
            self._ring[: kept.shape[0]] = kept
            self._ring_n = int(state["rows_written"])  # type: ignore[call-overload]
        self.reports = [cast(Report, nan_back(r)) for r in state["reports"]]  # type: ignore[attr-defined]
        references = cast(Mapping[str, object], state.get("references") or {})
        self._restore = {int(r): m for r, m in references.items()}
        self._next_reference = int(state.get("next_reference", self.reference_every))  # type: ignore[call-overload]
        error = state.get("reference_error")
        self._reference_error = None if error is None else str(error)
