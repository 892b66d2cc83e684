"""Cost of ``feature_incremental=True`` as the schema grows: every learned row brings new keys.

Each row ``i`` holds ``--new`` keys never seen before (``f0``, ``f1``, ... in order) plus the
previous row's keys, so after ``r`` rows the learner has ``--new * r`` features. The learner is
``OnlineRegressor(MLP, feature_incremental=True)`` (one hidden layer of ``--hidden`` units, Adam),
driven through ``learn_one``; the script reports the mean time of a step over the ``--span``
rows that end at each feature count in ``--at``, on one CPU thread.

    .venv/bin/python scripts/bench_feature_growth.py               # 500 and 2,000 features
    .venv/bin/python scripts/bench_feature_growth.py --at 500,1000,2000,4000
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial

import torch

from torchstream.learners import OnlineRegressor
from torchstream.models import MLP


def run(at: list[int], new: int, span: int, hidden: int) -> dict[int, float]:
    """Mean seconds per ``learn_one`` over the ``span`` rows that end at each count in ``at``."""
    torch.set_num_threads(1)
    model = OnlineRegressor(partial(MLP, hidden=(hidden,)), feature_incremental=True, seed=0)
    g = torch.Generator().manual_seed(0)
    last = max(at) // new
    values = torch.randn(last * new, generator=g).tolist()
    ends = {n // new: n for n in at}
    times: dict[int, float] = {}
    start = 0.0
    for r in range(last):
        x = {f"f{j}": values[j] for j in range(max(0, (r - 1) * new), (r + 1) * new)}
        if r + span in ends:
            start = time.perf_counter()
        model.learn_one(x, values[r])
        if r + 1 in ends:
            times[ends[r + 1]] = (time.perf_counter() - start) / span
    assert model.n_features == last * new
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--at", default="500,2000", help="feature counts to time at")
    parser.add_argument("--new", type=int, default=2, help="new keys per row")
    parser.add_argument("--span", type=int, default=50, help="rows timed at each count")
    parser.add_argument("--hidden", type=int, default=64)
    args = parser.parse_args(argv)
    at = sorted(int(v) for v in args.at.split(","))
    times = run(at, args.new, args.span, args.hidden)
    print(f"feature_incremental=True, {args.new} new keys per row, MLP hidden=({args.hidden},), "
          f"Adam, 1 thread, torch {torch.__version__}")
    for n in at:
        print(f"{n:>7,} features: {1e3 * times[n]:8.3f} ms per learn_one "
              f"({times[n] / times[at[0]]:5.2f}x the first)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
