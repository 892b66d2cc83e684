"""The shape of a drift report and its renderings: the one-line summary, markdown and JSON
(used by :mod:`torchstream.report.reporter` and ``torchstream report``)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TypedDict, cast

from torchstream.report.stats import Column, Distribution

__all__ = [
    "Also",
    "Change",
    "Conditional",
    "Curve",
    "PairChange",
    "Region",
    "Report",
    "from_json",
    "json_safe",
    "nan_back",
    "reports_to_json",
    "summary",
    "to_markdown",
]


class Change(Column, Distribution):
    """One feature's entry in a report: its importance before / after, how its input moved,
    whether ERICS saw a partial drift on it and how far its PD curve moved."""

    explainer: str
    feature: str
    verdict: str
    importance_before: float
    importance_after: float
    bound_before: float
    bound_after: float
    evidence: float
    partial_drift: bool
    pdp_distance: float


class PairChange(TypedDict):
    """One pair's entry in a report: its interaction (an
    :class:`~torchstream.explain.IncrementalInteraction`'s SII) before / after with their
    bounds and the verdict of the interval rule (``"gained"`` / ``"lost"``: the intervals are
    apart and ``|SII|`` grew / shrank; ``"not compared"``: a window has no estimate of the
    pair)."""

    explainer: str
    features: list[str]
    verdict: str
    value_before: float
    value_after: float
    bound_before: float
    bound_after: float
    evidence: float


class Curve(TypedDict):
    """A feature's PD curve (an iPDP's, or the model's over the last rows) at the alarm and at
    the end of the after window; ``output`` says what it shows (``"P(class 1)"``)."""

    explainer: str
    feature: str
    output: str
    labels_before: list[str]
    labels_after: list[str]
    grid_before: list[float]
    pd_before: list[float]
    grid_after: list[float]
    pd_after: list[float]
    distance: float
    level_shift: float
    verdict_changed: bool


class Region(TypedDict):
    """A CDLEEDS neighbourhood that flagged a local change: its centroid and the columns where
    it lies furthest from the before window's mean (``z`` in the window's standard deviations)."""

    detector: str
    row: int
    centroid: dict[str, float]
    distinctive: list[dict[str, float | str]]


class Where(TypedDict):
    """Where the change is: features with an ERICS partial alert (per detector) and the CDLEEDS
    regions that flagged a local change."""

    partial: dict[str, list[str]]
    regions: list[Region]


class Also(TypedDict):
    """Alarms of a detector that joined a report, at every row from ``first`` to ``last``,
    and why (``"the same change"``, or that they came while the model adapted to the
    report's change)."""

    detector: str
    first: int
    last: int
    note: str


class Conditional(TypedDict):
    """The test of ``P(y|x)`` (classification; the maths in
    :mod:`~torchstream.report.reporter`). ``test`` ``"reference model"``: the copy of the
    model taken at ``model_row`` scored on the kept rows from that row to the alarm's
    (``rows_before``) and after it (``rows``; ``rows_left_out``: after rows whose cell of the
    moved feature ``stratified_by`` held too few before rows); ``"right after the row"``: the
    learner's own predictions before and right after the row (``note`` says why there was no
    reference model). ``gap_before`` / ``gap_after``: the mean calibration gap (correct less
    the largest class probability) a side, ``gap_expected`` the gap the after rows would have
    under the old ``P(y|x)`` (the before rows reweighted to the after rows' cells of the moved
    feature; ``gap_before`` when no input moved); ``accuracy`` over the after rows and the
    ``expected`` accuracy (``accuracy + gap_expected - gap_after``); ``z`` the drop
    ``gap_expected - gap_after`` in standard errors and ``changed`` when it is significant and
    at least the effect floor. ``accuracy_right_after`` over the ``rows_right_after`` rows
    right after the row, ``accuracy_dropped`` when it is below the before window's by more than
    ``z`` standard errors."""

    test: str
    note: str
    model_row: int | None
    stratified_by: str | None
    rows_before: int
    rows: int
    rows_left_out: int
    gap_before: float
    gap_expected: float
    gap_after: float
    accuracy: float
    expected: float
    z: float
    changed: bool
    rows_right_after: int
    accuracy_right_after: float
    accuracy_dropped: bool


class Report(TypedDict):
    """A drift report (the JSON shape of :attr:`DriftReporter.reports`)."""

    row: int
    detector: str
    also: list[Also]
    summary: str
    kind: str
    metric: str
    metric_before: float
    metric_right_after: float
    metric_after: float
    metric_dropped: bool
    metric_improved: bool
    rows_to_recovery: int | None
    recovered: bool | None
    rows_before: int
    rows_after: int
    settle: int
    cut_at: int | None
    conditional: Conditional | None
    inputs_moved: bool
    share_moved: float
    changes: list[Change]
    interactions: list[PairChange]
    curves: list[Curve]
    where: Where
    build_ms: float


_KINDS = {"real": "real drift (the relationship between inputs and label changed)",
          "virtual": "virtual drift (the inputs moved, the reliance did not)",
          "none": "no change found in reliance or inputs",
          "warm-up": "warm-up (the model was still new: not reported as a drift)",
          "learning": "learning (better predictions on unchanged inputs: not a drift)"}


def _fmt(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else "nan"


def _names(items: Sequence[str]) -> str:
    return ", ".join(f"`{f}`" for f in dict.fromkeys(items))


def _cost(r: Report) -> str:
    metric = f"{r['metric']} {_fmt(r['metric_before'])} → {_fmt(r['metric_right_after'])}"
    if r["settle"]:
        metric += f" right after, {_fmt(r['metric_after'])} {r['settle']:,} rows later"
    if not r["metric_dropped"]:
        return metric + " (no significant loss)"
    if r["recovered"] is None:
        return metric
    if r["recovered"]:
        return f"{metric}, recovered after {r['rows_to_recovery']:,} rows"
    return f"{metric}, not recovered after {r['rows_to_recovery']:,} rows"


_WORDS = {"gained": "more", "lost": "less"}


def reliance(changes: Sequence[Change]) -> str:
    """Which explainer says what, feature by feature (changed features only, in the order of
    ``changes``), e.g. "more on `elevel` (ipfi, isage), less on `age` (isage; ipfi:
    unchanged)"; "" when no verdict changed."""
    said: dict[str, dict[str, list[str]]] = {}
    for c in changes:
        said.setdefault(c["feature"], {}).setdefault(c["verdict"], []).append(c["explainer"])
    parts = []
    for feature, by in said.items():
        moved = [v for v in ("gained", "lost") if v in by]
        if not moved:
            continue
        if len(moved) == 2:
            who = "; ".join(f"{e}: {_WORDS[v]}" for v in moved for e in by[v])
            parts.append(f"`{feature}` both ways ({who})")
            continue
        who = ", ".join(by[moved[0]])
        if by.get("unchanged"):
            who += "; " + ", ".join(by["unchanged"]) + ": unchanged"
        parts.append(f"{_WORDS[moved[0]]} on `{feature}` ({who})")
    return ", ".join(parts)


def pair_text(pairs: Sequence[PairChange]) -> str:
    """The pairs that gained or lost interaction, e.g. "interaction more between `x1` and
    `x2` (interactions), less between `x0` and `x1` (interactions)"; "" when none did."""
    parts = [f"{_WORDS[p['verdict']]} between `{p['features'][0]}` and `{p['features'][1]}` "
             f"({p['explainer']})" for p in pairs if p["verdict"] in _WORDS]
    return "interaction " + ", ".join(parts) if parts else ""


def summary(r: Report) -> str:
    """One plain-language line, e.g. "after row 5,000 the model relies more on `elevel` (ipfi,
    isage), less on `age` (isage; ipfi: unchanged); inputs unchanged; accuracy 0.93 → 0.71,
    recovered after 1,800 rows"; a ``warm-up`` or ``learning`` report says why it is not a
    drift. Pairs that gained or lost interaction follow the reliance ("...; interaction more
    between `x1` and `x2` (interactions)")."""
    said = reliance(r["changes"])
    pairs = pair_text(r["interactions"])
    cut = (f"; windows end at the next change, row {r['cut_at']:,}"
           if r["cut_at"] is not None else "")
    metric = (f"{r['metric']} {_fmt(r['metric_before'])} → "
              f"{_fmt(r['metric_right_after'])} right after")
    if r["kind"] == "warm-up":
        return (f"alarm at row {r['row']:,} while the model was still new (within the "
                f"stream's first report window): {metric}; not reported as a drift" +
                (f" (its reliance changes as it learns: {said})" if said else "") +
                (f"; {pairs}" if pairs else "") + cut)
    if r["kind"] == "learning":
        return (f"after row {r['row']:,} the model is still learning: {metric} on unchanged "
                f"inputs; not reported as a drift" +
                (f" (its reliance changes as it converges: {said})" if said else "") +
                (f"; {pairs}" if pairs else "") + cut)
    if r["kind"] == "virtual" and said:  # P(y|x) held: the reliance followed the inputs
        reliance_text = f"the model's reliance moved with the inputs ({said})"
    elif said:
        reliance_text = f"the model relies {said}"
    else:
        reliance_text = "the model's feature reliance is unchanged"
    if not said and r["kind"] == "real":
        reliance_text += " but it predicts the same inputs worse (the relationship changed)"
    if pairs:
        reliance_text += f"; {pairs}"
    moved = {c["feature"]: c for c in r["changes"] if c["input_moved"]}
    inputs = ("inputs moved: " + ", ".join(
        f"`{f}` ({c['input_test']} {_fmt(c['input_statistic'])})" for f, c in moved.items())
        if moved else "inputs unchanged")
    out = f"after row {r['row']:,} {reliance_text}; {inputs}; {_cost(r)}"
    cond = r["conditional"]
    if cond is not None:
        who = (f"the model of row {cond['model_row']:,}" if cond["model_row"] is not None
               else "the model")
        out += (f"; P(y|x) changed: {who} is right on {_fmt(cond['accuracy'])} of "
                f"{cond['rows']:,} rows sampled after it where its confidence and its record "
                f"before it predict {_fmt(cond['expected'])}" if cond["changed"] else
                f"; {who} is right on {_fmt(cond['accuracy'])} of {cond['rows']:,} rows "
                f"sampled after it, as its confidence predicts" if r["kind"] == "real" else
                "; P(y|x) unchanged (accuracy as the model's confidence predicts)")
    out += cut
    partial = [f for features in r["where"]["partial"].values() for f in features]
    if partial:
        out += f"; ERICS partial drift on {_names(partial)}"
    regions = r["where"]["regions"]
    if regions:
        first = regions[0]["distinctive"][:2]
        around = ", ".join(f"`{d['column']}` ≈ {_fmt(float(d['value']))}" for d in first)
        n = len(regions)
        out += f"; local change in {n} region{'s' if n > 1 else ''}" + \
            (f" (around {around})" if around else "")
    return out


def to_markdown(reports: Sequence[Report],
                figures: Mapping[int, Sequence[tuple[str, str]]] | None = None) -> str:
    """One section per report: its summary, a table of the changes, the PD curves' distances,
    the regions, and the figures ``figures[i]`` of report ``i`` as ``(caption, relative path)``."""
    out: list[str] = ["# Drift report", ""]
    if not reports:
        out.append("No alarm and no known drift in this run: nothing to report.")
    for i, r in enumerate(reports):
        out.append(f"## Row {r['row']:,} ({r['detector']}): {_KINDS.get(r['kind'], r['kind'])}\n")
        out.append(r["summary"] + "\n")
        for also in r["also"]:
            rows = (f"row {also['first']:,}" if also["first"] == also["last"] else
                    f"every row from {also['first']:,} to {also['last']:,}")
            out.append(f"Also alarmed: {also['detector']} at {rows}, {also['note']}.\n")
        out.append(f"Windows: {r['rows_before']:,} rows before the row, {r['rows_after']:,} rows "
                   f"after it (starting {r['settle']:,} rows after it); built in "
                   f"{r['build_ms']:.1f} ms.\n")
        if r["kind"] == "warm-up":  # nothing to read in the tables of a model still new
            for caption, path in (figures or {}).get(i, ()):
                out.append(f"\n![{caption}]({path})")
            out.append("")
            continue
        erics = bool(r["where"]["partial"])  # the column only where an ERICS detector ran
        cond = r["conditional"]
        if cond is not None:
            model = (f"the model of row {cond['model_row']:,}" if cond["model_row"] is not None
                     else "the learner right after the row")
            weighted = (f", {_fmt(cond['gap_expected'])} reweighted to `"
                        f"{cond['stratified_by']}` after" if cond["stratified_by"] else "")
            note = f"; {cond['note']}" if cond["note"] else ""
            out.append(f"P(y|x): {'changed' if cond['changed'] else 'unchanged'} (calibration "
                       f"gap of {model}: {_fmt(cond['gap_before'])} on {cond['rows_before']:,} "
                       f"rows before{weighted}, {_fmt(cond['gap_after'])} on {cond['rows']:,} "
                       f"rows after, z {_fmt(cond['z'])}{note}).\n")
        if math.isfinite(r["share_moved"]):
            out.append(f"Inputs moved: {100 * r['share_moved']:.0f} % of the features.\n")
        out.append("| explainer | feature | verdict | before | after | input test (p) "
                   + ("| ERICS partial " if erics else "") + "| PD distance |")
        out.append("|---|---|---|---|---|---|" + ("---|" if erics else "") + "---|")
        for c in r["changes"]:
            moved = " (moved)" if c["input_moved"] else ""
            partial = f" {'yes' if c['partial_drift'] else 'no'} |" if erics else ""
            out.append(
                f"| {c['explainer']} | {c['feature']} | {c['verdict']} | "
                f"{_fmt(c['importance_before'])} ± {_fmt(c['bound_before'])} | "
                f"{_fmt(c['importance_after'])} ± {_fmt(c['bound_after'])} | "
                f"{c['input_test']} {_fmt(c['input_statistic'])} (p {_fmt(c['input_p'])})"
                f"{moved} |{partial} "
                f"{_fmt(c['pdp_distance'])} |")
        out.append("")
        if r["interactions"]:
            out.append("| explainer | pair | verdict | interaction before | after |")
            out.append("|---|---|---|---|---|")
            for p in r["interactions"]:
                out.append(f"| {p['explainer']} | {p['features'][0]} × {p['features'][1]} | "
                           f"{p['verdict']} | {_fmt(p['value_before'])} ± "
                           f"{_fmt(p['bound_before'])} | {_fmt(p['value_after'])} ± "
                           f"{_fmt(p['bound_after'])} |")
            out.append("")
        for curve in r["curves"]:
            mark = " (its importance changed)" if curve["verdict_changed"] else ""
            out.append(f"- PD of `{curve['feature']}` ({curve['explainer']}, {curve['output']}): "
                       f"its shape moved by "
                       f"{_fmt(curve['distance'])} (root mean square), its level by "
                       f"{_fmt(curve['level_shift'])}{mark}")
        for region in r["where"]["regions"]:
            where = ", ".join(f"`{d['column']}` = {_fmt(float(d['value']))} "
                              f"(z {_fmt(float(d['z']))})" for d in region["distinctive"])
            out.append(f"- local change ({region['detector']}, row {region['row']:,}) around "
                       f"{where}")
        for caption, path in (figures or {}).get(i, ()):
            out.append(f"\n![{caption}]({path})")
        out.append("")
    return "\n".join(out)


def json_safe(value: object) -> object:
    """``value`` with every non-finite float as None (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def reports_to_json(reports: Sequence[Report], indent: int | None = 2) -> str:
    """``{"alarms": [report, ...]}`` as JSON (non-finite numbers as ``null``)."""
    return json.dumps({"alarms": json_safe(list(reports))}, indent=indent)


_MAYBE_NONE = ("rows_to_recovery", "recovered", "cut", "cut_at", "conditional", "model_row",
               "stratified_by", "reference")


def nan_back(value: object, key: str = "") -> object:
    """``value`` read back from :func:`json_safe`'s form: ``null`` numbers become NaN, except
    in the fields where None has its own meaning (``rows_to_recovery``, ``recovered``)."""
    if value is None:
        return None if key in _MAYBE_NONE else math.nan
    if isinstance(value, Mapping):
        return {k: nan_back(x, k) for k, x in value.items()}
    if isinstance(value, list):
        return [nan_back(x) for x in value]
    return value


def from_json(text: str) -> list[Report]:
    """The reports of :func:`reports_to_json`'s text."""
    data = json.loads(text)
    if not isinstance(data, Mapping) or not isinstance(data.get("alarms"), list):
        raise ValueError('a drift report file holds {"alarms": [...]}')
    for i, r in enumerate(data["alarms"]):
        missing = [k for k in Report.__annotations__ if not isinstance(r, Mapping) or k not in r]
        if missing:
            raise ValueError(f"alarm {i} has no {', '.join(missing)}")
    return [cast(Report, nan_back(r)) for r in data["alarms"]]
