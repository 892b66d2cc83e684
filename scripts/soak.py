"""Soak test: resident memory and checkpoint size of a long prequential run.

Two workloads on the Agrawal stream with a drift half-way (``agrawal_drift``), an MLP learner,
a :class:`~torchstream.sinks.History` sink (``log_every=1``) and a periodic checkpoint:

* ``b1``: batch size 1, no explainers;
* ``b16x3``: batch size 16 with the three explainers of ``torchstream run --explain``
  (iPFI, iSAGE, iPDP, as the command line builds them).

The run is advanced milestone by milestone (``--rows``, counted in stream rows); at each
milestone the table gives the resident set size (``VmRSS`` of ``/proc/self/status``), the size
of a checkpoint written there, the size of the per-step records file, the seconds so far and
the change of RSS and checkpoint size against the first milestone at or after the warm-up
(default: 10,000 steps, when History's window of 10,000 points per tag is full; ``--warmup``
rows). A workload is flat when every later milestone is within ``--tolerance`` (default 5 %)
of that reference.

Per-step records go to ``<out>/<workload>/steps.csv`` (as ``torchstream run`` does) unless
``--records window``, which keeps them in the evaluator's bounded in-memory window.

Run it from the repository root, torch on one thread::

    python scripts/soak.py --rows 10000,100000                    # both workloads
    python scripts/soak.py --rows 10000,100000,1000000 --workload b1
    python scripts/soak.py --rows 2000,4000 --checkpoint-every 500  # smoke run
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from torchstream.evaluate import Evaluator, Prequential
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.learners import OnlineClassifier
from torchstream.models import MLP
from torchstream.sinks import History
from torchstream.streams import agrawal_drift

WORKLOADS = {"b1": (1, False), "b16x3": (16, True)}
#: Steps until every bounded store is full: History's 10,000 points per tag (the records
#: window, when used, holds as many; the metrics' window of 1,000 rows is full earlier).
WARMUP_STEPS = 10_000


def rss_mb() -> float:
    """Resident set size of this process in MiB (``VmRSS``)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def explainers(stream: Any, seed: int) -> list[Any]:
    """iPFI, iSAGE and iPDP (on the first column) with the command line's settings."""
    columns = list(stream.schema.columns)
    common = {"alpha": 0.001, "feature_names": columns, "seed": seed}
    return [
        IncrementalPFI(None, "cross_entropy", len(columns), **common),
        IncrementalSAGE(None, "cross_entropy", len(columns), empty_prediction="imputed",
                        **common),
        IncrementalPDP(None, 0, alpha=0.001, feature_names=columns, seed=seed),
    ]


def soak(name: str, milestones: list[int], args: argparse.Namespace, out: Path) -> list[dict]:
    batch_size, explain = WORKLOADS[name]
    total = milestones[-1]
    stream = agrawal_drift(n_samples=total, position=total // 2, seed=args.seed)
    learner = OnlineClassifier(lambda d, k: MLP(d, k), lr=0.01, scale_inputs=True, seed=args.seed)
    out.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {}
    accepts = inspect.signature(Evaluator.__init__).parameters  # older versions: no file
    if "records_path" in accepts and args.records == "file":
        kwargs["records_path"] = out / "steps.csv"
    runner = Prequential(learner, stream, batch_size=batch_size, sinks=[History()],
                         plugins=explainers(stream, args.seed) if explain else [],
                         seed=args.seed, **kwargs)
    ckpt = out / "checkpoint.pt"
    every = max(1, args.checkpoint_every // batch_size)
    rows: list[dict] = []
    t0 = time.perf_counter()
    for target in milestones:
        steps = -(-(target - runner.position) // batch_size)
        runner.run(steps, checkpoint_every=every, checkpoint_path=ckpt)
        probe = out / "probe.pt"
        runner.save(probe)
        records = out / "steps.csv"
        rows.append({
            "workload": name, "rows": runner.position, "steps": runner.step,
            "rss_mb": rss_mb(), "checkpoint_mb": probe.stat().st_size / 2**20,
            "records_mb": records.stat().st_size / 2**20 if records.exists() else 0.0,
            "in_memory_records": _in_memory(runner.records),
            "seconds": time.perf_counter() - t0,
        })
        print(_line(rows[-1]), flush=True)
    runner.close()
    return rows


def _in_memory(records: Any) -> int:
    """Per-step records held in memory (none when they go to a file)."""
    if isinstance(records, list):  # versions that kept every record in a list
        return len(records)
    return 0 if records.path is not None else len(records)


def _line(r: dict) -> str:
    return (f"{r['workload']:>6} {r['rows']:>9,} {r['steps']:>9,} {r['rss_mb']:>9.1f} "
            f"{r['checkpoint_mb']:>9.3f} {r['records_mb']:>9.2f} {r['in_memory_records']:>9,} "
            f"{r['seconds']:>8.0f}")


def verdict(rows: list[dict], warmup: int, tolerance: float) -> list[str]:
    after = [r for r in rows if r["rows"] >= warmup]
    if len(after) < 2:
        return ["  (fewer than two milestones after warm-up: no verdict)"]
    ref = after[0]
    out = []
    for key in ("rss_mb", "checkpoint_mb"):
        changes = [(r[key] - ref[key]) / ref[key] for r in after[1:]]
        worst = max(changes, key=abs)
        flat = all(abs(c) <= tolerance for c in changes)
        out.append(f"  {key}: change against {ref['rows']:,} rows: "
                   + ", ".join(f"{c:+.1%}" for c in changes)
                   + f" -> {'flat' if flat else 'NOT flat'} (worst {worst:+.1%}, "
                   f"tolerance ±{tolerance:.0%})")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="10000,100000,1000000",
                        help="comma-separated milestones in stream rows (ascending)")
    parser.add_argument("--workload", default="b1,b16x3", help=f"of {', '.join(WORKLOADS)}")
    parser.add_argument("--records", choices=("file", "window"), default="file")
    parser.add_argument("--checkpoint-every", type=int, default=5000,
                        help="rows between periodic checkpoints")
    parser.add_argument("--warmup", type=int, default=None,
                        help=f"rows of warm-up (default: {WARMUP_STEPS:,} steps of the workload)")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="directory for checkpoints and records")
    parser.add_argument("--json", default=None, help="also write the rows as JSON")
    args = parser.parse_args()
    milestones = [int(v) for v in args.rows.split(",")]
    if milestones != sorted(milestones) or milestones[0] < 1:
        parser.error("--rows must be ascending positive integers")
    names = [n.strip() for n in args.workload.split(",")]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}")
    out = Path(args.out or tempfile.mkdtemp(prefix="soak-"))
    if len(names) > 1:  # one process per workload: the memory of one does not count for another
        code = 0
        for name in names:
            argv = [a for a in sys.argv[1:] if not a.startswith("--workload")]
            argv = [a for i, a in enumerate(argv) if i == 0 or argv[i - 1] != "--workload"]
            json_args = ["--json", str(out / f"{name}.json")] if args.json else []
            code |= subprocess.call([sys.executable, __file__, *argv, "--workload", name,
                                     "--out", str(out), *json_args])
        if args.json:
            rows = [r for n in names for r in json.loads((out / f"{n}.json").read_text())]
            Path(args.json).write_text(json.dumps(rows, indent=2))
        return code
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, pid {os.getpid()}, files in {out}")
    print(f"{'work':>6} {'rows':>9} {'steps':>9} {'rss MiB':>9} {'ckpt MiB':>9} "
          f"{'recs MiB':>9} {'in RAM':>9} {'seconds':>8}", flush=True)
    all_rows = []
    for name in names:
        rows = soak(name, milestones, args, out / name)
        all_rows += rows
        warmup = args.warmup if args.warmup is not None else WARMUP_STEPS * WORKLOADS[name][0]
        print(f"  warm-up: {warmup:,} rows", flush=True)
        for line in verdict(rows, warmup, args.tolerance):
            print(line, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(all_rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
