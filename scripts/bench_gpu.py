"""CPU against CUDA in one run: explainers, FIRES / ERICS heads and training, with the ratios.

    python scripts/bench_gpu.py [--repeats 3] [--steps 50]

Every workload runs the same seeded computation on each device (CPU with one torch thread;
CUDA timed with synchronisation); the table gives the median milliseconds per step and the CPU /
CUDA ratio. Without a CUDA device only the CPU column is measured, and the script says so.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from torchstream.drift import ERICS
from torchstream.explain import IncrementalPFI, IncrementalSAGE
from torchstream.learners import OnlineLearner
from torchstream.models import MLP, MLPHead, ProbitHead
from torchstream.select import FIRES

Workload = Callable[[torch.device], Callable[[], None]]


def explainer(kind: str, d: int = 100, k: int = 10, batch: int = 256) -> Workload:
    def setup(device: torch.device) -> Callable[[], None]:
        g = torch.Generator().manual_seed(0)
        model = MLP(d, k, hidden=(128, 128)).to(device).eval()

        def model_fn(Z: torch.Tensor) -> torch.Tensor:
            return torch.softmax(model(Z), dim=1)

        cls = IncrementalPFI if kind == "ipfi" else IncrementalSAGE
        exp = cls(model_fn, "cross_entropy", d, alpha=0.01, storage_size=1000, seed=0)
        X = torch.randn(batch, d, generator=g).to(device)
        y = torch.randint(k, (batch,), generator=g).to(device)
        exp.explain(X, y)  # fill the storage

        def step() -> None:
            exp.explain(X, y)
        return step
    return setup


def training(d: int = 100, k: int = 10, batch: int = 256) -> Workload:
    def setup(device: torch.device) -> Callable[[], None]:
        g = torch.Generator().manual_seed(0)
        learner = OnlineLearner(lambda n, c: MLP(n, c, hidden=(128, 128)), lr=1e-3,
                                device=str(device), seed=0, classes=list(range(k)))
        X = torch.randn(batch, d, generator=g).to(device)
        y = torch.randint(k, (batch,), generator=g).to(device)

        def step() -> None:
            learner(X)
            learner.learn(X, y)
        return step
    return setup


def fires_erics(head: str, d: int, batch: int = 100) -> Workload:
    def setup(device: torch.device) -> Callable[[], None]:
        g = torch.Generator().manual_seed(0)
        if head == "probit":
            h = ProbitHead(d, device=device)
            dtype = torch.float64
        else:
            h = MLPHead(d, hidden=(100, 100, 100), seed=0, device=device)
            dtype = torch.float32
        fires = FIRES(h, n_selected=max(1, d // 10))
        erics = ERICS(h)
        X = torch.randn(batch, d, generator=g, dtype=dtype).to(device)
        y = (X[:, 0] > 0).long()

        def step() -> None:
            fires.learn(X, y)
            erics.update()
        return step
    return setup


WORKLOADS: dict[str, Workload] = {
    "iPFI  MLP d=100 K=10 B=256": explainer("ipfi"),
    "iSAGE MLP d=100 K=10 B=256": explainer("isage"),
    "train MLP d=100 K=10 B=256": training(),
    "FIRES+ERICS Probit d=1000 B=100": fires_erics("probit", 1000),
    "FIRES+ERICS Probit d=10000 B=100": fires_erics("probit", 10_000),
    "FIRES+ERICS MLP-head d=1000 B=100": fires_erics("mlp", 1000),
}


def time_ms(step: Callable[[], None], device: torch.device, steps: int, repeats: int) -> float:
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(3):
        step()
    sync()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        runs.append((time.perf_counter() - t0) * 1000 / steps)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
        print(f"CUDA device: {torch.cuda.get_device_name(0)}")
    else:
        print("no CUDA device: measuring the CPU only")
    print(f"{'workload':<36}{'CPU ms':>10}" + (f"{'CUDA ms':>10}{'CPU/CUDA':>10}"
                                               if len(devices) > 1 else ""))
    for name, workload in WORKLOADS.items():
        ms = [time_ms(workload(dev), dev, args.steps, args.repeats) for dev in devices]
        line = f"{name:<36}{ms[0]:>10.2f}"
        if len(ms) > 1:
            line += f"{ms[1]:>10.2f}{ms[0] / ms[1]:>9.1f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
