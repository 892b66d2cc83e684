"""The divergence check of ``OnlineLearner``: its cost per step, and the explosion rule's
margins on healthy and on blown-up training.

    .venv/bin/python scripts/bench_divergence_check.py cost     # µs per step, B = 1 and 64
    .venv/bin/python scripts/bench_divergence_check.py ratios   # loss / reference per run
    .venv/bin/python scripts/bench_divergence_check.py ratios --streams adult,california

``cost`` times ``learn`` on the default MLP spec (input scaling on, as ``torchstream run``)
with the check and with the check replaced by a no-op, on one CPU thread, the variants taking
turns of a few hundred steps; it reports the median turn (load from elsewhere on the machine
hits the variants alike).

``ratios`` runs streams test-then-train (built-in synthetic streams, or the shared real data
sets by name) with the explosion rule measured but not applied, and prints per run the largest
``loss / reference`` (see :mod:`torchstream.learners.divergence`), the first step over the
default factor and the count of non-finite steps.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from typing import Any

import torch

from torchstream.learners import DivergenceWarning, OnlineClassifier, OnlineLearner, online_learner
from torchstream.learners.divergence import LossMonitor
from torchstream.streams import SHARED_DATA, Stream, make_synthetic, shared_data

DEFAULT_FACTOR = LossMonitor().factor


class _Unchecked:
    """Mixin: the step without the divergence check (the baseline of ``cost``)."""

    def _check_step(self, *args: Any) -> None:
        self._initial = None


def _learner(unchecked: bool, on_divergence: str, d: int) -> OnlineLearner:
    model = OnlineClassifier.from_spec("mlp", scale_inputs=True, seed=0,
                                       on_divergence=on_divergence)
    if unchecked:
        model.__class__ = type("Unchecked", (_Unchecked, type(model)), {})
    model.learn(torch.randn(40, d), torch.randint(0, 2, (40,)))  # build; finish the warm-up
    return model


def cost(batch_sizes: list[int], steps: int, repeats: int, d: int) -> None:
    torch.set_num_threads(1)
    print(f"default MLP spec, d={d}, 2 classes, scale_inputs=True, {repeats} turns of "
          f"{steps} steps, torch {torch.__version__}, 1 thread")
    head = ("B", "unchecked µs", "raise µs", "cost", "skip µs", "cost")
    print("{:>4} {:>13} {:>9} {:>13} {:>8} {:>13}".format(*head))
    for B in batch_sizes:
        g = torch.Generator().manual_seed(0)
        X = torch.randn(steps, B, d, generator=g)
        y = (X[..., 0] > 0).long()
        models = {
            "unchecked": _learner(True, "raise", d),
            "raise": _learner(False, "raise", d),
            "skip": _learner(False, "skip", d),
        }
        times: dict[str, list[float]] = {k: [] for k in models}
        for r in range(repeats):  # chunks of `steps` steps, the variants taking turns
            for k, model in models.items():
                t = time.perf_counter()
                for i in range(steps):
                    model.learn(X[i], y[i])
                times[k].append((time.perf_counter() - t) / steps * 1e6)
        med = {k: statistics.median(v) for k, v in times.items()}
        base = med["unchecked"]
        cells = [f"{med[k]:>8.1f} {med[k] - base:>+6.1f} ({100 * (med[k] - base) / base:>+4.0f}%)"
                 for k in ("raise", "skip")]
        print(f"{B:>4} {base:>13.1f} {cells[0]:>23} {cells[1]:>22}")


class _Recording(LossMonitor):
    """The monitor, recording ``loss / reference`` of every step the rule judges."""

    ratios: list[tuple[int, float]]

    def observe(self, loss: float) -> bool:
        ref = self.reference()
        if ref:
            self.ratios.append((len(self.ratios), loss / ref))
        return super().observe(loss)


def _stream(name: str, n: int) -> Stream:
    """A built-in synthetic stream, or the first ``n`` rows of a shared real data set."""
    if name in SHARED_DATA:
        return shared_data(name, nrows=n)
    return make_synthetic(name, n_samples=n, seed=0)


def ratios(names: list[str], lrs: list[float], batch_sizes: list[int], n: int) -> None:
    print(f"max loss / reference per run ({n} rows, test-then-train, default MLP spec, the rule "
          f"measured, not applied); 'first' = first step over the default factor "
          f"{DEFAULT_FACTOR:g}")
    for name in names:
        for lr in lrs:
            for B in batch_sizes:
                stream = _stream(name, n)
                model = online_learner(
                    "mlp", task=stream.task, lr=lr, scale_inputs=True, seed=0,
                    on_divergence="warn", divergence_factor=math.inf,
                )
                model._monitor.__class__ = _Recording
                model._monitor.ratios = []
                steps: list[int] = []  # the step index of each judged loss
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DivergenceWarning)
                    for step, (X, y) in enumerate(stream.batches(B)):
                        with torch.no_grad():
                            model(X)
                        model.learn(X, y)
                        steps += [step] * (len(model._monitor.ratios) - len(steps))
                judged = [(r, steps[i]) for i, r in model._monitor.ratios]
                worst = max(judged, default=(0.0, None))
                first = next((s for r, s in judged if r > DEFAULT_FACTOR), None)
                print(f"{name:>14} lr={lr:<6g} B={B:<3} max ratio {worst[0]:10.3g} at step "
                      f"{worst[1]!s:>5}  first over {DEFAULT_FACTOR:g}: {first!s:>5}  "
                      f"non-finite: {model.divergences or 0}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("cost")
    c.add_argument("--batch-sizes", default="1,64")
    c.add_argument("--steps", type=int, default=200)
    c.add_argument("--repeats", type=int, default=50)
    c.add_argument("--features", type=int, default=9)
    r = sub.add_parser("ratios")
    r.add_argument("--streams", default="agrawal-drift,sea-drift,stagger-drift,hyperplane,friedman")
    r.add_argument("--lrs", default="0.001,0.005,0.05,1,10")
    r.add_argument("--batch-sizes", default="1,4")
    r.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args(argv)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    if args.what == "cost":
        cost(sizes, args.steps, args.repeats, args.features)
    else:
        ratios(args.streams.split(","), [float(v) for v in args.lrs.split(",")], sizes, args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
