"""Every output of one seeded ``torchstream run`` with explainers, detectors and ``--report``,
as plain data: the TensorBoard scalars (run, tag, step, value), image and text tags, report.json
and the result JSON, with the run's wall-clock fields left out. ``tests/test_house_outputs.py``
compares a fresh run with the outputs stored in ``tests/data/run_outputs.json``; rewrite them
with ``python tests/run_outputs.py`` only when a change of output is meant."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

from torchstream.cli import main

ARGV = ["run", "--n-samples", "2400", "--batch-size", "8", "--explain", "ipfi,isage,ipdp",
        "--explain-alpha", "0.02", "--detect", "adwin,page_hinkley,cdleeds", "--report",
        "--log-every", "15", "--figure-every", "800", "--no-progress", "--seed", "3"]
#: Fields that hold times or the temporary folder (they differ from run to run).
TIMES = {"logdir", "seconds", "rows_per_second", "build_ms", "report_seconds", "wall_seconds"}
STORED = Path(__file__).parent / "data" / "run_outputs.json"


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def tensorboard(logdir: Path) -> dict[str, object]:
    mux = EventMultiplexer(size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    scalars, images, texts = [], [], []
    for run in sorted(mux.Runs()):
        tags = mux.Runs()[run]
        for tag in sorted(tags.get("scalars", [])):
            scalars += [[run, tag, e.step, e.value] for e in mux.Scalars(run, tag)]
        for tag in sorted(tags.get("images", [])):
            images += [[run, tag, e.step] for e in mux.Images(run, tag)]
        for tag in sorted(tags.get("tensors", [])):
            if tag.endswith("text_summary"):
                texts += [[run, tag, e.step] for e in mux.Tensors(run, tag)]
    return {"scalars": scalars, "images": images, "texts": texts}


def outputs(folder: Path) -> dict[str, object]:
    """Run :data:`ARGV` in ``folder`` and read back what it wrote."""
    logdir, result = folder / "run", folder / "result.json"
    code = main([*ARGV, "--logdir", str(logdir), "--result-json", str(result)])
    if code != 0:
        raise RuntimeError(f"torchstream {' '.join(ARGV)} exited {code}")
    return {"tensorboard": tensorboard(logdir),
            "report": _plain(json.loads((logdir / "report.json").read_text())),
            "result": _plain(json.loads(result.read_text()))}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        got = outputs(Path(tmp))
    STORED.write_text(json.dumps(got, indent=0, sort_keys=True) + "\n")
    print(f"wrote {STORED} ({STORED.stat().st_size:,} bytes)", file=sys.stderr)
