"""`torchstream run` explains the user's features (schema feature groups) by default, and the
encoded columns with --explain-columns."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

from torchstream.cli import main
from torchstream.sinks.base import escape_run_name
from torchstream.streams.csv_reader import read_csv

COLUMNS = ["colour=a", "colour=b", "colour=c", "size", "size:missing"]


@pytest.fixture
def mixed_csv(tmp_path: Path) -> Path:
    """400 rows: a 3-category column, a numeric column with every fifth cell missing; the label
    is 1 for colour a or size > 0.5."""
    rng = random.Random(0)
    lines = ["colour,size,y"]
    for i in range(400):
        colour = "abc"[i % 3]
        size = None if i % 5 == 0 else rng.gauss(0.0, 1.0)
        y = int(colour == "a" or (size is not None and size > 0.5))
        lines.append(f"{colour},{'' if size is None else f'{size:.3f}'},{y}")
    path = tmp_path / "mixed.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(tmp_path: Path, csv: Path, *argv: str) -> int:
    return main(["run", "--stream", str(csv), "--target", "y", "--no-progress",
                 "--log-every", "5", "--logdir", str(tmp_path / "logs"),
                 "--result-json", str(tmp_path / "r.json"), *argv])


def _runs(logdir: Path) -> set[str]:
    mux = EventMultiplexer(size_guidance={"scalars": 0})
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    return set(mux.Runs())


def _printed(out: str, explainer: str) -> dict[str, float]:
    (line,) = [ln for ln in out.splitlines() if ln.startswith(f"{explainer}: ")]
    pairs = (item.rsplit("=", 1) for item in line[len(explainer) + 2:].split(", "))
    return {k: float(v) for k, v in pairs}


def test_schema_columns_are_what_the_tests_expect(mixed_csv):
    schema = read_csv(mixed_csv, "y").schema
    assert list(schema.columns) == COLUMNS
    assert schema.feature_groups() == {"colour": [0, 1, 2], "size": [3, 4]}


def test_run_explains_features_by_default(tmp_path, capsys, mixed_csv):
    assert _run(tmp_path, mixed_csv) == 0
    out = capsys.readouterr().out
    assert ("explanations by feature (2 features, 5 encoded columns; --explain-columns for one "
            "per column): colour = 3 columns, size = 2 columns") in out
    result = json.loads((tmp_path / "r.json").read_text())
    for explainer in ("ipfi", "isage"):
        printed = _printed(out, explainer)
        assert set(printed) == {"colour", "size"}
        saved = result["explanations"][explainer]
        assert set(saved) == {"colour", "size"}
        assert printed == pytest.approx(saved, abs=5e-5)  # 4 printed decimals
        assert saved["colour"] > 0 and saved["size"] > 0  # the label depends on both
    # the iPDP explains the first feature as a whole: one point per category
    assert "ipdp/colour: importance" in out
    assert result["explanations"]["ipdp/colour"]["importance"] > 0
    runs = _runs(tmp_path / "logs")
    assert runs == {"mlp"} | {f"feature/{f}" for f in ("colour", "size")}
    mux = EventMultiplexer(size_guidance={"scalars": 0})
    mux.AddRunsFromDirectory(str(tmp_path / "logs"))
    mux.Reload()
    last = mux.Scalars("feature/colour", "importance/ipfi")[-1]
    assert last.step == 400 and last.value == pytest.approx(result["explanations"]["ipfi"]
                                                            ["colour"], rel=1e-5)


def test_explain_columns_keeps_encoded_columns(tmp_path, capsys, mixed_csv):
    assert _run(tmp_path, mixed_csv, "--explain-columns") == 0
    out = capsys.readouterr().out
    assert "explanations by encoded column (--explain-columns): 5 columns of 2 features" in out
    assert "explanations by feature" not in out
    result = json.loads((tmp_path / "r.json").read_text())
    for explainer in ("ipfi", "isage"):
        assert set(result["explanations"][explainer]) == set(COLUMNS)
        assert set(_printed(out, explainer)) == set(COLUMNS)
    runs = _runs(tmp_path / "logs")
    assert runs == {"mlp"} | {f"feature/{escape_run_name(c)}" for c in COLUMNS}


def test_one_column_features_print_no_grouping_line(tmp_path, capsys):
    csv = tmp_path / "plain.csv"
    csv.write_text("a,b,y\n" + "\n".join(f"{i % 7},{(i * 3) % 5},{i % 2}"
                                         for i in range(80)) + "\n")
    assert _run(tmp_path, csv, "--explain", "ipfi") == 0
    out = capsys.readouterr().out
    assert "explanations by" not in out
    assert set(_printed(out, "ipfi")) == {"a", "b"}


def test_resume_with_the_other_choice_is_refused_naming_the_key(tmp_path, capsys, mixed_csv):
    ck = tmp_path / "c.pt"
    assert _run(tmp_path, mixed_csv, "--explain", "ipfi", "--steps", "10",
                "--checkpoint", str(ck)) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        _run(tmp_path, mixed_csv, "--explain", "ipfi", "--resume", str(ck),
             "--explain-columns")
    assert e.value.code == 2
    assert "config.explain_columns" in capsys.readouterr().err
    # the same choice resumes
    assert _run(tmp_path, mixed_csv, "--explain", "ipfi", "--resume", str(ck)) == 0
    assert "resumed from" in capsys.readouterr().out


def test_adult_end_to_end_by_feature(tmp_path, capsys, adult_csv):
    # --n-samples sizes synthetic streams only; a CSV stream is read whole: take a head
    head = tmp_path / "adult_head.csv"
    with adult_csv.open(encoding="utf-8") as f:
        head.write_text("".join(next(f) for _ in range(2001)))  # header + 2,000 rows
    groups = read_csv(head, "income").schema.feature_groups()
    assert "workclass" in groups and len(groups["workclass"]) > 1  # a one-hot block
    logdir = tmp_path / "logs"
    assert main(["run", "--stream", str(head), "--target", "income", "--no-progress",
                 "--batch-size", "16", "--explain", "ipfi,isage", "--logdir", str(logdir),
                 "--result-json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert f"workclass = {len(groups['workclass'])} columns" in out
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["n_rows"] == 2000
    for explainer in ("ipfi", "isage"):
        assert list(result["explanations"][explainer]) == list(groups)
    assert _runs(logdir) == {"mlp"} | {f"feature/{escape_run_name(g)}" for g in groups}
