"""Every output of a run checked against an independent computation on the same rows: the drift
report's PD curves (each curve's grid from its own column, its PD recomputed from the model),
the alarms (the detector, the printed lines, report.json, TensorBoard's scalars and the result
JSON name the same rows), the importances (result JSON, printed table and TensorBoard's last
points equal the explainers' final state); on the default stream and on a CSV with a
categorical feature."""

from __future__ import annotations

import copy
import csv
import importlib
import json
import math
import tomllib
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

from torchstream import OnlineClassifier, Prequential
from torchstream.cli import main
from torchstream.reproductions import _runner
from torchstream.step import Batch
from torchstream.report.reporter import DriftReporter
from torchstream.explain import IncrementalPFI
from torchstream.models import MLP
from torchstream.sinks.base import escape_run_name
from torchstream.streams import make_synthetic

N, ALPHA, WINDOW = 3000, 0.01, 200  # the default stream's drift at row 1,500; window 2 / alpha
QS = torch.linspace(0.05, 0.95, 20, dtype=torch.float64)


def _stream_rows(n: int = N) -> tuple[torch.Tensor, list[str]]:
    stream = make_synthetic("agrawal-drift", n_samples=n, seed=0)
    (X, _), = stream.batches(n)  # float32, as the runner feeds them
    return X.to(torch.float64), list(stream.schema.columns)


def _scalars(logdir: Path) -> EventMultiplexer:
    mux = EventMultiplexer(size_guidance={"scalars": 0})
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    return mux


def _rises(points) -> list[int]:
    """The steps where a counting series (alarms so far) goes up, the first point included."""
    out = [points[0].step] if points and points[0].value > 0 else []
    return out + [e.step for e, before in zip(points[1:], points) if e.value > before.value]


def _reported_rows(report: dict, detector: str) -> set[int]:
    """The rows of ``detector``'s alarms in report.json: a report's row, or joined (also)."""
    rows = {r["row"] for r in report["alarms"] if r["detector"] == detector}
    for r in report["alarms"]:
        for a in r["also"]:
            if a["detector"] == detector:
                rows |= set(range(a["first"], a["last"] + 1))
    return rows


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("default")
    logdir, result = tmp / "run", tmp / "result.json"
    argv = ["run", "--n-samples", str(N), "--explain-alpha", str(ALPHA), "--detect", "adwin",
            "--report", "--logdir", str(logdir), "--result-json", str(result), "--no-progress"]
    return logdir, json.loads(result.read_text()) if main(argv) == 0 else None


def test_default_run_pd_curves_come_from_their_own_columns(default_run):
    """Each curve's grid lies in its own column's range (the bug: `elevel` (0..4) drawn over
    age's 22..77), and every feature without an iPDP has a curve."""
    logdir, _ = default_run
    X, columns = _stream_rows()
    report = json.loads((logdir / "report.json").read_text())
    assert report["alarms"]
    for r in report["alarms"]:
        assert sorted(c["feature"] for c in r["curves"]) == sorted(columns)
        for c in r["curves"]:
            j = columns.index(c["feature"])
            low, high = float(X[:, j].min()), float(X[:, j].max())
            for grid in (c["grid_before"], c["grid_after"]):
                finite = [g for g in grid if g is not None and math.isfinite(g)]
                assert finite and low <= min(finite) and max(finite) <= high, c["feature"]
            if c["explainer"] == "pd":  # the model's PD: quantiles of the column's last rows
                assert len(c["grid_before"]) >= 2


def test_default_run_alarms_are_the_same_rows_everywhere(default_run, capsys):
    logdir, result = default_run
    alarms = result["alarms"]["drift_adwin"]
    assert alarms and result["known_drifts"] == [N // 2]
    report = json.loads((logdir / "report.json").read_text())
    assert _reported_rows(report, "drift_adwin") == set(alarms)
    assert [r["row"] for r in report["alarms"] if r["detector"] == "known"] == [N // 2]
    mux = _scalars(logdir)
    assert _rises(mux.Scalars("mlp", "alarms/drift_adwin")) == alarms
    assert _rises(mux.Scalars("mlp", "drifts/known")) == [N // 2]


def test_default_run_importances_agree(default_run):
    """Result JSON == TensorBoard's last point of each feature (float32) for iPFI and iSAGE."""
    logdir, result = default_run
    mux = _scalars(logdir)
    for explainer in ("ipfi", "isage"):
        values = result["explanations"][explainer]
        for feature, value in values.items():
            points = mux.Scalars(f"feature/{escape_run_name(feature)}",
                                 f"importance/{explainer}")
            assert points[-1].step == N
            assert points[-1].value == pytest.approx(value, rel=1e-6, abs=1e-7)


def test_warm_up_alarm_is_not_a_drift(tmp_path, capsys):
    """An alarm in the first window is a warm-up: not called a drift, in every output."""
    logdir = tmp_path / "run"
    assert main(["run", "--n-samples", "1200", "--explain-alpha", "0.01", "--report",
                 "--report-at", "100", "--logdir", str(logdir), "--no-progress"]) == 0
    out = capsys.readouterr().out
    report = json.loads((logdir / "report.json").read_text())
    early = next(r for r in report["alarms"] if r["row"] == 100)
    assert early["kind"] == "warm-up"
    assert "not reported as a drift" in early["summary"] and "relies" not in early["summary"]
    assert f"[report_at] {early['summary']}" in out or early["summary"] in out
    md = (logdir / "report.md").read_text()
    assert "## Row 100 (" in md and "warm-up" in md


def test_known_drift_line_says_which_drifts_the_run_passed(tmp_path, capsys):
    assert main(["run", "--n-samples", "800", "--steps", "50", "--logdir", str(tmp_path / "r"),
                 "--no-progress", "--explain", "none"]) == 0
    out = capsys.readouterr().out
    assert "known drifts at rows [] (the stream's drifts at rows [400] lie beyond the run's 200 " \
           "rows)" in out


# --------------------------------------------------------------- a CSV with a categorical
def _write_csv(path: Path, n: int = 1600) -> None:
    g = torch.Generator().manual_seed(3)
    colours = ["red", "green", "blue"]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["size", "colour", "weight", "label"])
        for t in range(n):
            size = float(torch.rand((), generator=g)) * 10
            colour = colours[int(torch.randint(0, 3, (), generator=g))]
            weight = 50 + float(torch.randn((), generator=g)) * 5
            # the label follows size before row n / 2 and the colour after it
            label = int(size > 5) if t < n // 2 else int(colour == "blue")
            w.writerow([f"{size:.3f}", colour, f"{weight:.2f}", label])


def test_csv_run_curves_and_outputs_agree(tmp_path, capsys):
    data = tmp_path / "data.csv"
    _write_csv(data)
    logdir, result_path = tmp_path / "run", tmp_path / "result.json"
    assert main(["run", "--stream", str(data), "--target", "label", "--explain-alpha", "0.01",
                 "--report", "--report-at", "800", "--detect", "adwin", "--logdir",
                 str(logdir), "--result-json", str(result_path), "--no-progress"]) == 0
    result = json.loads(result_path.read_text())
    report = json.loads((logdir / "report.json").read_text())
    at = next(r for r in report["alarms"] if r["row"] == 800)
    curves = {c["feature"]: c for c in at["curves"]}
    assert set(curves) == {"size", "colour", "weight"}
    # the categorical curve: one point per category, labelled with the CSV's categories
    assert sorted(curves["colour"]["labels_before"]) == ["blue", "green", "red"]
    assert all(g is None for g in curves["colour"]["grid_before"])
    # the numeric curves on their own columns' ranges
    rows = list(csv.DictReader(data.open()))
    for name in ("size", "weight"):
        values = [float(r[name]) for r in rows]
        grid = [g for g in curves[name]["grid_before"] if g is not None]
        assert min(values) <= min(grid) and max(grid) <= max(values), name
    # the drift moved the reliance from size to colour, and both explainers say which
    assert at["kind"] == "real"
    lost = {c["explainer"] for c in at["changes"] if c["feature"] == "size"
            and c["verdict"] == "lost"}
    assert lost and all(f"({e}" in at["summary"] or f", {e}" in at["summary"] for e in lost)
    # alarms and importances: the same rows and values in every output
    assert _reported_rows(report, "drift_adwin") == set(result["alarms"]["drift_adwin"])
    mux = _scalars(logdir)
    for feature, value in result["explanations"]["ipfi"].items():
        last = mux.Scalars(f"feature/{escape_run_name(feature)}", "importance/ipfi")[-1]
        assert last.value == pytest.approx(value, rel=1e-6, abs=1e-7)


# --------------------------------------------------------------- PD recomputed from the model
class _Snapshot:
    """A plug-in that keeps a copy of the learner as the reporter sees it at one batch."""

    name = "snapshot"

    def __init__(self, end: int) -> None:
        self.end, self.model = end, None

    def on_batch(self, batch: Batch) -> None:
        if batch.start + batch.X.shape[0] == self.end:
            self.model = copy.deepcopy(batch.learner)


def _pd(model, rows: torch.Tensor, j: int, grid: list[float]) -> list[float]:
    out = []
    with torch.no_grad():
        for g in grid:
            Z = rows.clone()
            Z[:, j] = g
            out.append(float(model(Z.to(torch.float32))[:, 1].to(torch.float64).mean()))
    return out


def test_pd_of_the_report_equals_the_pd_of_its_column_now():
    """Python API, the default stream with its drift at row 600: the report's curves at the
    row (the last 200 rows when it is opened, the model then) and at the end of the after
    window (the last 200 rows then, the model then) are the PD of that column over those rows,
    on the grid of that column's quantiles."""
    torch.manual_seed(0)
    n, drift, window = 1200, 600, 200
    stream = make_synthetic("agrawal-drift", n_samples=n, seed=0)
    X, columns = _stream_rows(n)
    learner = OnlineClassifier(MLP, lr=0.005, scale_inputs=True, seed=0)
    ipfi = IncrementalPFI(None, "cross_entropy", len(columns), feature_names=columns,
                          alpha=2 / window, seed=0)
    opened = _Snapshot(drift + 4)  # the reporter opens the report at the batch past the row
    models = []
    reporter = DriftReporter([ipfi], at=[drift], pd_rows=200,
                             on_report=lambda r: models.append(copy.deepcopy(learner)))
    Prequential(learner, stream, batch_size=4, plugins=[ipfi, opened, reporter]).run()
    (report,) = reporter.reports
    assert report["row"] == drift and len(models) == 1
    before_rows = X[drift + 4 - 200: drift + 4]
    after_end = drift + reporter.settle + window
    after_rows = X[after_end - 200: after_end]
    assert sorted(c["feature"] for c in report["curves"]) == sorted(columns)
    for c in report["curves"]:
        j = columns.index(c["feature"])
        want_grid = torch.quantile(before_rows[:, j], QS).unique().tolist()
        assert c["grid_before"] == pytest.approx(want_grid, rel=1e-12), c["feature"]
        assert c["grid_after"] == c["grid_before"]  # one grid, taken at the row
        assert c["pd_before"] == pytest.approx(_pd(opened.model, before_rows, j, want_grid),
                                               abs=1e-6), c["feature"]
        assert c["pd_after"] == pytest.approx(_pd(models[0], after_rows, j, want_grid),
                                              abs=1e-6), c["feature"]


# --------------------------------------------------------------- small joins
def test_reproduce_names_its_own_extra_and_says_it_runs(monkeypatch, capsys):
    """A missing optional package points to the ``reproduce`` extra (scikit-learn), not to the
    test extra; the command says it started, and a heartbeat line comes while it runs."""
    real = importlib.import_module

    def no_sklearn(name, *args, **kwargs):
        if name == "torchstream.reproductions.ipdp":
            raise ModuleNotFoundError("No module named 'sklearn'", name="sklearn")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(_runner.importlib, "import_module", no_sklearn)
    with pytest.raises(SystemExit, match=r"pip install 'torchstream\[reproduce\]'"):
        main(["reproduce", "ipdp", "--quick"])
    assert "reproduce ipdp --quick: running" in capsys.readouterr().out


def test_the_extras_install_what_their_names_promise():
    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]
    assert any(r.startswith("scikit-learn") for r in extras["reproduce"])
    assert any(r.startswith("jupyterlab") for r in extras["notebooks"])


def test_the_report_explains_with_the_zero_one_loss(default_run):
    """With --report, iPFI and iSAGE measure the zero-one loss (a difference of error rates:
    within [-1, 1]; cross-entropy importances of this stream reach 2.4)."""
    _, result = default_run
    for explainer in ("ipfi", "isage"):
        values = result["explanations"][explainer].values()
        assert max(abs(v) for v in values) <= 1.0 and max(values) > 0.05


def test_explain_loss_is_checked_against_the_task(tmp_path):
    with pytest.raises(SystemExit, match="--explain-loss mse is a loss of a regression"):
        main(["run", "--n-samples", "100", "--explain-loss", "mse", "--logdir",
              str(tmp_path / "r"), "--no-progress"])
