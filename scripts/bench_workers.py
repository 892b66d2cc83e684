"""Rows per second of one stream learned and explained by 1 and by 2 worker processes
(:mod:`torchstream.distributed.data_parallel`, the loop of ``torchstream run --workers N``),
interleaved and repeated, and the cost model: the bytes each worker sends per step against the
compute of a step, and the workers a stream of 10^8 rows an hour needs.

The workload: iSAGE (empty prediction imputed) on an MLP d-128-128-2 learned online, a
Hyperplane stream of d = 100 features, B = 64 rows per worker and step (a global batch of
N x 64 rows). Each repeat runs N = 1 and N = 2 (the order alternates between repeats) and, as a
reference, one plain process (the runner without workers, in this process) and two plain
processes side by side with no exchange ("2 apart": the sum of their rows per second, what
two workers could reach here if exchanging and waiting cost nothing). What is timed is
the steady state: every process runs the workload once untimed (a fresh process's first pass is
slow: each shape's first calls, about a second in all), then again, timed; process start-up and
imports are not counted.

    python scripts/bench_workers.py --rows 15360 --repeats 5 [--source river] [--no-pin]

15,360 rows make 120 global batches at N = 2 (fewer steps leave the timing to a few slow ones).
``--no-pin``: the workers are not pinned to a CPU each (``launch(..., pin=False)``).
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

from torchstream.distributed.data_parallel import ParallelPrequential, WorkerSetup, cost_per_step
from torchstream.distributed.exchange import Exchange
from torchstream.distributed.processes import WorkerFailed, launch
from torchstream.distributed.sharded import ShardedLearner, join_explainer
from torchstream.evaluate import Prequential
from torchstream.explain import IncrementalSAGE
from torchstream.learners import OnlineClassifier, use_threads
from torchstream.models import MLP
from torchstream.streams import from_numpy
from torchstream.streams.base import Stream
from torchstream.streams.synthetic.hyperplane import Hyperplane

D, HIDDEN = 100, (128, 128)
N_PARAMS = D * HIDDEN[0] + HIDDEN[0] + HIDDEN[0] * HIDDEN[1] + HIDDEN[1] + HIDDEN[1] * 2 + 2
STREAM_RATE = 1e8 / 3600  # rows a second of 10^8 rows an hour


def build(rank: int, *, rows: int, source: str = "memory") -> WorkerSetup:
    """The same stream and model on every rank; iSAGE seeded per rank. ``source``: "river"
    generates each row as the stream is read (river's Hyperplane, a Python loop per row, in
    every worker); "memory" generates the rows before the run and reads them from a tensor."""
    stream: Stream = Hyperplane(n_features=D, seed=0, n_samples=rows)
    if source == "memory":
        X, y = next(iter(stream.batches(rows)))
        stream = from_numpy(X, y, name="hyperplane-in-memory")
    learner = OnlineClassifier(partial(MLP, hidden=HIDDEN), lr=1e-3, scale_inputs=True, seed=0)
    isage = IncrementalSAGE(learner, "cross_entropy", D, alpha=0.01, seed=10 + rank,
                            empty_prediction="imputed")
    return WorkerSetup(stream, learner, [isage])


def timed(exchange: Exchange, rows: int, batch: int, source: str
          ) -> tuple[float, float, dict[str, float]] | None:
    """A worker of the data-parallel loop (what ``run_data_parallel`` runs), twice: the first
    run sets this process up (every shape's first call is slow), the second is timed. Rank 0's
    rows per second and seconds per global batch, and its bytes per step."""
    use_threads(1)
    for _ in range(2):
        exchange.explainers = []
        setup = build(exchange.rank, rows=rows, source=source)
        learner = ShardedLearner(setup.learner, exchange)
        explainers = [join_explainer(e, exchange) for e in setup.explainers]
        runner = ParallelPrequential(learner, setup.stream, batch_size=batch,
                                     plugins=explainers, record_steps=False)
        sent, steps = dict(exchange.bytes), exchange.steps
        result = runner.run()
    if exchange.rank != 0:
        return None
    steps = exchange.steps - steps
    return (result.rows_per_second, result.seconds / result.n_steps,
            {k: (v - sent[k]) / steps for k, v in exchange.bytes.items()})


def plain(rows: int, batch: int, source: str) -> float:
    """Rows per second of one process without workers (the same stream, model and iSAGE)."""
    setup = build(0, rows=rows, source=source)
    runner = Prequential(setup.learner, setup.stream, batch_size=batch,
                         plugins=list(setup.explainers), record_steps=False)
    return runner.run().rows_per_second


def independent(exchange: Exchange, rows: int, batch: int, source: str) -> float | None:
    """Each worker runs the plain loop on its own (no exchange), once untimed then timed, the
    timed passes started together: the sum of their rows per second is what two workers
    could reach on this machine if the exchange and the waiting cost nothing."""
    use_threads(1)
    plain(rows, batch, source)
    dist.barrier()
    mine = plain(rows, batch, source)
    parts = exchange.gather_objects(mine)
    return None if parts is None else float(sum(parts))  # type: ignore[arg-type]


def exchange_probe(exchange: Exchange, batch: int, repeats: int) -> float:
    """Median seconds of one step's synchronisation between the workers with no compute around
    it (:meth:`Exchange.synchronise`, as a step calls it: the global batch's predictions and
    iSAGE's contributions, the gradients, the loss and the stop request in one all_reduce)."""
    use_threads(1)
    X = torch.zeros(exchange.workers * batch, D)
    grads = torch.zeros(N_PARAMS)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        exchange.start(X)
        exchange.queue(torch.zeros(exchange.local_n, 2), "predictions", lambda v: None)
        exchange.queue(torch.zeros(exchange.local_n, D, dtype=torch.float64), "contributions",
                       lambda v: None)
        exchange.synchronise(grads, [0.0, 0.0])
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} / {five:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=15360)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--source", choices=["memory", "river"], default="memory",
                        help="rows read from memory, or generated row by row in every worker")
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True,
                        help="each worker on a CPU of its own (launch's pin)")
    args = parser.parse_args()
    use_threads(1)
    print(f"{os.cpu_count()} CPUs; iSAGE on MLP {D}-{HIDDEN[0]}-{HIDDEN[1]}-2 "
          f"({N_PARAMS:,} parameters), B = {args.batch} rows per worker, {args.rows:,} rows a "
          f"run (each process runs it once untimed first), stream from {args.source}, "
          f"{args.repeats} repeats; {load()} at the start")
    speeds: dict[str, list[float]] = {"plain": [], "N=1": [], "N=2": [], "2 apart": []}
    steps_ms: dict[str, list[float]] = {"N=1": [], "N=2": []}
    sent: dict[str, float] = {}
    plain(args.rows, args.batch, args.source)  # this process's one-time set-up
    for rep in range(args.repeats):
        order = (1, 2) if rep % 2 == 0 else (2, 1)
        line = [f"repeat {rep + 1}:"]
        for workers in order:
            out = launch(partial(timed, rows=args.rows, batch=args.batch, source=args.source),
                         workers, pin=args.pin)
            assert out is not None
            key = f"N={workers}"
            speeds[key].append(out[0])
            steps_ms[key].append(1000 * out[1])
            if workers == 2:
                sent = out[2]
            line.append(f"{key} {out[0]:,.0f} rows/s ({steps_ms[key][-1]:.0f} ms a step)")
        speeds["plain"].append(plain(args.rows, args.batch, args.source))
        line.append(f"plain {speeds['plain'][-1]:,.0f} rows/s")
        apart = launch(partial(independent, rows=args.rows, batch=args.batch,
                               source=args.source), 2, pin=args.pin)
        assert apart is not None
        speeds["2 apart"].append(apart)
        line.append(f"2 apart {apart:,.0f} rows/s")
        print("  ".join(line) + f"  [{load()}]", flush=True)
    for key, values in speeds.items():
        print(f"{key:>7}: median {statistics.median(values):,.0f} rows/s, min "
              f"{min(values):,.0f}, max {max(values):,.0f}")
    ratios = [b / a for a, b in zip(speeds["N=1"], speeds["N=2"])]
    print(f"N=2 / N=1, per repeat: {', '.join(f'{r:.2f}' for r in ratios)}; median "
          f"{statistics.median(ratios):.2f}x")
    exchange_s = launch(partial(exchange_probe, batch=args.batch, repeats=300), 2)
    print(f"the synchronisation of one step alone, 2 workers: {1000 * exchange_s:.2f} ms (median "
          "of 300)")
    model = cost_per_step(N_PARAMS, D, args.batch, 2)
    print(f"exchanged per step and worker at N=2 (measured, what the worker hands to each "
          f"collective): gradients {sent.get('gradients', 0) / 1024:.0f} KiB, contributions "
          f"{sent.get('contributions', 0) / 1024:.1f} KiB, predictions "
          f"{sent.get('predictions', 0) / 1024:.2f} KiB, loss {sent.get('loss', 0):.0f} B; "
          f"sent (cost model, ring all-reduce): "
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
    try:
        main()
    except WorkerFailed as e:
        raise SystemExit(f"{e}\n{e.details}") from None
