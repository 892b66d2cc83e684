"""Speed of the Dynamic Model Tree next to river's Hoeffding tree on the same stream.

Both trees run test-then-train (:class:`~torchstream.evaluate.Prequential`) over the same
batches of ``--batch`` rows (default 45) of the same stream: the first ``--rows`` rows (default
20,000) of ``electricity.csv`` when :func:`~torchstream.streams.data_path` finds it (read with
:func:`~torchstream.streams.read_csv`), else the synthetic SEA stream (noise 0.1; the table says
which). The Dynamic Model Tree is built by ``DynamicModelTree.for_stream(stream)`` with its
defaults, the Hoeffding tree is ``river.tree.HoeffdingTreeClassifier()`` with its defaults,
wrapped by :class:`~torchstream.learners.RiverLearner` (one ``predict_proba_one`` and one
``learn_one`` per row, as river's own loop).

Timed: the learner's test and train seconds of every step (the runner's per-step records), in
microseconds per row; the whole run (metrics and records included) is given beside it. Every
model runs ``--repeats`` times, interleaved (DMT, Hoeffding tree, DMT, ...); the table gives
the medians, the ratio (Hoeffding tree time / DMT time: above 1 the DMT is faster) and the
runner's F1 of each (the same for every repeat: both models are deterministic). Torch runs on
one thread.

Run it from the repository root::

    python scripts/bench_dmt.py                 # 20,000 rows, 3 repeats
    python scripts/bench_dmt.py --rows 2000 --repeats 1   # smoke run
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from collections.abc import Callable

import torch
from river import tree

from torchstream.base import Learner
from torchstream.evaluate import Prequential
from torchstream.learners import RiverLearner
from torchstream.streams import SEA, Stream, data_path, read_csv
from torchstream.trees import DynamicModelTree

MODELS = ("DMT", "Hoeffding tree")


def load_stream(n_rows: int) -> tuple[Stream, str]:
    """The first ``n_rows`` rows of electricity, else SEA; with a line naming the stream."""
    path = data_path("electricity.csv")
    if path.exists():
        table = read_csv(path, target="class", nrows=n_rows)
        return table, f"electricity.csv, first {table.n_samples:,} rows"
    sea = SEA(variant=0, seed=0, n_samples=n_rows, noise=0.1)
    return sea, f"synthetic SEA (variant 0, noise 0.1, seed 0), {n_rows:,} rows"


def builders(stream: Stream) -> dict[str, Callable[[], Learner]]:
    return {
        "DMT": lambda: DynamicModelTree.for_stream(stream),
        "Hoeffding tree": lambda: RiverLearner.for_stream(tree.HoeffdingTreeClassifier(), stream),
    }


def run_once(learner: Learner, stream: Stream, batch: int) -> dict[str, float]:
    """One test-then-train pass: learner and loop microseconds per row, and the F1."""
    result = Prequential(learner, stream, batch_size=batch).run()
    model_s = sum(r["test_seconds"] + r["train_seconds"] for r in result.steps)
    return {
        "us_per_row": 1e6 * model_s / result.n_rows,
        "loop_us_per_row": 1e6 * result.seconds / result.n_rows,
        "f1": result.metrics["f1"],
    }


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows of the stream")
    parser.add_argument("--batch", type=int, default=45, help="rows per test-then-train step")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats per model")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    for name in ("rows", "batch", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    torch.set_num_threads(1)
    stream, described = load_stream(args.rows)
    make = builders(stream)
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODELS}
    for _ in range(args.repeats):
        for m in MODELS:
            runs[m].append(run_once(make[m](), stream, args.batch))
    table = {
        m: {k: statistics.median(r[k] for r in runs[m]) for k in runs[m][0]} for m in MODELS
    }
    ratio = table["Hoeffding tree"]["us_per_row"] / table["DMT"]["us_per_row"]
    print(f"stream: {described}; batches of {args.batch}; median of {args.repeats} interleaved "
          f"repeats; torch {torch.__version__}, 1 thread; {platform.processor() or platform.machine()}")
    print(f"{'model':<16}{'us/row (learner)':>18}{'us/row (loop)':>15}{'F1':>8}")
    for m in MODELS:
        t = table[m]
        print(f"{m:<16}{t['us_per_row']:>18.1f}{t['loop_us_per_row']:>15.1f}{t['f1']:>8.3f}")
    print(f"ratio (Hoeffding tree / DMT time, above 1: the DMT is faster): {ratio:.2f}x")
    out: dict[str, object] = {"stream": described, "batch": args.batch,
                              "repeats": args.repeats, "models": table, "ratio": ratio}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return out


if __name__ == "__main__":
    main()
