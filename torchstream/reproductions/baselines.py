"""The ablation test of "On baselines for local feature attributions" (AAAI-21 XAI workshop) for
the seven baselines with Integrated Gradients, DeepLift and KernelSHAP on Adult and Spambase.

Protocol (paper §3-§4, with the documented choices of this package): features standardised
(categoricals of Adult as integer codes, then standardised), 80/20 train/test split (seed 42);
a small MLP (one hidden layer of 64 ReLU units, sigmoid output; Adam, lr 4e-3, batch 64); each
baseline learns from the training rows through its streaming ``update``; stochastic baselines
average the attributions over ``draws`` draws (the paper: 10); KernelSHAP uses 100 coalitions
per row. The ablation masks each correctly classified test row's top-K features (K = 0, 10 %,
..., 100 %) by |attribution| with the column means and records F1; the table shows the mean F1
over K (lower: more discriminative attributions) and the random-ablation reference.

The paper reports no numeric table for this experiment (figures only); its findings: expectation
and Gaussian baselines do well, maximum distance and uniform often fail to beat random ablation
on tabular data (their values lie outside the data distribution), constant and blurred behave
alike. ``reproduce`` checks the ordering that is comparable here, on Spambase (a data set of the
paper): maximum distance and uniform are less discriminative than constant and blurred, for each
method. The Gaussian baseline is reported only: this package follows the paper's definition
(``x`` plus noise), the paper's figures come from code that perturbs training rows instead.
The neutral baseline was not evaluated in the paper (reported only). Adult is not one of the
paper's data sets (reported only). Quick mode: Spambase, IG and DeepLift, 100 test rows, 5
epochs, 5 draws (about half a minute); full mode: both data sets, the three methods, 400 test
rows (KernelSHAP 200), 30 epochs, 10 draws.

Usage: ``torchstream reproduce baselines [--quick]``; from Python,
``run("baselines", quick=True, seed=1, draws=10)`` (:func:`torchstream.reproductions.run`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from torchstream.explain.ablation import ablation_test
from torchstream.explain.baselines import (
    BlurredBaseline,
    ConstantBaseline,
    ExpectationBaseline,
    GaussianBaseline,
    MaxDistanceBaseline,
    NeutralBaseline,
    UniformBaseline,
)
from torchstream.explain.local import LocalAttributor
from torchstream.reproductions._comparison import Comparison
from torchstream.reproductions._data import coded_table

#: Shared data files this reproduction reads.
DATA = ("adult.csv", "spambase.csv")

#: Baselines whose values lie outside the data distribution (the paper: often no better than
#: random ablation on tabular data) and the in-distribution ones they are ranked against.
OUT_OF_DISTRIBUTION = ("max_distance", "uniform")
IN_DISTRIBUTION = ("constant", "blurred")
#: Data sets of the paper (the ordering is checked there only). The ordering is a 0/1 number
#: checked exactly: in quick mode over training seeds 0, 1, 2 the margin (the smaller mean F1 of
#: max distance and uniform minus the larger of constant and blurred) was 0.23-0.31 for IG and
#: 0.22-0.30 for DeepLift, while the four areas involved moved by at most 0.09 between seeds.
PAPER_DATA = ("spambase",)


def load(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    values, y = coded_table(name, "income" if name == "adult" else "class")
    X = torch.from_numpy(values)
    X = (X - X.mean(0)) / X.std(0).clamp_min(1e-12)
    return X, torch.as_tensor(y).long()


def train(X: torch.Tensor, y: torch.Tensor, epochs: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(X.shape[1], 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 1),
        torch.nn.Sigmoid(),
        torch.nn.Flatten(0),
    ).double()
    opt = torch.optim.Adam(model.parameters(), lr=4e-3)
    for _ in range(epochs):
        perm = torch.randperm(X.shape[0])
        for i in range(0, X.shape[0], 64):
            idx = perm[i : i + 64]
            loss = torch.nn.functional.binary_cross_entropy(model(X[idx]), y[idx].double())
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


def baselines(X_train: torch.Tensor, seed: int) -> dict:
    out = {
        "constant": ConstantBaseline(0.0),
        "max_distance": MaxDistanceBaseline(),
        "blurred": BlurredBaseline(sigma=3.0, seed=seed),
        "gaussian": GaussianBaseline(sigma=0.5, seed=seed),
        "uniform": UniformBaseline(seed=seed),
        "expectation": ExpectationBaseline(size=100, seed=seed),
        "neutral": NeutralBaseline(level=0.5),
    }
    for b in out.values():
        b.update(X_train)
    return out


def settings(quick: bool) -> dict:
    """The run's size: quick (Spambase, IG and DeepLift) or full (the paper's draws)."""
    methods = {
        "IG": ("integrated_gradients", {"n_steps": 32 if quick else 50}),
        "DeepLift": ("deeplift", {}),
        "KernelSHAP": ("kernel_shap", {"n_samples": 100}),
    }
    return {
        "datasets": ("spambase",) if quick else ("adult", "spambase"),
        "methods": {k: v for k, v in methods.items() if not quick or k != "KernelSHAP"},
        "n_test": 100 if quick else 400,
        "n_kernel": 40 if quick else 200,
        "draws": 5 if quick else 10,
        "epochs": 5 if quick else 30,
    }


def ablation_areas(
    name: str, cfg: dict, seed: int = 0, echo: Callable[[str], None] | None = None
) -> dict[tuple[str, str], tuple[float, float, int, float]]:
    """Mean F1 over K of each (method, baseline) on ``name``, the random reference, the rows
    tested and the seconds: ``{(method, baseline): (area, random_area, rows, seconds)}``."""
    X, y = load(name)
    g = torch.Generator().manual_seed(42)
    perm = torch.randperm(X.shape[0], generator=g)
    cut = int(0.8 * X.shape[0])
    tr, te = perm[:cut], perm[cut:]
    t0 = time.perf_counter()
    model = train(X[tr], y[tr], cfg["epochs"], seed)
    with torch.no_grad():
        acc = float(((model(X[te]) > 0.5).long() == y[te]).double().mean())
    if echo:
        echo(
            f"\n{name}: {X.shape[0]} rows, {X.shape[1]} features; MLP test accuracy "
            f"{acc:.3f} (trained in {time.perf_counter() - t0:.1f} s)"
        )
        echo(
            f"mean F1 over K = 0..100 % masked (lower is better); {cfg['draws']} draws per "
            f"stochastic baseline"
        )
        echo(f"{'method':<12}{'baseline':<14}{'mean F1':>9}{'random':>9}{'rows':>6}{'s':>7}")
    out = {}
    for mname, (method, kwargs) in cfg["methods"].items():
        n = cfg["n_kernel"] if mname == "KernelSHAP" else cfg["n_test"]
        Xt, yt = X[te][:n], y[te][:n]
        for bname, base in baselines(X[tr], seed).items():
            t0 = time.perf_counter()
            exp = LocalAttributor(
                model, method, base, n_samples=cfg["draws"], method_kwargs=kwargs, seed=seed
            )
            attr = torch.cat([exp(Xt[i : i + 50]) for i in range(0, n, 50)])
            res = ablation_test(model, Xt, yt, attr, mask="mean", seed=seed)
            out[mname, bname] = (res.area, res.random_area, res.n_rows, time.perf_counter() - t0)
            if echo:
                area, rand, rows, secs = out[mname, bname]
                echo(f"{mname:<12}{bname:<14}{area:>9.3f}{rand:>9.3f}{rows:>6}{secs:>7.1f}")
    return out


def comparisons(results: dict[str, dict[tuple[str, str], tuple]]) -> list[Comparison]:
    """The paper's orderings (checked on its data sets) and each baseline's margin over random
    ablation (reported: the paper has figures only)."""
    rows = []
    for name, areas in results.items():
        for mname in dict.fromkeys(m for m, _ in areas):
            a = {b: v[0] for (m, b), v in areas.items() if m == mname}
            worst_in = max(a[b] for b in IN_DISTRIBUTION)
            best_out = min(a[b] for b in OUT_OF_DISTRIBUTION)
            checked = name in PAPER_DATA
            rows.append(
                Comparison(
                    f"{name}, {mname}: max distance and uniform less discriminative than "
                    "constant and blurred (1 = yes)",
                    float(best_out > worst_in),
                    1.0,
                    0.0 if checked else None,
                    f"the paper's finding (§4); margin here {best_out - worst_in:.3f} in mean F1"
                    + ("" if checked else "; not a data set of the paper, reported only"),
                )
            )
            for b in a:
                area, rand = areas[mname, b][:2]
                rows.append(
                    Comparison(
                        f"{name}, {mname}, {b}: random-ablation mean F1 minus ours",
                        rand - area,
                        float("nan"),
                        None,
                        "the paper: often <= 0 on tabular data (figures only)"
                        if b in OUT_OF_DISTRIBUTION
                        else "",
                    )
                )
    return rows


def reproduce(
    quick: bool = True,
    seed: int = 0,
    echo: Callable[[str], None] | None = None,
    *,
    draws: int | None = None,
) -> list[Comparison]:
    """Ablation areas of the seven baselines and the paper's ordering (see the module doc);
    ``draws`` of the stochastic baselines replaces the mode's (5 quick, 10 full)."""
    torch.set_num_threads(1)
    cfg = settings(quick)
    if draws is not None:
        cfg["draws"] = draws
    results = {name: ablation_areas(name, cfg, seed, echo) for name in cfg["datasets"]}
    return comparisons(results)
