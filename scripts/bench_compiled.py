"""Speed of the compiled iPFI step (``IncrementalPFI(..., compile=True)``) next to the eager one.

Workload: a torch MLP regressor 10-64-1 (ReLU), pre-trained briefly on Friedman's regression
function (10 uniform features, the target uses the first five), squared loss, a geometric
reservoir of 100 rows, ``alpha = 0.001``. Settings: ``B = 1`` with ``K = 1`` and ``K = 5``, and
``B = 64`` with ``K = 1``. Torch runs on one thread.

Per setting one eager and one compiled explainer are built and warmed up (untimed) on the first
batches: the first batch fills the storage, the second is explained eagerly by both (it checks
the model's output against the loss), the third compiles the step (its duration is
``compile_seconds``). Then the same ``--rows`` rows are explained by each, ``--repeats`` times,
interleaved; the table gives the median µs per row. ``bare`` is the time of the model calls
alone on as many rows as a step evaluates (``(1 + d K) B`` rows per step: the batch and its
``d K`` modified copies), under ``torch.no_grad()``, per explained row; ``floor ratio`` is ours
over bare. If ``ixai`` (0.1.3) is importable, its ``IncrementalPFI`` explains the same model
(a ``dict -> {"output": float}`` model function and a callable squared loss, one row at a
time) on ``--ixai-rows`` rows, and its µs per row and its ratio to our compiled step are shown;
ixai is a peer measured for comparison, not a dependency (``pip install --no-deps
ixai==0.1.3``).

Compiled kernels are cached on disk by torch inductor (its FX graph cache, in
``$TORCHINDUCTOR_CACHE_DIR``, by default ``torchinductor_<user>`` in the system's temporary
directory): the first run on a machine pays the full compile, later runs (and later explainers
in the same process) find the kernels there and only trace the step. ``--fresh-cache`` points
the cache at a new temporary directory, to time a cold compile.

Run it from the repository root::

    python scripts/bench_compiled.py                 # 2000 rows, 3 repeats
    python scripts/bench_compiled.py --fresh-cache   # the cold compile time
    python scripts/bench_compiled.py --rows 300 --repeats 1 --ixai-rows 100   # smoke run
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torchstream.explain.ipfi import IncrementalPFI  # noqa: E402

D = 10
HIDDEN = 64
ALPHA = 0.001
STORAGE = 100
SETTINGS = [(1, 1), (1, 5), (64, 1)]  # (B, K)


def friedman(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Friedman #1: ``10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4 + N(0, 1)``."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, D, generator=g)
    y = (10 * torch.sin(math.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2
         + 10 * X[:, 3] + 5 * X[:, 4] + torch.randn(n, generator=g))
    return X, y


def trained_mlp(X: torch.Tensor, y: torch.Tensor) -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(D, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(300):
        opt.zero_grad()
        ((net(X).squeeze(1) - y) ** 2).mean().backward()
        opt.step()
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net


def batches(X: torch.Tensor, y: torch.Tensor, b: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(X[i : i + b], y[i : i + b]) for i in range(0, X.shape[0] - b + 1, b)]


def time_explain(explainer: IncrementalPFI, data: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    start = time.perf_counter()
    for Xb, yb in data:
        explainer.explain(Xb, yb)
    return time.perf_counter() - start


def time_bare(net: nn.Module, b: int, k: int, steps: int) -> float:
    """The model calls of ``steps`` iPFI steps: ``(1 + d K) B`` rows each."""
    Z = torch.rand((1 + D * k) * b, D)
    with torch.no_grad():
        start = time.perf_counter()
        for _ in range(steps):
            net(Z)
        return time.perf_counter() - start


def import_ixai() -> dict[str, Any] | None:
    try:
        from ixai.explainer import IncrementalPFI as IxaiPFI
        from ixai.storage import GeometricReservoirStorage
    except ImportError:
        return None
    return {"pfi": IxaiPFI, "storage": GeometricReservoirStorage}


def time_ixai(
    ix: dict[str, Any], net: nn.Module, X: torch.Tensor, y: torch.Tensor, k: int
) -> float:
    """µs per row of ixai's iPFI on the same model, one row at a time."""
    names = [f"x{j}" for j in range(D)]

    def model_fn(x: dict) -> dict:
        return {"output": net(torch.tensor([[x[n] for n in names]])).item()}

    def loss_fn(y_true: float, y_pred: dict) -> float:
        return (y_true - y_pred["output"]) ** 2

    random.seed(0)
    np.random.seed(0)
    rows = [dict(zip(names, r)) for r in X.tolist()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = ix["pfi"](model_function=model_fn, loss_function=loss_fn, feature_names=names,
                        storage=ix["storage"](size=STORAGE, store_targets=False),
                        n_inner_samples=k, smoothing_alpha=ALPHA, dynamic_setting=True)
        with torch.no_grad():
            start = time.perf_counter()
            for x, t in zip(rows, y.tolist()):
                exp.explain_one(x, t)
            elapsed = time.perf_counter() - start
    return elapsed / len(rows) * 1e6


def run_setting(net: nn.Module, X: torch.Tensor, y: torch.Tensor, b: int, k: int, rows: int,
                repeats: int) -> dict[str, float]:
    make: Callable[[bool], IncrementalPFI] = lambda compile: IncrementalPFI(
        net, "mse", D, alpha=ALPHA, storage_size=STORAGE, n_samples=k, seed=0, compile=compile)
    eager, compiled = make(False), make(True)
    warm = batches(X[: 3 * b], y[: 3 * b], b)
    for Xb, yb in warm:
        eager.explain(Xb, yb)
        compiled.explain(Xb, yb)
    if compiled.compile_off_reason is not None:
        raise SystemExit(f"the compiled step is off: {compiled.compile_off_reason}")
    data = batches(X[3 * b : 3 * b + rows], y[3 * b : 3 * b + rows], b)
    n_rows = len(data) * b
    times: dict[str, list[float]] = {"eager": [], "compiled": [], "bare": []}
    for _ in range(repeats):
        times["eager"].append(time_explain(eager, data))
        times["compiled"].append(time_explain(compiled, data))
        times["bare"].append(time_bare(net, b, k, len(data)))
    out = {name: statistics.median(v) / n_rows * 1e6 for name, v in times.items()}
    out["compile_seconds"] = compiled.compile_seconds
    scale = max(float(eager.importance.abs().max()), 1e-300)
    out["rel_diff"] = float((eager.importance - compiled.importance).abs().max()) / scale
    return out


def profile_b1(net: nn.Module, X: torch.Tensor, y: torch.Tensor, rows: int) -> None:
    """The torch profiler's table of 200 compiled B = 1, K = 1 steps (self CPU time): where
    the time of one compiled step goes beside the model's own kernels."""
    explainer = IncrementalPFI(net, "mse", D, alpha=ALPHA, storage_size=STORAGE, seed=0,
                               compile=True)
    for Xb, yb in batches(X[:3], y[:3], 1):
        explainer.explain(Xb, yb)
    data = batches(X[3 : 3 + min(rows, 200)], y[3 : 3 + min(rows, 200)], 1)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        time_explain(explainer, data)
    print(f"\nprofile of {len(data)} compiled steps, B = 1, K = 1 (self CPU time):")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000, help="timed rows per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ixai-rows", type=int, default=300, help="rows ixai explains")
    parser.add_argument("--profile", action="store_true",
                        help="also print the torch profiler's table of compiled B = 1 steps")
    parser.add_argument("--fresh-cache", action="store_true",
                        help="compile into a new, empty inductor cache (a cold compile)")
    args = parser.parse_args(argv)
    if args.fresh_cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor_")
    torch.set_num_threads(1)
    X_pre, y_pre = friedman(1000, seed=1)
    net = trained_mlp(X_pre, y_pre)
    n = 3 * 64 + max(args.rows, 64 * 4) + args.ixai_rows
    X, y = friedman(n, seed=2)
    ix = import_ixai()
    print(f"torch {torch.__version__}, 1 thread; MLP {D}-{HIDDEN}-1, mse, alpha={ALPHA}, "
          f"storage {STORAGE}; median of {args.repeats}; µs per explained row")
    header = (f"{'B':>3} {'K':>2} | {'eager':>8} {'compiled':>9} {'speed-up':>8} | {'bare':>7} "
              f"{'eager/bare':>10} {'compiled/bare':>13} | {'compile s':>9} | {'ixai':>8} "
              f"{'ixai/compiled':>13}")
    print(header)
    print("-" * len(header))
    for b, k in SETTINGS:
        rows = max(args.rows // b, 4) * b
        r = run_setting(net, X, y, b, k, rows, args.repeats)
        ixai = "-"
        ratio = "-"
        if ix is not None and b == 1:
            us = time_ixai(ix, net, X[-args.ixai_rows:], y[-args.ixai_rows:], k)
            ixai, ratio = f"{us:8.1f}", f"{us / r['compiled']:13.1f}"
        print(f"{b:>3} {k:>2} | {r['eager']:8.1f} {r['compiled']:9.1f} "
              f"{r['eager'] / r['compiled']:8.2f} | {r['bare']:7.1f} "
              f"{r['eager'] / r['bare']:10.2f} {r['compiled'] / r['bare']:13.2f} | "
              f"{r['compile_seconds']:9.2f} | {ixai:>8} {ratio:>13}")
        if r["rel_diff"] > 1e-5:  # both explained the same rows with the same draws
            print(f"    warning: eager and compiled importances differ by {r['rel_diff']:.3g} "
                  f"(relative to the largest)")
    if ix is None:
        print("ixai is not installed (pip install --no-deps ixai==0.1.3): its column is empty")
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "torch's default inductor cache")
    print(f"compile s: the first compiled batch of each setting (inductor cache: {cache})")
    if args.profile:
        profile_b1(net, X, y, args.rows)


if __name__ == "__main__":
    main()
