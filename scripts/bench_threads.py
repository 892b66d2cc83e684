"""Rows per second of the README's "Using it from Python" example, with iPFI added, on 1 and 2
CPU threads and on torch's own default count.

Each count runs in its own process (torch's pool of threads is process-wide, and the default
count is only the default in a process that never set one); the counts take turns, ``--repeats``
times, and the table gives each count's median, slowest and fastest run (other work on the
same cores shows as spread, and costs more threads more: each waits for the slowest), and the
load average before and after. The timed part is ``runner.run()``: the README's
learner (``partial(MLP, hidden=(64,))``, ``lr=5e-3``, ``scale_inputs=True``), one row per step,
the TensorBoard sink (to a temporary folder) and an ``IncrementalPFI`` plug-in, on
``agrawal_drift`` with its drift in the middle of ``--rows`` rows (``--batch-size`` rows per
step measures larger steps).

    python scripts/bench_threads.py --rows 1500
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial

import torch

from torchstream import OnlineClassifier, Prequential
from torchstream.explain import IncrementalPFI
from torchstream.learners import use_threads
from torchstream.models import MLP
from torchstream.sinks import TensorBoardSink
from torchstream.streams import agrawal_drift

SETTINGS = ("1", "2", "default")


def one_run(setting: str, rows: int, batch_size: int) -> dict[str, float | int | str]:
    """The README example over ``rows`` rows on ``setting`` threads; rows per second."""
    threads = use_threads(torch.get_num_threads() if setting == "default" else int(setting))
    stream = agrawal_drift(n_samples=rows, position=rows // 2)
    learner = OnlineClassifier(partial(MLP, hidden=(64,)), lr=5e-3, scale_inputs=True)
    ipfi = IncrementalPFI(None, "cross_entropy", stream.n_features,
                          feature_names=stream.schema.columns)
    with tempfile.TemporaryDirectory() as logdir:
        runner = Prequential(learner, stream, batch_size=batch_size, plugins=[ipfi],
                             sinks=[TensorBoardSink(logdir)])
        start = time.perf_counter()
        result = runner.run()
        seconds = time.perf_counter() - start
    return {"setting": setting, "threads": threads, "rows": result.n_rows,
            "seconds": seconds, "rows_per_s": result.n_rows / seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1500)
    ap.add_argument("--repeats", type=int, default=1, help="turns of the three counts")
    ap.add_argument("--batch-size", type=int, default=1, help="rows per step (README: 1)")
    ap.add_argument("--one", choices=SETTINGS, help=argparse.SUPPRESS)  # a child process
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(one_run(args.one, args.rows, args.batch_size)))
        return
    runs: dict[str, list[dict]] = {s: [] for s in SETTINGS}
    load_before = os.getloadavg()[0]
    for _ in range(args.repeats):
        for setting in SETTINGS:
            out = subprocess.run(
                [sys.executable, __file__, "--one", setting, "--rows", str(args.rows),
                 "--batch-size", str(args.batch_size)],
                check=True, capture_output=True, text=True,
            ).stdout
            runs[setting].append(json.loads(out.strip().splitlines()[-1]))
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, torch's default count "
          f"{torch.get_num_threads()}; {args.rows:,} rows per run in steps of {args.batch_size}, "
          f"{args.repeats} run(s) each; load average {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    print(f"{'threads':>12} {'rows/s':>8} {'slowest':>8} {'fastest':>8} {'seconds':>8}")
    for setting, done in runs.items():
        label = f"default ({done[0]['threads']})" if setting == "default" else setting
        rates = [float(r["rows_per_s"]) for r in done]
        secs = statistics.median(float(r["seconds"]) for r in done)
        print(f"{label:>12} {statistics.median(rates):8.1f} {min(rates):8.1f} {max(rates):8.1f} "
              f"{secs:8.2f}")


if __name__ == "__main__":
    main()
