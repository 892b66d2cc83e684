"""Rows per second of one stream learned and explained by 1 and by 2 worker processes
(:mod:`torchstream.distributed.data_parallel`), and the cost model: bytes each worker sends per
step against the compute of a step, and the workers a stream of 10^8 rows an hour needs.

The workload: iSAGE (empty prediction imputed) on an MLP d-128-128-2 learned online, a
Hyperplane stream of d = 100 features, B = 64 rows per worker and step (a global batch of
N x 64 rows). Start-up (process spawn, imports) is not counted: the loop's own seconds.

    python scripts/bench_data_parallel.py --rows 1280
"""

from __future__ import annotations

import argparse
import math
import os
from functools import partial

from torchstream.distributed.data_parallel import WorkerSetup, cost_per_step, run_data_parallel
from torchstream.explain import IncrementalSAGE
from torchstream.learners import OnlineClassifier
from torchstream.models import MLP
from torchstream.streams.synthetic.hyperplane import Hyperplane

D, HIDDEN = 100, (128, 128)


def build(rank: int, *, rows: int) -> WorkerSetup:
    stream = Hyperplane(n_features=D, seed=0, n_samples=rows)
    learner = OnlineClassifier(partial(MLP, hidden=HIDDEN), lr=1e-3, scale_inputs=True, seed=0)
    isage = IncrementalSAGE(learner, "cross_entropy", D, alpha=0.01, seed=10 + rank,
                            empty_prediction="imputed")
    return WorkerSetup(stream, learner, [isage])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1280)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    n_params = D * HIDDEN[0] + HIDDEN[0] + HIDDEN[0] * HIDDEN[1] + HIDDEN[1] + HIDDEN[1] * 2 + 2
    print(f"{os.cpu_count()} CPUs; iSAGE on MLP {D}-{HIDDEN[0]}-{HIDDEN[1]}-2 "
          f"({n_params:,} parameters), B = {args.batch} rows per worker, {args.rows:,} rows")
    speeds = {}
    for workers in (1, 2):
        result = run_data_parallel(partial(build, rows=args.rows), workers, args.batch)
        speeds[workers] = result.rows_per_second
        steps = math.ceil(result.rows / (workers * args.batch))
        model = cost_per_step(n_params, D, args.batch, workers)
        print(f"N = {workers}: {result.rows_per_second:,.0f} rows/s ({result.seconds:.1f} s, "
              f"{1000 * result.seconds / steps:.0f} ms a step); exchanged per step: an "
              f"all_reduce of {result.bytes_per_step['gradients'] / 1024:.0f} KiB of "
              f"gradients and an all_gather of {result.bytes_per_step['contributions'] / 1024:.0f}"
              f" KiB of contributions a worker; on the wire a worker sends "
              f"{(model['gradients'] + model['contributions']) / 1024:.0f} KiB")
    print(f"speed-up N = 2 over N = 1: {speeds[2] / speeds[1]:.2f}x")
    need = 1e8 / 3600
    print(f"10^8 rows an hour = {need:,.0f} rows/s: {math.ceil(need / speeds[1])} workers like "
          "N = 1 here, scaling linearly (the compute of a step dwarfs its exchange)")


if __name__ == "__main__":
    main()
