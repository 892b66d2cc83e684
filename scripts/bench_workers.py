"""Rows per second of one stream learned and explained by 1 and by 2 worker processes
(:mod:`torchstream.distributed.data_parallel`, the loop of ``torchstream run --workers N``),
interleaved and repeated, and the cost model: the bytes each worker sends per step against the
compute of a step, and the workers a stream of 10^8 rows an hour needs.

The workload: iSAGE (empty prediction imputed) on an MLP d-128-128-2 learned online, a
Hyperplane stream of d = 100 features, B = 64 rows per worker and step (a global batch of
N x 64 rows). Each repeat runs N = 1 and N = 2 (the order alternates between repeats) and, as a
reference, one plain process (the runner without workers, in this process). Start-up (process
spawn, imports) is not counted: the loop's own seconds.

    python scripts/bench_workers.py --rows 3840 --repeats 5
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from functools import partial

import torch
import torch.distributed as dist

from torchstream.distributed.data_parallel import (
    Exchange,
    WorkerSetup,
    cost_per_step,
    launch,
    run_data_parallel,
)
from torchstream.evaluate import Prequential
from torchstream.explain import IncrementalSAGE
from torchstream.learners import OnlineClassifier, use_threads
from torchstream.models import MLP
from torchstream.streams.synthetic.hyperplane import Hyperplane

D, HIDDEN = 100, (128, 128)
N_PARAMS = D * HIDDEN[0] + HIDDEN[0] + HIDDEN[0] * HIDDEN[1] + HIDDEN[1] + HIDDEN[1] * 2 + 2
STREAM_RATE = 1e8 / 3600  # rows a second of 10^8 rows an hour


def build(rank: int, *, rows: int) -> WorkerSetup:
    stream = Hyperplane(n_features=D, seed=0, n_samples=rows)
    learner = OnlineClassifier(partial(MLP, hidden=HIDDEN), lr=1e-3, scale_inputs=True, seed=0)
    isage = IncrementalSAGE(learner, "cross_entropy", D, alpha=0.01, seed=10 + rank,
                            empty_prediction="imputed")
    return WorkerSetup(stream, learner, [isage])


def plain(rows: int, batch: int) -> float:
    """Rows per second of one process without workers (the same stream, model and iSAGE)."""
    setup = build(0, rows=rows)
    runner = Prequential(setup.learner, setup.stream, batch_size=batch,
                         plugins=list(setup.explainers))
    return runner.run().rows_per_second


def exchange_probe(exchange: Exchange, batch: int, repeats: int) -> float:
    """Median seconds of one step's collectives between the workers, with no compute: the
    gradients' all_reduce, the contributions' and predictions' all_gather, the loss's
    all_reduce."""
    grads = torch.zeros(N_PARAMS)
    contributions = torch.zeros(batch, D, dtype=torch.float64)
    predictions = torch.zeros(batch, 2)
    loss = torch.zeros(2, dtype=torch.float64)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        dist.all_reduce(grads)
        dist.all_gather([torch.empty_like(contributions) for _ in range(exchange.workers)],
                        contributions)
        dist.all_gather([torch.empty_like(predictions) for _ in range(exchange.workers)],
                        predictions)
        dist.all_reduce(loss)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} / {five:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3840)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    use_threads(1)
    print(f"{os.cpu_count()} CPUs; iSAGE on MLP {D}-{HIDDEN[0]}-{HIDDEN[1]}-2 "
          f"({N_PARAMS:,} parameters), B = {args.batch} rows per worker, {args.rows:,} rows a "
          f"run, {args.repeats} repeats; {load()} at the start")
    speeds: dict[str, list[float]] = {"plain": [], "N=1": [], "N=2": []}
    steps_ms: dict[str, list[float]] = {"N=1": [], "N=2": []}
    sent: dict[str, float] = {}
    for rep in range(args.repeats):
        order = (1, 2) if rep % 2 == 0 else (2, 1)
        line = [f"repeat {rep + 1}:"]
        for workers in order:
            result = run_data_parallel(partial(build, rows=args.rows), workers, args.batch)
            key = f"N={workers}"
            speeds[key].append(result.rows_per_second)
            steps_ms[key].append(1000 * result.seconds / max(result.steps, 1))
            if workers == 2:
                sent = result.bytes_per_step
            line.append(f"{key} {result.rows_per_second:,.0f} rows/s "
                        f"({steps_ms[key][-1]:.0f} ms a step)")
        t = time.perf_counter()
        speeds["plain"].append(plain(args.rows, args.batch))
        line.append(f"plain {speeds['plain'][-1]:,.0f} rows/s ({time.perf_counter() - t:.1f} s)")
        print("  ".join(line) + f"  [{load()}]", flush=True)
    for key, values in speeds.items():
        print(f"{key:>5}: median {statistics.median(values):,.0f} rows/s, min "
              f"{min(values):,.0f}, max {max(values):,.0f}")
    ratios = [b / a for a, b in zip(speeds["N=1"], speeds["N=2"])]
    print(f"N=2 / N=1, per repeat: {', '.join(f'{r:.2f}' for r in ratios)}; median "
          f"{statistics.median(ratios):.2f}x")
    exchange_s = launch(partial(exchange_probe, batch=args.batch, repeats=300), 2)
    print(f"the collectives of one step alone, 2 workers: {1000 * exchange_s:.2f} ms (median of "
          "300)")
    model = cost_per_step(N_PARAMS, D, args.batch, 2)
    print(f"exchanged per step and worker at N=2 (measured, what the worker hands to each "
          f"collective): gradients {sent.get('gradients', 0) / 1024:.0f} KiB, contributions "
          f"{sent.get('contributions', 0) / 1024:.1f} KiB, predictions "
          f"{sent.get('predictions', 0) / 1024:.2f} KiB, loss {sent.get('loss', 0):.0f} B; "
          f"on the wire (cost model, ring all-reduce): "
          f"{sum(model.values()) / 1024:.0f} KiB")
    step = statistics.median(steps_ms["N=1"]) / 1000
    per_worker = args.batch / step
    print(f"compute per step at N=1: {1000 * step:.0f} ms for {args.batch} rows = "
          f"{per_worker:,.0f} rows/s a worker")
    for n in (8, 16, 32, 64):
        c = cost_per_step(N_PARAMS, D, args.batch, n)
        total = sum(c.values())
        print(f"  N = {n:>2}: {total / 1e6:.2f} MB a worker per step, {total / step / 1e6:.0f} "
              f"MB/s at one step per {1000 * step:.0f} ms; linear speed {n * per_worker:,.0f} "
              "rows/s")
    print(f"10^8 rows an hour = {STREAM_RATE:,.0f} rows/s: "
          f"{math.ceil(STREAM_RATE / per_worker)} workers at this worker's speed, if they "
          "scale linearly")


if __name__ == "__main__":
    main()
