"""End-to-end: `torchstream run` and `torchstream list`."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

from torchstream.cli import main
from torchstream.reproductions import available
from torchstream.streams import data_path


def _scalars(logdir):
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return acc


def test_run_default_stream_short(tmp_path, capsys):
    logdir = tmp_path / "run"
    assert main(["run", "--n-samples", "800", "--batch-size", "4", "--logdir", str(logdir),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "agrawal-drift" in out
    assert "| rows            |    800 |" in out
    assert "known drifts at rows [400]" in out
    assert f"tensorboard --logdir {logdir}" in out
    assert sorted(p.name for p in logdir.iterdir() if p.is_dir()) == ["feature", "mlp"]
    acc = _scalars(logdir / "mlp")  # the main run is named after the model
    steps = [e.step for e in acc.Scalars("metrics/accuracy/cumulative")]
    assert steps == list(range(40, 801, 40))  # every 10 batches of 4 rows, at the rows seen
    final = acc.Scalars("metrics/accuracy/cumulative")[-1].value
    printed = float(out.split("| accuracy        |")[1].split("|")[0])
    assert final == pytest.approx(printed, abs=6e-5)


def test_run_csv_with_checkpoint_and_resume(tmp_path, capsys):
    csv = tmp_path / "toy.csv"
    rows = ["a,b,color,label"]
    for i in range(120):
        rows.append(f"{i % 7},{(i * 3) % 5},{'red' if i % 2 else 'blue'},{'yes' if i % 2 else 'no'}")
    csv.write_text("\n".join(rows) + "\n")
    ckpt = tmp_path / "c.pt"
    args = ["run", "--stream", str(csv), "--target", "label", "--batch-size", "10",
            "--logdir", str(tmp_path / "a"), "--no-progress"]
    assert main([*args, "--steps", "6", "--checkpoint", str(ckpt)]) == 0
    assert ckpt.exists()
    assert main([*args, "--resume", str(ckpt)]) == 0
    out = capsys.readouterr().out
    assert "resumed from" in out and "at row 60" in out
    assert "| rows            |    120 |" in out
    full_dir = tmp_path / "b"
    assert main(["run", "--stream", str(csv), "--target", "label", "--batch-size", "10",
                 "--logdir", str(full_dir), "--no-progress"]) == 0
    out_full = capsys.readouterr().out
    acc_line = [line for line in out_full.splitlines() if line.startswith("| accuracy ")]
    assert acc_line and acc_line[0] in out  # the resumed run ends where the full run ends


def test_run_real_csv_regression(tmp_path, capsys):
    path = data_path("california_housing.csv")
    if not path.exists():
        pytest.skip(f"{path} not available")
    assert main(["run", "--stream", str(path), "--target", "median_house_value",
                 "--steps", "50", "--batch-size", "16", "--logdir", str(tmp_path / "r"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "| mae " in out and "regression" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--stream", "nope"], "unknown stream 'nope'"),
        (["run", "--model", "transformer"], "transformer"),
        (["run", "--batch-size", "0"], "--batch-size must be >= 1"),
        (["run", "--stream", "missing.csv"], "CSV file not found"),
        (["run", "--checkpoint-every", "3"], "needs --checkpoint"),
        (["run", "--model", "autoencoder"], "unsupervised"),
    ],
)
def test_run_errors(argv, message, tmp_path):
    with pytest.raises(SystemExit) as e:
        main([*argv, "--logdir", str(tmp_path / "x")])
    assert message in str(e.value)


def test_bad_spec_key_is_named(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text('[model]\ntype = "mlp"\nhidden = [8]\nwidth = 3\n\n[learner]\nlr = 0.01\n')
    with pytest.raises(SystemExit) as e:
        main(["run", "--model", str(spec), "--logdir", str(tmp_path / "x")])
    assert "width" in str(e.value)


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "agrawal-drift" in out and "mlp" in out and "soft_tree" in out


def test_console_script_help():
    out = subprocess.run([sys.executable, "-m", "torchstream.cli", "run", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--stream" in out and "--device" in out


def test_run_explains_by_default(tmp_path, capsys):
    logdir = tmp_path / "explained"
    assert main(["run", "--n-samples", "600", "--logdir", str(logdir), "--no-progress",
                 "--log-every", "5", "--figure-every", "200", "--pdp-feature", "age"]) == 0
    out = capsys.readouterr().out
    assert "ipfi: " in out and "isage: " in out and "ipdp/age: importance" in out
    mux = EventMultiplexer(size_guidance={"scalars": 0, "images": 0})
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    columns = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]
    # one run per feature under one tag per explainer; steps are rows seen (last: n_samples)
    assert set(mux.Runs()) == {"mlp"} | {f"feature/{c}" for c in columns}
    for explainer in ("ipfi", "isage"):
        for c in columns:
            points = mux.Scalars(f"feature/{c}", f"importance/{explainer}")
            assert points[-1].step == 600 and points[0].step == 20  # logged every 5 batches of 4
    run = mux.GetAccumulator("mlp")
    assert "ipdp/age/importance" in run.Tags()["scalars"]
    assert [e.step for e in run.Images("ipdp/age")] == [200, 400, 600]  # every 200 rows
    assert [e.step for e in run.Images("importance/over_rows")] == [200, 400, 600]
    (table,) = {e.tensor_proto.string_val[0].decode() for e in run.Tensors("alarms/text_summary")}
    assert "| known drifts | 300 |" in table


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--explain", "shap"], "unknown explainers ['shap']"),
        (["--pdp-feature", "height"], "--pdp-feature 'height' is not a column"),
        (["--figure-every", "0"], "--figure-every must be >= 1"),
    ],
)
def test_explain_option_errors(argv, message, tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["run", "--n-samples", "100", "--logdir", str(tmp_path / "x"), *argv])
    assert message in str(e.value)


def test_run_without_explainers(tmp_path, capsys):
    assert main(["run", "--n-samples", "200", "--explain", "none", "--logdir",
                 str(tmp_path / "n"), "--no-progress"]) == 0
    assert "ipfi" not in capsys.readouterr().out


@pytest.mark.parametrize("strategy", [["--strategy", "prequential"],
                                      ["--strategy", "kfold", "--k", "2"],
                                      ["--strategy", "holdout", "--test-interval", "5",
                                       "--replace-every", "10"]])
def test_evaluate_writes_summary_plots_and_logs(tmp_path, capsys, strategy):
    import pandas as pd

    out = tmp_path / "ev"
    code = main(["evaluate", "--stream", "sea-drift", "--n-samples", "1200",
                 "--models", "probit,naive_bayes", "--detectors", "ddm,adwin",
                 "--detection-window", "400", "--out", str(out), *strategy])
    assert code == 0
    summary = pd.read_csv(out / "summary.csv", index_col=0)
    assert list(summary.index) == ["probit", "naive_bayes"]
    assert summary["accuracy"].between(0.5, 1.0).all()
    steps = pd.read_csv(out / "steps.csv")
    k = 2 if "kfold" in strategy else 1
    assert len(steps) == (1200 - 100) // 10 * 2 * k
    measures = pd.read_csv(out / "detection_measures.csv", index_col=0)
    assert list(measures.index) == ["drift_ddm", "drift_adwin"]
    assert measures["detected_change_rate"].between(0, 1).all()
    for name in ("metric.png", "detections.png", "summary.md"):
        assert (out / name).stat().st_size > 0
    # one TensorBoard run per predictor (overlaid in colour), the detectors in "evaluation"
    mux = EventMultiplexer(size_guidance={"scalars": 0})
    mux.AddRunsFromDirectory(str(out / "tensorboard"))
    mux.Reload()
    assert set(mux.Runs()) == {"evaluation", "probit", "naive_bayes"}
    for name in ("probit", "naive_bayes"):
        points = mux.Scalars(name, "metrics/accuracy")
        assert [e.step for e in points] == list(range(110, 1201, 10))  # rows seen
    detections = pd.read_csv(out / "detections.csv")
    for det in ("drift_ddm", "drift_adwin"):
        points = mux.Scalars("evaluation", f"alarms/{det}")
        alarms = detections.loc[detections["detector"] == det, "position"]
        rises = [e.step for e, before in zip(points[1:], points) if e.value > before.value]
        assert rises == sorted({int(a) for a in alarms})
    text = capsys.readouterr().out
    assert "naive_bayes" in text and "detected_change_rate" in text


@pytest.mark.parametrize("argv, message", [
    (["--models", "mlp,nope"], "unknown learner 'nope'"),
    (["--models", "mlp,mlp"], "distinct"),
    (["--detectors", "ddm,foo"], "unknown detector 'foo'"),
    (["--batch-size", "0"], "--batch-size"),
    (["--strategy", "kfold", "--k", "1"], "--k"),
])
def test_evaluate_errors(argv, message, tmp_path):
    with pytest.raises(SystemExit, match=message):
        main(["evaluate", "--n-samples", "300", "--out", str(tmp_path / "x"), *argv])


def test_a_mistyped_option_names_the_closest_one(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--steam", "sea"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "torchstream run: error: unrecognized arguments: --steam (did you mean --stream?)" in err
    assert "usage: torchstream run" in err  # the command's own usage, not the top level's


def test_list_names_the_reproductions_and_reproduce_help_points_to_it(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("reproductions:"))
    assert all(name in line for name in available()) and len(available()) >= 9
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    help_text = capsys.readouterr().out
    assert "--list" not in help_text and "torchstream list" in help_text
