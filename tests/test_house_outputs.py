"""A seeded ``torchstream run`` with explainers, detectors and ``--report`` writes the outputs
stored in ``tests/data/run_outputs.json`` (:mod:`run_outputs`): every TensorBoard scalar (run,
tag, row, value), the image and text tags and their rows, report.json and the result JSON.
The package's internals may be rearranged; what a run writes stays what it was."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import run_outputs


def _differences(old: object, new: object, where: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = [f"{where}/{k}: only in the stored outputs" for k in old if k not in new]
        out += [f"{where}/{k}: new" for k in new if k not in old]
        for k in old.keys() & new.keys():
            out += _differences(old[k], new[k], f"{where}/{k}")
        return out
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{where}: {len(old)} entries stored, {len(new)} now"]
        return [d for i, (a, b) in enumerate(zip(old, new)) for d in _differences(a, b,
                                                                               f"{where}[{i}]")]
    if isinstance(old, float) and isinstance(new, float):
        same = old == new or (math.isnan(old) and math.isnan(new))
        return [] if same else [f"{where}: {old!r} stored, {new!r} now"]
    return [] if old == new else [f"{where}: {old!r} stored, {new!r} now"]


def test_a_run_writes_the_stored_outputs(tmp_path):
    stored = json.loads(run_outputs.STORED.read_text())
    now = json.loads(json.dumps(run_outputs.outputs(tmp_path)))
    diffs = _differences(stored, now)
    assert not diffs, f"{len(diffs)} differences, the first: " + "\n".join(diffs[:20])
    # the run is not trivial: it logged importances of both explainers, alarms and reports
    tags = {tag for _, tag, _, _ in now["tensorboard"]["scalars"]}
    assert {"importance/ipfi", "importance/isage", "alarms/drift_adwin"} <= tags
    assert now["report"]["alarms"] and now["result"]["alarms"]


def test_the_comparison_sees_a_change():
    stored = json.loads(run_outputs.STORED.read_text())
    changed = json.loads(json.dumps(stored))
    changed["tensorboard"]["scalars"][3][3] += 1e-6
    changed["report"]["alarms"][0]["row"] += 1
    assert len(_differences(stored, changed)) == 2
