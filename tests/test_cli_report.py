"""``torchstream run --detect ... --report`` and ``torchstream report RUN_DIR``.

The runs use the default stream, Agrawal function 0 drifting to function 2 in its middle, with
1,200 rows (the known drift at row 600), batches of 4, the explainers' alpha 0.01 (so the
report's default window is 2 / 0.01 = 200 rows).
"""

from __future__ import annotations

import json

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from torchstream.cli import main

BASE = ["run", "--n-samples", "1200", "--explain-alpha", "0.01", "--no-progress"]


def _run(tmp_path, *extra: str, name: str = "run"):
    logdir = tmp_path / name
    assert main([*BASE, "--logdir", str(logdir), *extra]) == 0
    return logdir


def _strip(data: dict) -> list[dict]:
    """The reports without their build time (a measurement, not state)."""
    return [{k: v for k, v in r.items() if k != "build_ms"} for r in data["alarms"]]


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    logdir = tmp / "run"
    assert main([*BASE, "--logdir", str(logdir), "--report", "--detect", "adwin"]) == 0
    return logdir


def test_report_files_at_the_known_drift(reported, capsys):
    data = json.loads((reported / "report.json").read_text())
    rows = [r["row"] for r in data["alarms"]]
    known = next(r for r in data["alarms"] if r["detector"] == "known")
    assert known["row"] == 600 and rows == sorted(rows)
    assert known["rows_before"] == 200 and known["rows_after"] == 200
    # one entry per schema feature and explainer (iPFI and iSAGE), ranked changed-first
    assert len(known["changes"]) == 2 * 9
    verdicts = [c["verdict"] != "unchanged" for c in known["changes"]]
    assert verdicts == sorted(verdicts, reverse=True)
    # an iPDP per feature for the curves (the default iPDP of `salary` and 8 more)
    assert sorted(c["feature"] for c in known["curves"]) == sorted(
        ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears",
         "loan"])
    md = (reported / "report.md").read_text()
    assert md.startswith("# Drift report") and known["summary"] in md
    for name in ("importance_ipfi", "importance_isage"):
        figure = reported / "report" / f"row600_known_{name}.png"
        assert figure.is_file() and f"]({'report/row600_known_' + name}.png)" in md


def test_report_goes_to_tensorboard_at_its_row(reported):
    acc = EventAccumulator(str(reported / "mlp"), size_guidance={"images": 0, "tensors": 0})
    acc.Reload()
    texts = acc.Tensors("drift_report/text_summary")
    data = json.loads((reported / "report.json").read_text())
    assert [t.step for t in texts] == [r["row"] for r in data["alarms"]]
    images = acc.Images("drift_report/importance_ipfi")
    assert [i.step for i in images] == [r["row"] for r in data["alarms"]]


def test_report_command_draws_it_again(reported, capsys):
    md = (reported / "report.md").read_text()
    for f in (reported / "report").iterdir():
        f.unlink()
    (reported / "report.md").unlink()
    capsys.readouterr()
    assert main(["report", str(reported)]) == 0
    out = capsys.readouterr().out
    assert (reported / "report.md").read_text() == md
    assert (reported / "report" / "row600_known_importance_ipfi.png").is_file()
    data = json.loads((reported / "report.json").read_text())
    assert f"{len(data['alarms'])} report" in out and data["alarms"][0]["summary"] in out


def test_resumed_run_writes_the_same_report(tmp_path, reported):
    ckpt = tmp_path / "ckpt.pt"
    logdir = tmp_path / "resumed"
    args = [*BASE, "--logdir", str(logdir), "--report", "--detect", "adwin"]
    assert main([*args, "--steps", "160", "--checkpoint", str(ckpt)]) == 0  # row 640: pending
    assert main([*args, "--resume", str(ckpt)]) == 0
    whole = json.loads((reported / "report.json").read_text())
    resumed = json.loads((logdir / "report.json").read_text())
    assert _strip(resumed) == _strip(whole)


@pytest.mark.parametrize("argv, message", [
    (["--report", "--explain", "ipdp"], "--report needs ipfi, isage or interactions"),
    (["--detect", "adwin,foo"], "--detect: unknown 'foo'"),
    (["--detect", "adwin,adwin"], "names a detector twice"),
    (["--detect", "pdp", "--explain", "ipfi"], "--detect pdp needs an iPDP"),
    (["--report", "--report-window", "0"], "--report-window must be >= 1"),
    (["--report", "--report-settle", "-1"], "--report-settle must be >= 0"),
    (["--detect", "erics", "--stream", "friedman"], "--detect erics needs a binary"),
    (["--report-at", "300"], "--report-at needs --report"),
    (["--report", "--report-at", "0"], "--report-at rows must be >= 1"),
])
def test_report_option_errors(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main([*BASE, "--logdir", str(tmp_path / "x"), *argv])
    assert message in str(e.value)


def test_interactions_in_the_report(tmp_path, capsys):
    """``--explain interactions --report``: the report compares the SAGE values the
    interactions estimate (said) and every pair, in report.json, the markdown table and (where
    a pair changed) the summary; TensorBoard has the pairs' heat map over the rows."""
    logdir = _run(tmp_path, "--explain", "interactions", "--report")
    out = capsys.readouterr().out
    assert "report: the importance compared is the SAGE values the interactions" in out
    assert "it also names the pairs that gained or lost interaction" in out
    data = json.loads((logdir / "report.json").read_text())
    known = next(r for r in data["alarms"] if r["detector"] == "known")
    features = {c["feature"] for c in known["changes"]}
    assert {c["explainer"] for c in known["changes"]} == {"interactions"}
    pairs = known["interactions"]
    assert pairs and {p["explainer"] for p in pairs} == {"interactions"}
    assert len(pairs) == 9 * 8 // 2  # every pair, compared or not
    assert all(set(p["features"]) <= features and p["verdict"] in
               {"gained", "lost", "unchanged", "not compared"} for p in pairs)
    compared = [p for p in pairs if p["verdict"] != "not compared"]
    assert compared and all(p["bound_before"] is not None for p in compared)
    md = (logdir / "report.md").read_text()
    assert md.count("| interactions | ") >= len(pairs)
    changed = [p for p in pairs if p["verdict"] in ("gained", "lost")]
    for p in changed:
        assert f"between `{p['features'][0]}` and `{p['features'][1]}`" in known["summary"]
    # the interaction matrix over the rows, with the drift marked, as an image at the end
    acc = EventAccumulator(str(logdir / "mlp"), size_guidance={"images": 0})
    acc.Reload()
    assert acc.Images("interactions/over_rows")[-1].step == 1200


def test_report_command_without_a_report(tmp_path):
    with pytest.raises(SystemExit, match="report.json does not exist"):
        main(["report", str(tmp_path)])
    (tmp_path / "report.json").write_text('{"alarms": [{"row": 3}]}')
    with pytest.raises(SystemExit, match="alarm 0 has no detector"):
        main(["report", str(tmp_path)])


def test_erics_and_pdp_detectors_run_with_the_report(tmp_path, capsys):
    logdir = _run(tmp_path, "--detect", "erics,pdp", "--report")
    out = capsys.readouterr().out
    assert "erics: a Probit head on the inputs standardised" in out
    data = json.loads((logdir / "report.json").read_text())
    assert {r["detector"] for r in data["alarms"]} <= {"known", "erics", "ipdp/salary"}
    known = next(r for r in data["alarms"] if r["detector"] == "known")
    # ERICS's partial test runs per schema feature: its alerts name features
    features = {"salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears",
                "loan"}
    assert set(known["where"]["partial"].get("erics", [])) <= features


def test_cdleeds_regions_in_the_report(tmp_path, capsys):
    logdir = _run(tmp_path, "--detect", "cdleeds", "--report")
    assert "cdleeds: neighbourhoods of the inputs standardised" in capsys.readouterr().out
    data = json.loads((logdir / "report.json").read_text())
    regions = [g for r in data["alarms"] for g in r["where"]["regions"]]
    assert regions  # CDLEEDS alarmed on this stream and named the neighbourhoods
    for region in regions:
        centroid = region["centroid"]
        assert set(centroid) == {"salary", "commission", "age", "elevel", "car", "zipcode",
                                 "hvalue", "hyears", "loan"}
        # in the inputs' units: Agrawal's age lies in [20, 80], salary in [20k, 150k]
        assert 15 <= centroid["age"] <= 85 and 1e4 <= centroid["salary"] <= 1.6e5


def test_report_at_rows_the_user_names(tmp_path):
    logdir = _run(tmp_path, "--report", "--report-at", "300", "--explain", "ipfi")
    data = json.loads((logdir / "report.json").read_text())
    assert [(r["row"], r["detector"]) for r in data["alarms"]] == [(300, "known"),
                                                                   (600, "known")]
    # the before window of row 300 is rows 100-299, whole; the after window rows 500-699 would
    # reach past the next change (row 600): it ends there, 500-599, and the report says so
    first = data["alarms"][0]
    assert (first["rows_before"], first["rows_after"], first["cut_at"]) == (200, 100, 600)
    assert "windows end at the next change, row 600" in first["summary"]


def test_resume_needs_the_same_report_settings(tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    args = [*BASE, "--logdir", str(tmp_path / "run"), "--explain", "ipfi"]
    assert main([*args, "--steps", "20", "--checkpoint", str(ckpt)]) == 0
    with pytest.raises(SystemExit, match="config.report: only in this run"):
        main([*args, "--resume", str(ckpt), "--report"])
    assert main([*args, "--resume", str(ckpt), "--steps", "5"]) == 0  # the same run resumes
