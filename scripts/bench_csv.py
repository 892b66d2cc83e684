"""Time ``torchstream.streams.read_csv`` on the shared data sets, next to a plain
``pandas.read_csv`` of the same file (the parse alone: no kinds, no checks, no tensor).

Each reader runs ``--repeat`` times per file, interleaved, after one warm-up read; the table gives
the fastest and the median wall-clock time and the fastest CPU time of the process (less
sensitive to other work on the machine). Torch runs on one thread.

    .venv/bin/python scripts/bench_csv.py [--repeat 15] [--files adult electricity]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import pandas as pd
import torch

from torchstream.streams import SHARED_DATA, data_path, read_csv


def _time(fn: Callable[[], Any]) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--files", nargs="*", default=["adult", "electricity"],
                        help=f"shared data sets ({', '.join(SHARED_DATA)})")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{'data set':<12} {'reader':<16} {'min wall ms':>11} {'median ms':>10} "
          f"{'min cpu ms':>10}  result")
    for name in args.files:
        file, target, _, _ = SHARED_DATA[name]
        path = data_path(file)
        readers: dict[str, Callable[[], Any]] = {
            "read_csv": lambda: read_csv(path, target),
            "pandas.read_csv": lambda: pd.read_csv(path),
        }
        results = {k: fn() for k, fn in readers.items()}  # warm-up (and the result's shape)
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in readers}
        for _ in range(args.repeat):
            for k, fn in readers.items():
                times[k].append(_time(fn))
        for k, ts in times.items():
            wall = [t[0] * 1e3 for t in ts]
            cpu = [t[1] * 1e3 for t in ts]
            r = results[k]
            shape = (f"{len(r):,} rows, d={r.n_features}, {r.task}" if k == "read_csv"
                     else f"{r.shape[0]:,} rows x {r.shape[1]} columns")
            print(f"{name:<12} {k:<16} {min(wall):>11.1f} {statistics.median(wall):>10.1f} "
                  f"{min(cpu):>10.1f}  {shape}")


if __name__ == "__main__":
    main()
