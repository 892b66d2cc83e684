"""Cost of pairwise SAGE interactions (``IncrementalInteraction``) next to iSAGE on the same model,
and the accuracy of both games' closed forms.

**Cost.** A torch MLP 10-64-1 (ReLU, random weights, fixed seed) explained with squared loss on
rows of 10 standard normal features (target: the model's output plus noise), batches of
``--batch`` rows, a geometric reservoir of 100 rows, joint imputation, ``m = 1``, torch on one
thread. Settings, interleaved per repeat (only the explain loop is timed; the first batch only
fills the reservoir in all of them and is left out): iSAGE with the paper's EMA empty prediction,
iSAGE with the imputed empty prediction (the game the interactions use, and
``torchstream run``'s), interactions with ``top_k = 5`` (10 pairs) and with all 45 pairs. The
table gives the median time per batch, the ratio to each iSAGE and the model rows per batch
(``B (1 + (d - 1) m)``, ``B (1 + d m)``, ``B (1 + d m + 2 P m)``). **Memory**: the bytes of the
interaction explainer's state (``state_dict`` tensors) and the process's resident set after
``--rows`` rows and after five times as many: the state has a fixed size (``O(d^2)`` pair sums
and iSAGE's reservoir), so neither grows with the stream.

**Accuracy** (``--accuracy``): the closed forms of the class docstring with independent standard
normal features, squared loss and fresh imputation rows (no reservoir), ``--accuracy-rows``
rows, ``alpha = 2e-5``: ``f = x0 x1 + x2`` (SII(x0, x1) = 1, others 0; SAGE 0.5, 0.5, 1) and
``f = x0 x1 x2`` (every pair 0.5; SAGE 1/3), in SAGE's game (``m = 2``, variance correction) and
in the single-draw game (``m = 1``, every value doubled): estimate, truth, the estimate's
half-width at ``delta = 0.05`` and the error in half-widths.

Run it from the repository root::

    python scripts/bench_interactions.py                 # cost, 3 repeats of 6,400 rows
    python scripts/bench_interactions.py --accuracy      # also the closed forms (~1 min)
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from torchstream.explain import IncrementalInteraction, IncrementalSAGE
from torchstream.explain.storage import FreshSampler

D = 10


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, 1)).eval()


def stream(rows: int, model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    X = torch.randn(rows, D, generator=g)
    with torch.no_grad():
        y = model(X).view(-1) + 0.1 * torch.randn(rows, generator=g)
    return X, y


def settings(model: nn.Module) -> dict[str, Callable[[], object]]:
    common = {"alpha": 0.001, "storage_size": 100, "seed": 0}
    return {
        "isage (ema empty)": lambda: IncrementalSAGE(model, "mse", D, **common),
        "isage (imputed empty)": lambda: IncrementalSAGE(
            model, "mse", D, empty_prediction="imputed", **common),
        "interactions top_k=5": lambda: IncrementalInteraction(model, "mse", D, top_k=5,
                                                               **common),
        "interactions all 45 pairs": lambda: IncrementalInteraction(model, "mse", D, top_k=None,
                                                                    **common),
    }


def model_rows(name: str, b: int) -> int:
    if name.startswith("isage (ema"):
        return b * (1 + (D - 1))
    if name.startswith("isage"):
        return b * (1 + D)
    pairs = 10 if "top_k" in name else 45
    return b * (1 + D + 2 * pairs)


def time_once(make: Callable[[], object], X: torch.Tensor, y: torch.Tensor, b: int) -> float:
    exp = make()
    exp.explain(X[:b], y[:b])  # fills the reservoir
    exp.explain(X[b:2 * b], y[b:2 * b])  # starts the ranking (interactions)
    start = time.perf_counter()
    n = 0
    for s in range(2 * b, X.shape[0] - b + 1, b):
        exp.explain(X[s:s + b], y[s:s + b])
        n += 1
    return (time.perf_counter() - start) / n


def state_bytes(exp: IncrementalInteraction) -> int:
    total = 0

    def walk(v: object) -> None:
        nonlocal total
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, dict):
            for w in v.values():
                walk(w)
        elif isinstance(v, (list, tuple)):
            for w in v:
                walk(w)

    walk(exp.state_dict())
    return total


def cost(args: argparse.Namespace) -> None:
    model = make_model()
    b = args.batch
    X, y = stream(args.rows, model)
    makers = settings(model)
    times: dict[str, list[float]] = {k: [] for k in makers}
    for _ in range(args.repeats):
        for name, make in makers.items():
            times[name].append(time_once(make, X, y, b))
    med = {k: statistics.median(v) for k, v in times.items()}
    base_ema, base_imp = med["isage (ema empty)"], med["isage (imputed empty)"]
    print(f"d = {D}, B = {b}, m = 1, MLP 10-64-1, {args.rows:,} rows, median of "
          f"{args.repeats}, torch threads {torch.get_num_threads()}")
    print(f"{'setting':28s} {'ms/batch':>9s} {'/isage ema':>11s} {'/isage imp':>11s} "
          f"{'model rows':>11s}")
    for name, t in med.items():
        print(f"{name:28s} {1e3 * t:9.2f} {t / base_ema:11.2f} {t / base_imp:11.2f} "
              f"{model_rows(name, b):11,d}")
    exp = IncrementalInteraction(model, "mse", D, top_k=5, alpha=0.001, seed=0)
    Xl, yl = stream(5 * args.rows, model)
    marks = {}
    for s in range(0, 5 * args.rows, b):
        exp.explain(Xl[s:s + b], yl[s:s + b])
        if s + b in (args.rows, 5 * args.rows):
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            marks[s + b] = (state_bytes(exp), rss)
    for rows, (nbytes, rss) in marks.items():
        print(f"after {rows:7,d} rows: state {nbytes:,d} bytes, max RSS {rss:.1f} MiB")


def accuracy(args: argparse.Namespace) -> None:
    models = {
        "x0*x1+x2": (lambda Z: Z[:, 0] * Z[:, 1] + Z[:, 2], (1.0, 0.0, 0.0), (0.5, 0.5, 1.0)),
        "x0*x1*x2": (lambda Z: Z[:, 0] * Z[:, 1] * Z[:, 2], (0.5, 0.5, 0.5), (1 / 3,) * 3),
    }
    games = {"sage (m=2, corrected)": ({"n_samples": 2, "variance_correction": True}, 1.0),
             "single draw (m=1)": ({}, 2.0)}
    rows = args.accuracy_rows
    for mname, (f, sii, sage) in models.items():
        g = torch.Generator().manual_seed(1)
        X = torch.randn(rows, 3, generator=g, dtype=torch.float64)
        y = f(X)
        for gname, (kwargs, scale) in games.items():
            draw = lambda n, gen: torch.randn(n, 3, generator=gen, dtype=torch.float64)
            exp = IncrementalInteraction(f, "mse", 3, alpha=2e-5, seed=3,
                                         storage=FreshSampler(draw, 3, seed=5), **kwargs)
            for s in range(0, rows, 5000):
                exp.explain(X[s:s + 5000], y[s:s + 5000])
            est, hw = exp.interaction, exp.interaction_half_width(0.05)
            parts = []
            for (a, c), truth in zip(((0, 1), (0, 2), (1, 2)), sii):
                v, e = float(est[a, c]), float(hw[a, c])
                parts.append(f"SII{a}{c} {v:+.3f} (truth {scale * truth:.2f}, ±{e:.3f}, "
                             f"{abs(v - scale * truth) / e:.2f} hw)")
            phi, phw = exp.importance, exp.half_width(0.05)
            parts.append("SAGE " + ", ".join(
                f"{float(phi[j]):.3f}/{scale * sage[j]:.2f}±{float(phw[j]):.3f}" for j in range(3)))
            print(f"{mname:9s} {gname:22s} " + "; ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=6400)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--accuracy", action="store_true")
    parser.add_argument("--accuracy-rows", type=int, default=400_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cost(args)
    if args.accuracy:
        accuracy(args)


if __name__ == "__main__":
    main()
