"""The notebooks in ``notebooks/`` are saved executed, without errors, and still run.

Each notebook is read with the json module (no nbformat needed); its code cells are then run in
order with ``exec`` in one fresh namespace, with the working directory at ``notebooks/`` (as
in Jupyter), matplotlib on the Agg backend and temporary files under pytest's ``tmp_path``.
Each notebook must run in under ``BUDGET_S`` seconds.
"""

from __future__ import annotations

import json
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
BUDGET_S = 60


def _load(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def _code_cells(nb: dict[str, Any]) -> list[dict[str, Any]]:
    return [cell for cell in nb["cells"] if cell["cell_type"] == "code"]


def _source(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_saved_executed(path: Path) -> None:
    nb = _load(path)
    cells = _code_cells(nb)
    assert cells, f"{path.name}: no code cells"
    for i, cell in enumerate(cells):
        where = f"{path.name}, code cell {i}"
        assert cell.get("execution_count") is not None, f"{where}: not executed"
        assert cell.get("outputs"), f"{where}: no outputs"
        errors = [o for o in cell["outputs"] if o.get("output_type") == "error"]
        assert not errors, f"{where}: error output {errors[0].get('ename')}"
        streams = [o for o in cell["outputs"] if o.get("name") == "stderr"]
        text = "".join("".join(o.get("text", "")) for o in streams)
        assert "Traceback" not in text, f"{where}: a traceback on stderr"
    counts = [cell["execution_count"] for cell in cells]
    assert counts == sorted(counts), f"{path.name}: cells were not executed in order {counts}"


class _OverBudget(Exception):
    pass


def _over_budget(signum: int, frame: Any) -> None:
    raise _OverBudget(f"over the {BUDGET_S} s budget")


@pytest.mark.filterwarnings("ignore:FigureCanvasAgg is non-interactive")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    monkeypatch.chdir(NOTEBOOKS_DIR)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the notebook's temporary files
    threads = torch.get_num_threads()
    alarm = hasattr(signal, "SIGALRM")
    if alarm:
        previous = signal.signal(signal.SIGALRM, _over_budget)
        signal.alarm(BUDGET_S)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    start = time.perf_counter()
    try:
        for i, cell in enumerate(_code_cells(_load(path))):
            code = compile(_source(cell), f"{path.name}[code cell {i}]", "exec")
            exec(code, namespace)
    finally:
        if alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        torch.set_num_threads(threads)
        plt.close("all")
    seconds = time.perf_counter() - start
    assert seconds < BUDGET_S, f"{path.name} ran in {seconds:.1f} s (budget {BUDGET_S} s)"
