"""Time per step of the parameter-distribution heads that FIRES and ERICS read.

One step is what FIRES / ERICS do per batch: ``head.learn(X, y)`` (``epochs=1``) followed by
``head.feature_stats()`` (and ``param_stats()``). Measured for the closed-form ``ProbitHead``
(float64) at ``d in {10, 100, 1000, 10000}`` and the Monte-Carlo ``MLPHead`` (float32,
3 x 100 Softplus, L = 5) at ``d <= 1000``, for batch sizes ``B in {10, 100}``, on the CPU and
on ``cuda`` when it is available (a message says so otherwise); then FIRES's whole ``learn`` step
on the Probit head (checks, head, weights, selection of 10 features). The table gives the median
milliseconds per step over ``--steps`` timed steps after ``--warmup`` untimed ones; on ``cuda``
the device is synchronised before each clock reading.

Run it from the repository root::

    python scripts/bench_fires_erics.py                 # full table
    python scripts/bench_fires_erics.py --steps 5 --warmup 1   # quick run
    python scripts/bench_fires_erics.py --threads 4     # CPU threads for torch (default 1)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from torchstream.models.distributional import MLPHead, ProbitHead
from torchstream.select import FIRES

DIMS = (10, 100, 1000, 10000)
BATCHES = (10, 100)
MLP_MAX_D = 1000


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_ms(step: Callable[[int], object], device: torch.device, steps: int,
               warmup: int) -> float:
    """Median milliseconds of ``step(t)`` over ``steps`` calls after ``warmup`` untimed ones."""
    times = []
    for t in range(steps + warmup):
        _sync(device)
        start = time.perf_counter()
        step(t)
        _sync(device)
        if t >= warmup:
            times.append(1000.0 * (time.perf_counter() - start))
    return statistics.median(times)


def _rows(d: int, B: int, n: int, device: torch.device, dtype: torch.dtype
          ) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device=device).manual_seed(0)
    X = torch.randn(n, B, d, generator=g, device=device, dtype=dtype)
    return X, (X[..., 0] > 0).long()


def time_head(make, d: int, B: int, device: torch.device, steps: int, warmup: int) -> float:
    """Median milliseconds of ``learn`` + ``feature_stats`` + ``param_stats``."""
    head = make(d, device)
    X, y = _rows(d, B, steps + warmup, device, head.dtype)

    def step(t: int) -> None:
        head.learn(X[t], y[t])
        head.feature_stats()
        head.param_stats()

    return _median_ms(step, device, steps, warmup)


def time_fires(d: int, B: int, device: torch.device, steps: int, warmup: int) -> float:
    """Median milliseconds of one ``FIRES(ProbitHead(d), n_selected=10).learn(X, y)``: the
    head's step, the input checks, the weights and the selection."""
    fires = FIRES(ProbitHead(d, device=device), n_selected=10)
    X, y = _rows(d, B, steps + warmup, device, torch.float64)
    return _median_ms(lambda t: fires.learn(X[t], y[t]), device, steps, warmup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per setting")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
        print(f"cuda: {torch.cuda.get_device_name(0)}")
    else:
        print("cuda is not available: CPU only")

    heads = {
        "ProbitHead": lambda d, dev: ProbitHead(d, device=dev),
        "MLPHead": lambda d, dev: MLPHead(d, seed=0, device=dev),
    }
    print(f"median ms per learn + feature_stats + param_stats step, CPU threads={args.threads}")
    print(f"{'head':<11} {'device':<6} {'d':>6} {'B':>4} {'ms/step':>9}")
    for device in devices:
        for name, make in heads.items():
            for d in DIMS:
                if name == "MLPHead" and d > MLP_MAX_D:
                    continue
                for B in BATCHES:
                    ms = time_head(make, d, B, device, args.steps, args.warmup)
                    print(f"{name:<11} {device.type:<6} {d:>6} {B:>4} {ms:>9.3f}", flush=True)
        for d in DIMS:  # FIRES's whole step on the Probit head
            for B in BATCHES:
                ms = time_fires(d, B, device, args.steps, args.warmup)
                print(f"{'FIRES':<11} {device.type:<6} {d:>6} {B:>4} {ms:>9.3f}", flush=True)


if __name__ == "__main__":
    main()
