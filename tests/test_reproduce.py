"""Every reproduction runs in --quick mode and agrees with the paper within its stated
tolerance (the tolerances are justified in each script); the command writes its report."""

from __future__ import annotations

import pytest

from torchstream.cli import main
from torchstream.reproduce import Comparison, available, missing_data, run, table


@pytest.mark.parametrize("name", available())
def test_quick_reproduction_within_tolerance(name):
    if missing_data(name):
        pytest.skip(f"shared data {missing_data(name)} not on this machine")
    rows, _ = run(name, quick=True)
    assert rows and all(isinstance(r, Comparison) for r in rows)
    checked = [r for r in rows if r.tolerance is not None]
    assert checked, f"{name}: no number is checked against the paper"
    bad = [r for r in checked if not r.within]
    assert not bad, table(bad)


def test_command_writes_a_report(tmp_path, capsys):
    if missing_data("fires"):
        pytest.skip("spambase.csv not on this machine")
    assert main(["reproduce", "fires", "--quick", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "fires-quick.md").read_text()
    assert "| mean accuracy |" in text and "0.7420" in text
    assert "fires" in capsys.readouterr().out


def test_unknown_reproduction():
    with pytest.raises(SystemExit, match="unknown reproduction 'nope'"):
        main(["reproduce", "nope"])


def test_comparison_within():
    assert Comparison("m", 0.75, 0.74, 0.02).within is True
    assert Comparison("m", 0.80, 0.74, 0.02).within is False
    assert Comparison("m", float("nan"), 0.74, 0.02).within is False
    assert Comparison("m", 0.80, 0.74).within is None
