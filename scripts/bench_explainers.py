"""Throughput of our incremental explainers (iPFI, iSAGE) next to ixai's.

ixai's ``IncrementalPFI`` / ``IncrementalSage`` and ours
(``torchstream.explain.ipfi.IncrementalPFI``, ``torchstream.explain.isage.IncrementalSAGE``)
explain the same fixed model on the same rows of the same stream, in one process, with torch on
one thread. Both use a geometric reservoir of 100 rows, joint marginal imputation,
``alpha = 0.001`` and ``K`` inner samples per feature (ixai's ``n_inner_samples``, our
``n_samples``). Workloads:

* ``MLP``: a torch MLP regressor 10-64-1 (ReLU), pre-trained on the first ``--pretrain`` rows of
  river's Friedman stream (``torchstream.streams.Friedman``), squared loss. ixai gets a model
  function ``dict -> {"output": float}`` written here (dict row -> tensor -> the same module) and
  a callable squared loss; ours gets the module itself and ``loss="mse"``.
* ``HT``: river's ``HoeffdingTreeClassifier`` pre-trained on the first ``--pretrain`` rows of the
  Agrawal stream (``torchstream.streams.Agrawal``, classification function 2), cross-entropy. ixai
  gets ``model.predict_proba_one`` and a callable ``-log p[y]`` on the probability dict; ours gets
  ``torchstream.learners.as_model_fn(model, schema=stream.schema)`` and ``loss="cross_entropy"``.
* ``MLP100`` (only with ``--device cuda`` or ``--big``): a 100-64-1 MLP on a synthetic regression
  stream with 100 uniform features (Friedman's target on the first five), ``K = 10``, our
  ``B = 256``; ixai is measured on the first ``--big-ixai-rows`` rows only (it needs ~1000 model
  calls per row) and always on the CPU.

ixai always explains one row at a time (``explain_one``); ours explains batches of ``B`` rows
(``explain(X [B, d], y [B])``, one ``model_fn`` call per batch). The table gives, per setting, the
median throughput (rows per second; the first row / batch only fills the storage in both
libraries and is counted) and the ratio ours / ixai. ``ours/floor`` is our time divided by the time
of the bare model forward passes our explainer makes: the exact tensors it hands to ``model_fn``
are recorded once (an untimed run with the same seed) and replayed through the same model
function under ``torch.no_grad()``; for the Hoeffding tree that model function includes the
tensor -> dict decoding. ``minimal/floor`` (iPFI on the MLP) is the time of the least work any
eager iPFI step must do (slot draws, gather, input buffer, forward, losses, one EMA update, one
reservoir write; no checks or variance) over the same floor: the lower bound of ``ours/floor``
for an implementation that launches one kernel per tensor operation. Every setting runs
``--repeats`` times, interleaved (ixai, ours B=1, floor B=1, ours B=64, floor B=64, next
setting, ...); only the explain loop is timed. The final
importance vectors of both libraries (last repeat, both debiased: ixai's zero-initialised
``importance_values`` divided by ``1 - (1 - alpha)^n`` over its ``n`` explained rows, and our
``importance``) are printed side by side with their Spearman rank correlation: the same order of
magnitude and ranking are expected, not identical numbers. The random draws differ, and the
reservoirs differ (ours stores every row by default, ixai's each row with probability 1/100).
ixai's iSAGE also starts its smoothed mean prediction at 0 (not debiased), so on a regression
target far from 0 the empty-coalition loss, and hence every iSAGE value, is inflated for the
first ~1/alpha rows; ours starts it at the first prediction.

A second table gives the cost of the value check every batch of ours gets before anything
changes (finite ``X`` and ``y``; for the classifier, integer labels in the model's range): one
fused pass over the batch with one host read, timed alone (``_check_values``, exactly as
``explain`` calls it) next to the whole ``explain`` step, in µs per batch, for B = 1 and B = 64 on
the d = 10 workloads, K = 1. The reservoir's own finiteness check of ``X``, which the explainers
skip for the rows they have checked, is timed beside it.

Run it from the repository root::

    python scripts/bench_explainers.py                          # 2000 rows, 3 repeats
    python scripts/bench_explainers.py --rows 300 --repeats 1   # smoke run (well under a minute)
    python scripts/bench_explainers.py --json bench.json        # also write the numbers
    python scripts/bench_explainers.py --check-cost-only        # only the value-check table
    python scripts/bench_explainers.py --device cuda            # ours on the GPU (+ d=100 settings)
    python scripts/bench_explainers.py --scaling                # only the d = 10 / 100 / 1000 table

``--scaling`` prints how our iPFI and iSAGE scale with the width ``d`` (10, 100, 1000; ``B = 64``,
``K = 1``, float32 rows, a random linear ``d``-1 model and a ``d``-64-1 MLP, torch on one thread):
µs per explained row, ``ours/floor`` (our time over the bare model calls on inputs of the same
shapes: the shapes of one batch's ``model_fn`` calls are recorded, then a tensor of each shape is
passed through the same model under ``torch.no_grad()``) and the peak memory of the first
explained batch of a fresh explainer, measured with the torch profiler (``profile_memory=True``:
the largest total of the tensor bytes allocated and not yet freed during the ``explain`` call,
i.e. the explainer's buffers, which later batches reuse, its temporaries and the model's
activations; the storage and the batch itself, allocated before, are not counted).

ixai is a peer measured for comparison, not a dependency of torchstream. Version 0.1.3 pins old
versions of river / numpy, so install it beside ours without its dependencies::

    pip install --no-deps ixai==0.1.3

Two ixai 0.1.3 issues are worked around here: its river-metric loss wrapper fails on
river >= 0.21 (so it gets plain callable losses), and its ``TorchWrapper`` silently returns
all-zero importances on numpy 2 (so the MLP gets a hand-written dict model function); the script
warns if ixai's importances come out all zero anyway. Without ixai the script says how to install
it and measures our side only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from torchstream.explain.storage._common import _all_finite
from torchstream.learners import as_model_fn
from torchstream.streams import Agrawal, Friedman

IXAI_HINT = "pip install --no-deps ixai==0.1.3"
ALPHA = 0.001
STORAGE_SIZE = 100
HIDDEN = 64
SEED = 0
#: Recorded model inputs kept per (setting, B) for the floor; beyond this, same-shaped
#: recorded tensors are reused (their values do not change the cost of an MLP forward).
RECORD_BUDGET_BYTES = 256 * 2**20


# ---------------------------------------------------------------------- peers
def import_ixai() -> Any | None:
    try:
        import ixai  # noqa: F401
        from ixai.explainer import IncrementalPFI, IncrementalSage
        from ixai.storage import GeometricReservoirStorage
    except ImportError:
        return None
    return {"IncrementalPFI": IncrementalPFI, "IncrementalSage": IncrementalSage,
            "GeometricReservoirStorage": GeometricReservoirStorage,
            "version": getattr(sys.modules["ixai"], "__version__", "?")}


def import_ours() -> tuple[type, type]:
    from torchstream.explain.ipfi import IncrementalPFI
    from torchstream.explain.isage import IncrementalSAGE

    return IncrementalPFI, IncrementalSAGE


# ---------------------------------------------------------------------- workloads
@dataclass
class Workload:
    """One model on one stream, in the forms both libraries need (prepared once, untimed)."""

    name: str
    names: list[str]  # feature names = column order of X
    X: torch.Tensor  # [n, d] benchmark rows for ours (on the device)
    y: torch.Tensor  # [n] targets / class indices (on the device)
    rows: list[dict[Hashable, Any]]  # the same rows as dicts, for ixai
    labels: list[Any]  # the same targets / labels, for ixai
    ours_fn: Callable[[torch.Tensor], torch.Tensor]  # our model_fn (also the floor)
    ours_loss: str
    ixai_fn: Callable[[dict], dict]
    ixai_loss: Callable[[Any, dict], float]
    device: torch.device
    note: str = ""

    @property
    def d(self) -> int:
        return self.X.shape[1]


def mlp(d: int) -> nn.Module:
    return nn.Sequential(nn.Linear(d, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1))


def pretrain_mlp(net: nn.Module, X: torch.Tensor, y: torch.Tensor, steps: int = 600) -> float:
    """Full-batch Adam on the pre-training rows; returns the final training MSE."""
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        opt.zero_grad()
        loss = ((net(X).squeeze(1) - y) ** 2).mean()
        loss.backward()
        opt.step()
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return loss.item()


def ixai_torch_fn(net: nn.Module, names: Sequence[Hashable]) -> Callable[[dict], dict]:
    """ixai model function for a torch regressor: dict row -> ``{"output": float}`` (called under
    the ``torch.no_grad()`` of the timed loop)."""
    names = list(names)

    def fn(x: dict) -> dict:
        return {"output": net(torch.tensor([[x[k] for k in names]], dtype=torch.float32)).item()}

    return fn


def squared_loss(y_true: float, y_pred: dict) -> float:
    return (y_true - y_pred["output"]) ** 2


def cross_entropy_loss(y_true: Any, y_pred: dict) -> float:
    return -math.log(max(y_pred.get(y_true, 0.0), 1e-12))


def mlp_workload(
    name: str, X_all: torch.Tensor, y_all: torch.Tensor, names: list[str], n_pre: int,
    device: torch.device,
) -> Workload:
    torch.manual_seed(SEED)
    net = mlp(X_all.shape[1])
    mse = pretrain_mlp(net, X_all[:n_pre], y_all[:n_pre])
    X, y = X_all[n_pre:], y_all[n_pre:]
    rows = [dict(zip(names, r)) for r in X.tolist()]
    labels = y.tolist()
    ours_net = net if device.type == "cpu" else mlp(X.shape[1]).to(device).eval()
    if ours_net is not net:
        ours_net.load_state_dict(net.state_dict())
        for p in ours_net.parameters():
            p.requires_grad_(False)
    return Workload(
        name=name, names=names, X=X.to(device), y=y.to(device), rows=rows, labels=labels,
        ours_fn=ours_net, ours_loss="mse", ixai_fn=ixai_torch_fn(net, names),
        ixai_loss=squared_loss, device=device,
        note=f"MLP {X.shape[1]}-{HIDDEN}-1 pre-trained on {n_pre} rows (train MSE {mse:.2f})",
    )


def friedman_workload(n_rows: int, n_pre: int, device: torch.device) -> Workload:
    stream = Friedman(seed=SEED, n_samples=n_pre + n_rows)
    X_all, y_all = next(iter(stream.batches(n_pre + n_rows, dtype=torch.float32)))
    return mlp_workload("MLP", X_all, y_all.float(), list(stream.schema.names), n_pre, device)


def wide_workload(n_rows: int, n_pre: int, device: torch.device, d: int = 100) -> Workload:
    """``d`` uniform features, Friedman's target on the first five (the rest is noise)."""
    g = torch.Generator().manual_seed(SEED)
    X = torch.rand(n_pre + n_rows, d, generator=g)
    y = (10 * torch.sin(math.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3]
         + 5 * X[:, 4] + torch.randn(n_pre + n_rows, generator=g))
    return mlp_workload(f"MLP{d}", X, y, [f"x{j}" for j in range(d)], n_pre, device)


def agrawal_workload(n_rows: int, n_pre: int) -> Workload:
    from river import tree

    stream = Agrawal(classification_function=2, seed=SEED, n_samples=n_pre + n_rows)
    pairs = list(stream)
    model = tree.HoeffdingTreeClassifier()
    for x, lab in pairs[:n_pre]:
        model.learn_one(x, lab)
    X_all, y_all = next(iter(stream.batches(n_pre + n_rows, dtype=torch.float64)))
    bench = pairs[n_pre:]
    ours_fn = as_model_fn(model, schema=stream.schema, classes=stream.classes)
    return Workload(
        name="HT", names=list(stream.schema.names), X=X_all[n_pre:], y=y_all[n_pre:],
        rows=[dict(x) for x, _ in bench], labels=[lab for _, lab in bench], ours_fn=ours_fn,
        ours_loss="cross_entropy", ixai_fn=model.predict_proba_one, ixai_loss=cross_entropy_loss,
        device=torch.device("cpu"),
        note=(f"river HoeffdingTreeClassifier pre-trained on {n_pre} Agrawal rows "
              f"({model.n_nodes} nodes, depth {model.height})"),
    )


# ---------------------------------------------------------------------- settings
@dataclass
class Setting:
    work: Workload
    kind: str  # "iPFI" / "iSAGE"
    K: int
    batch_sizes: tuple[int, ...]
    ixai_rows: int  # rows ixai explains (obs/s is computed on these)
    ixai_time: list[float] = field(default_factory=list)
    ixai_imp: np.ndarray | None = None
    ours_time: dict[int, list[float]] = field(default_factory=dict)
    floor_time: dict[int, list[float]] = field(default_factory=dict)
    ours_imp: dict[int, np.ndarray] = field(default_factory=dict)
    recorded: dict[int, list[torch.Tensor]] = field(default_factory=dict)
    floor_rows: dict[int, int] = field(default_factory=dict)
    minimal_time: dict[int, list[float]] = field(default_factory=dict)
    compiled: bool = False  # ours with compile=True (MLP only; see --compile)
    compile_s: list[float] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.work.name} {self.kind} K={self.K}" + (" compile=True" if self.compiled
                                                             else "")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------- runs
def run_ixai(ix: dict, s: Setting, seed: int) -> tuple[float, np.ndarray]:
    w = s.work
    random.seed(seed)
    np.random.seed(seed)
    storage = ix["GeometricReservoirStorage"](size=STORAGE_SIZE, store_targets=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "cannot be automatically wrapped": intended
        if s.kind == "iPFI":
            exp = ix["IncrementalPFI"](
                model_function=w.ixai_fn, loss_function=w.ixai_loss, feature_names=w.names,
                storage=storage, n_inner_samples=s.K, smoothing_alpha=ALPHA, dynamic_setting=True,
            )
        else:
            exp = ix["IncrementalSage"](
                model_function=w.ixai_fn, loss_function=w.ixai_loss, feature_names=w.names,
                storage=storage, n_inner_samples=s.K, smoothing_alpha=ALPHA, dynamic_setting=True,
            )
    rows, labels = w.rows[: s.ixai_rows], w.labels[: s.ixai_rows]
    with torch.no_grad():
        t0 = time.perf_counter()
        for x, lab in zip(rows, labels):
            exp.explain_one(x, lab)
        elapsed = time.perf_counter() - t0
    values = exp.importance_values  # zero-initialised EMA over the explained rows
    n_explained = max(exp.seen_samples - 1, 0)  # the first row only fills the storage
    correction = 1.0 - (1.0 - ALPHA) ** n_explained
    raw = np.array([float(values.get(n, 0.0)) for n in w.names])
    return elapsed, raw / correction if correction > 0 else raw


def make_ours(classes: tuple[type, type], s: Setting, model_fn: Callable, seed: int,
              compile_: bool = False) -> Any:
    ipfi, isage = classes
    cls = ipfi if s.kind == "iPFI" else isage
    extra = {"compile": True} if compile_ else {}
    return cls(model_fn, s.work.ours_loss, s.work.d, alpha=ALPHA, storage="geometric",
               storage_size=STORAGE_SIZE, n_samples=s.K, seed=seed, **extra)


#: Batches a compile=True explainer explains untimed first: the first fills the storage, the
#: second is explained eagerly (it checks the model's output), the third compiles the step.
COMPILE_WARMUP = 3


def batches(w: Workload, b: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(w.X[i:i + b], w.y[i:i + b]) for i in range(0, w.X.shape[0], b)]


def run_ours(classes: tuple[type, type], s: Setting, b: int, seed: int,
             data: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[float, np.ndarray]:
    """Seconds to explain all of ``data`` (the work's rows). A compile=True explainer first
    explains ``COMPILE_WARMUP`` batches untimed and a last, shorter batch untimed after (a new
    batch shape compiles again); its time over the other rows is scaled to all rows (its
    per-row rate), and its compile time is kept in ``s.compile_s``."""
    exp = make_ours(classes, s, s.work.ours_fn, seed, s.compiled)
    skip = COMPILE_WARMUP if s.compiled else 0
    timed = data[skip:]
    tail = timed[-1:] if s.compiled and timed and timed[-1][0].shape[0] != b else []
    timed = timed[:len(timed) - len(tail)]
    for Xb, yb in data[:skip]:
        exp.explain(Xb, yb)
    if s.compiled and exp.compile_off_reason is not None:
        raise SystemExit(f"{s.label}: the compiled step is off: {exp.compile_off_reason}")
    sync(s.work.device)
    t0 = time.perf_counter()
    for Xb, yb in timed:
        exp.explain(Xb, yb)
    sync(s.work.device)
    elapsed = time.perf_counter() - t0
    for Xb, yb in tail:
        exp.explain(Xb, yb)
    if s.compiled:
        s.compile_s.append(exp.compile_seconds)
    n_timed = sum(Xb.shape[0] for Xb, _ in timed)
    elapsed *= sum(Xb.shape[0] for Xb, _ in data) / max(n_timed, 1)
    return elapsed, exp.importance.detach().cpu().double().numpy()


def record_ours(classes: tuple[type, type], s: Setting, b: int, seed: int,
                data: list[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
    """The tensors our explainer hands to ``model_fn`` (same seed as the timed runs); also a
    warm-up. Beyond the byte budget, a recorded tensor of the same shape stands in."""
    calls: list[torch.Tensor] = []
    by_shape: dict[tuple[int, ...], torch.Tensor] = {}
    used = 0

    def recorder(Z: torch.Tensor) -> torch.Tensor:
        nonlocal used
        shape = tuple(Z.shape)
        nbytes = Z.numel() * Z.element_size()
        if used + nbytes <= RECORD_BUDGET_BYTES or shape not in by_shape:
            keep = Z.detach().clone()
            used += nbytes
            by_shape.setdefault(shape, keep)
        else:
            keep = by_shape[shape]
        calls.append(keep)
        return s.work.ours_fn(Z)

    exp = make_ours(classes, s, recorder, seed)
    for Xb, yb in data:
        exp.explain(Xb, yb)
    return calls


def run_floor(s: Setting, b: int) -> float:
    fn = s.work.ours_fn
    tensors = s.recorded[b]
    with torch.no_grad():
        sync(s.work.device)
        t0 = time.perf_counter()
        for Z in tensors:
            fn(Z)
        sync(s.work.device)
        return time.perf_counter() - t0


def minimal_step_time(s: Setting, b: int) -> float | None:
    """Time of the least work any eager iPFI step must do on this setting (MLP workloads only):
    draw the replacement slots, gather the values, build the model input, one forward, the
    squared losses, the loss differences, one EMA update, one reservoir write. No checks, no
    variance, no debiasing, no chunking: a lower bound for ``ours/floor`` in eager PyTorch."""
    w = s.work
    if s.kind != "iPFI" or not w.name.startswith("MLP"):
        return None
    d, k = w.d, s.K
    dev = w.X.device
    fn = w.ours_fn
    g = torch.Generator(device=dev).manual_seed(SEED)
    res = w.X[:STORAGE_SIZE].clone()
    buf = torch.empty(1 + d * k, b, d, dtype=w.X.dtype, device=dev)
    j = torch.arange(d, device=dev).view(1, d, 1)
    kk = torch.arange(k, device=dev).view(1, 1, k)
    bi = torch.arange(b, device=dev).view(b, 1, 1)
    pos = (((1 + j * k + kk) * b + bi) * d + j).reshape(-1)
    feat = j.expand(b, d, k).reshape(-1)
    age = torch.arange(b, device=dev, dtype=torch.float32)
    weights = (ALPHA * (1 - ALPHA) ** (b - 1 - age)).view(1, b)
    state = torch.zeros(1, d, device=dev)
    full = [(X, y) for X, y in batches(w, b) if X.shape[0] == b]

    def step(X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        idx = torch.randint(0, STORAGE_SIZE, (b * d * k,), generator=g, device=dev)
        buf.copy_(X)
        buf.view(-1).index_copy_(0, pos, res.view(-1).take(feat + idx * d))
        out = fn(buf.view(-1, d)).view(1 + d * k, b)
        loss = (out - y).square_()
        lam = (loss[1:] - loss[0]).view(d, k, b).mean(1).t()
        slots = torch.randint(0, STORAGE_SIZE, (min(b, STORAGE_SIZE),), generator=g, device=dev)
        res.index_copy_(0, slots, X[-slots.shape[0]:])
        return torch.addmm(state, weights, lam, beta=(1 - ALPHA) ** b)

    with torch.no_grad():
        for X, y in full[:3]:
            state = step(X, y)
        sync(dev)
        t0 = time.perf_counter()
        for X, y in full:
            state = step(X, y)
        sync(dev)
        elapsed = time.perf_counter() - t0
    return elapsed * len(batches(w, b)) / max(len(full), 1)


def check_cost(classes: tuple[type, type], works: list[Workload], repeats: int,
               batch_sizes: tuple[int, ...] = (1, 64)) -> list[dict[str, Any]]:
    """Cost of the value check every batch gets (finite ``X`` and ``y``, class labels in range:
    one fused pass, one host read) next to the whole explain step, per batch, on the d = 10
    workloads: ``check_us`` times the check alone (``_check_values``, as ``explain`` calls it)
    over every batch of the benchmark rows, ``step_us`` the ``explain`` calls (K = 1), each the
    minimum over ``repeats`` (the least disturbed run). ``storage_check_us`` is the reservoir's
    own finiteness check of ``X`` (one sum), which the explainers skip for the rows they have
    checked."""
    out = []
    for w in works:
        if w.d > 10:
            continue
        for kind, cls in zip(("iPFI", "iSAGE"), classes):
            for b in batch_sizes:
                data = batches(w, b)
                check_t, step_t, storage_t = [], [], []
                for r in range(repeats):
                    exp = cls(w.ours_fn, w.ours_loss, w.d, alpha=ALPHA, storage="geometric",
                              storage_size=STORAGE_SIZE, n_samples=1, seed=SEED + r)
                    for Xb, yb in data[:3]:  # warm-up (also fixes the output width)
                        exp.explain(Xb, yb)
                    sync(w.device)
                    t0 = time.perf_counter()
                    for Xb, yb in data:
                        exp._check_values(Xb, yb)
                    sync(w.device)
                    check_t.append((time.perf_counter() - t0) / len(data))
                    t0 = time.perf_counter()
                    for Xb, _ in data:
                        _all_finite(Xb)
                    storage_t.append((time.perf_counter() - t0) / len(data))
                    sync(w.device)
                    t0 = time.perf_counter()
                    for Xb, yb in data:
                        exp.explain(Xb, yb)
                    sync(w.device)
                    step_t.append((time.perf_counter() - t0) / len(data))
                check, step = min(check_t) * 1e6, min(step_t) * 1e6
                out.append({"setting": f"{w.name} {kind} K=1 B={b}", "check_us": check,
                            "step_us": step, "share": check / step,
                            "storage_check_us": min(storage_t) * 1e6,
                            "labels": w.ours_loss != "mse"})
    return out


def print_check_cost(rows: list[dict[str, Any]]) -> None:
    print("\nValue check of every batch (finite X and y, labels in range; fused, one host "
          "read), µs per batch, minimum over the repeats:")
    head = ["setting", "check µs", "explain step µs", "check/step",
            "storage X check µs (now skipped)"]
    body = [[r["setting"], f"{r['check_us']:.2f}", f"{r['step_us']:.1f}",
             f"{100 * r['share']:.1f}%", f"{r['storage_check_us']:.2f}"] for r in rows]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    for cells in [head, *body]:
        print("  " + " | ".join(c.ljust(wd) if i == 0 else c.rjust(wd)
                                for i, (c, wd) in enumerate(zip(cells, widths, strict=True))))


# ---------------------------------------------------------------------- scaling in d
SCALING_DS = (10, 100, 1000)
SCALING_B = 64


def scaling_model(kind: str, d: int) -> nn.Module:
    """A random (untrained: the cost does not depend on the weights) linear or MLP regressor."""
    torch.manual_seed(SEED)
    net = nn.Linear(d, 1) if kind == "linear" else mlp(d)
    for p in net.parameters():
        p.requires_grad_(False)
    return net.eval()


def peak_alloc_mb(fn: Callable[[], None]) -> float:
    """Peak of the tensor bytes allocated and not yet freed while ``fn`` runs (torch profiler,
    ``profile_memory=True``; the events' own allocations and frees in time order), in MiB."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    live = top = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += event.self_cpu_memory_usage
        top = max(top, live)
    return top / 2**20


def scaling_row(classes: tuple[type, type], kind: str, model: str, d: int, n_batches: int,
                repeats: int) -> dict[str, Any]:
    """One line of the scaling table (see the module docstring): the minimum over ``repeats``
    of the time of ``n_batches`` explained batches, against the same bare model calls."""
    ipfi, isage = classes
    cls = ipfi if kind == "iPFI" else isage
    b = SCALING_B
    net = scaling_model(model, d)
    g = torch.Generator().manual_seed(SEED)
    X = torch.rand((2 + n_batches) * b, d, generator=g)
    with torch.no_grad():
        y = net(X).squeeze(1) + 0.1 * torch.randn(X.shape[0], generator=g)
    data = [(X[i:i + b], y[i:i + b]) for i in range(0, X.shape[0], b)]
    shapes: list[tuple[int, ...]] = []

    def recorder(Z: torch.Tensor) -> torch.Tensor:
        shapes.append(tuple(Z.shape))
        return net(Z)

    def fresh(fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
        exp = cls(fn, "mse", d, alpha=ALPHA, storage="geometric", storage_size=STORAGE_SIZE,
                  n_samples=1, seed=SEED)
        for Xb, yb in data[:2]:  # the first batch only fills the storage; the second warms up
            exp.explain(Xb, yb)
        return exp

    probe = fresh(recorder)
    shapes.clear()
    probe.explain(*data[2])  # the calls of one explained batch
    inputs = [torch.rand(shape, generator=g) for shape in dict.fromkeys(shapes)]
    by_shape = {tuple(t.shape): t for t in inputs}
    ours_t, floor_t = [], []
    for _ in range(repeats):
        exp = fresh(net)
        t0 = time.perf_counter()
        for Xb, yb in data[2:]:
            exp.explain(Xb, yb)
        ours_t.append((time.perf_counter() - t0) / n_batches)
        with torch.no_grad():
            t0 = time.perf_counter()
            for _ in range(n_batches):
                for shape in shapes:
                    net(by_shape[shape])
            floor_t.append((time.perf_counter() - t0) / n_batches)
    exp = cls(net, "mse", d, alpha=ALPHA, storage="geometric", storage_size=STORAGE_SIZE,
              n_samples=1, seed=SEED)
    exp.explain(*data[0])  # fills the storage: the next call allocates the buffers
    peak = peak_alloc_mb(lambda: exp.explain(*data[1]))
    ours, floor = min(ours_t), min(floor_t)
    return {"explainer": kind, "model": model, "d": d, "B": b, "K": 1,
            "model_rows": sum(s[0] for s in shapes), "model_calls": len(shapes),
            "us_per_row": ours / b * 1e6, "floor_us_per_row": floor / b * 1e6,
            "ours_over_floor": ours / floor, "peak_mb": peak}


def scaling(classes: tuple[type, type], repeats: int,
            ds: Sequence[int] = SCALING_DS) -> list[dict[str, Any]]:
    out = []
    for model in ("linear", "mlp"):
        for kind in ("iPFI", "iSAGE"):
            for d in ds:
                n_batches = 2 if d >= 1000 else 10 if d >= 100 else 50
                out.append(scaling_row(classes, kind, model, d, n_batches, repeats))
    return out


def print_scaling(rows: list[dict[str, Any]]) -> None:
    print(f"\nScaling in d (B = {SCALING_B}, K = 1, float32, 1 thread; minimum over the "
          f"repeats; peak: torch profiler, tensor bytes live during the first explained batch):")
    head = ["explainer", "model", "d", "model rows / batch", "calls", "µs / row",
            "floor µs / row", "ours/floor", "peak MB"]
    body = [[r["explainer"], r["model"], str(r["d"]), f"{r['model_rows']:,}",
             str(r["model_calls"]), f"{r['us_per_row']:.1f}", f"{r['floor_us_per_row']:.1f}",
             fmt_ratio(r["ours_over_floor"]), f"{r['peak_mb']:.1f}"] for r in rows]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    for cells in [head, *body]:
        print("  " + " | ".join(c.ljust(wd) if i < 2 else c.rjust(wd)
                                for i, (c, wd) in enumerate(zip(cells, widths, strict=True))))


# ---------------------------------------------------------------------- reporting
def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def fmt_rate(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}x" if x < 10 else f"{x:.1f}x"


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def table_rows(settings: list[Setting], n_rows: int) -> list[dict[str, Any]]:
    out = []
    for s in settings:
        ixai_rate = s.ixai_rows / median(s.ixai_time) if s.ixai_time else None
        for b in s.batch_sizes:
            t = median(s.ours_time[b])
            f = median(s.floor_time[b])
            m = median(s.minimal_time[b]) if s.minimal_time.get(b) else None
            ours_rate = s.work.X.shape[0] / t
            out.append({
                "setting": f"{s.label} B={b}", "workload": s.work.name, "explainer": s.kind,
                "K": s.K, "B": b, "rows": s.work.X.shape[0], "ixai_rows": s.ixai_rows,
                "ixai_obs_per_s": ixai_rate, "ours_obs_per_s": ours_rate,
                "ratio": ours_rate / ixai_rate if ixai_rate else None,
                "floor_s": f, "ours_s": t, "ours_over_floor": t / f if f > 0 else None,
                "minimal_over_floor": m / f if m is not None and f > 0 else None,
                "model_rows_per_call": s.floor_rows[b],
                "ixai_s_repeats": s.ixai_time, "ours_s_repeats": s.ours_time[b],
                "floor_s_repeats": s.floor_time[b],
                "compile_s": max(s.compile_s) if s.compile_s else None,
            })
    return out


def print_table(rows: list[dict[str, Any]]) -> None:
    head = ["setting", "ixai obs/s", "ours obs/s", "ratio", "ours/floor", "minimal/floor"]
    body = [[r["setting"], fmt_rate(r["ixai_obs_per_s"]), fmt_rate(r["ours_obs_per_s"]),
             fmt_ratio(r["ratio"]), fmt_ratio(r["ours_over_floor"]),
             fmt_ratio(r["minimal_over_floor"])] for r in rows]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    def line(cells: list[str]) -> str:
        return " | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                          for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    print(line(head))
    print("-|-".join("-" * w for w in widths))
    for r in body:
        print(line(r))


def print_importances(settings: list[Setting], full_for: Callable[[Setting], bool]) -> list[dict]:
    out = []
    for s in settings:
        entry = {"setting": s.label, "features": s.work.names,
                 "ixai": None if s.ixai_imp is None else s.ixai_imp.tolist(),
                 "ours": {str(b): v.tolist() for b, v in s.ours_imp.items()}}
        rho = {b: spearman(s.ixai_imp, v) if s.ixai_imp is not None else float("nan")
               for b, v in s.ours_imp.items()}
        entry["spearman"] = {str(b): r for b, r in rho.items()}
        out.append(entry)
        zero = s.ixai_imp is not None and not np.any(s.ixai_imp != 0)
        rho_txt = ("Spearman(ixai, ours) " + ", ".join(f"B={b}: {r:+.2f}" for b, r in rho.items())
                   if s.ixai_imp is not None else "ours only")
        sums = ""
        if s.ixai_imp is not None:
            sums = f"; sum ixai {s.ixai_imp.sum():.4g}, ours " + ", ".join(
                f"B={b} {v.sum():.4g}" for b, v in s.ours_imp.items())
        few = (f" (ixai on its first {s.ixai_rows} rows only)"
               if s.ixai_rows < s.work.X.shape[0] else "")
        print(f"\n{s.label}: {rho_txt}{sums}{few}"
              + ("  ** ixai importances are ALL ZERO **" if zero else ""))
        if not full_for(s):
            continue
        bs = list(s.ours_imp)
        names = s.work.names
        idx = range(len(names))
        if len(names) > 12:  # wide workloads: the 12 largest by ours at the first B
            idx = np.argsort(-s.ours_imp[bs[0]])[:12]
        wn = max(len(str(n)) for n in names)
        print("  " + "feature".ljust(wn) + "  " + "ixai".rjust(11) + "".join(
            f"{'ours B=' + str(b):>12}" for b in bs))
        for j in idx:
            ix = "-" if s.ixai_imp is None else f"{s.ixai_imp[j]:.4g}"
            print("  " + str(names[j]).ljust(wn) + "  " + ix.rjust(11) + "".join(
                f"{s.ours_imp[b][j]:>12.4g}" for b in bs))
    return out


# ---------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2000, help="benchmark rows per workload")
    p.add_argument("--pretrain", type=int, default=5000,
                   help="rows the models are trained on first")
    p.add_argument("--repeats", type=int, default=3, help="interleaved repeats (medians reported)")
    p.add_argument("--device", default="cpu", help="device of our explainer and torch model")
    p.add_argument("--big", action="store_true",
                   help="add the d=100, K=10, B=256 settings (default on with --device cuda)")
    p.add_argument("--big-ixai-rows", type=int, default=None,
                   help="rows ixai explains in the d=100 settings (default: max(50, rows // 20))")
    p.add_argument("--no-ixai", action="store_true", help="measure ours only")
    p.add_argument("--json", default=None, metavar="PATH", help="write the numbers as JSON")
    p.add_argument("--check-cost-only", action="store_true",
                   help="measure only the per-batch value check against the explain step")
    p.add_argument("--compile", action="store_true",
                   help="also time ours with compile=True on the MLP workload (rows marked "
                        "compile=True; the first batches and the compile are untimed)")
    p.add_argument("--scaling", action="store_true",
                   help="measure only the scaling table in d (10, 100, 1000) of iPFI and iSAGE")
    args = p.parse_args(argv)

    torch.set_num_threads(1)
    device = torch.device(args.device)
    big = args.big
    if device.type == "cuda":
        if not torch.cuda.is_available():
            print("--device cuda: CUDA is not available; skipping the CUDA configuration "
                  "(MLP100: d=100, K=10, B=256) and running the CPU settings only")
            device = torch.device("cpu")
        else:
            big = True
    classes = import_ours()
    if args.scaling:
        print(f"torch {torch.__version__} ({torch.get_num_threads()} thread), "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores")
        table = scaling(classes, args.repeats)
        print_scaling(table)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(),
                           "platform": platform.platform(), "scaling": table}, fh, indent=2)
            print(f"\nwrote {args.json}")
        return 0
    ix = None if args.no_ixai else import_ixai()
    if ix is None and not args.no_ixai:
        print(f"ixai is not installed: measuring ours only. To compare, install it with\n"
              f"    {IXAI_HINT}\n")

    t_setup = time.perf_counter()
    n = args.rows
    works = [friedman_workload(n, args.pretrain, device), agrawal_workload(n, args.pretrain)]
    if big:
        works.append(wide_workload(n, args.pretrain, device))
    settings: list[Setting] = []
    for w in works:
        wide = w.name.startswith("MLP") and w.d > 10
        ks = (10,) if wide else (1, 5)
        bs = (256,) if wide else (1, 64)
        ix_rows = (args.big_ixai_rows or max(50, n // 20)) if wide else n
        for kind in ("iPFI", "iSAGE"):
            for k in ks:
                settings.append(Setting(w, kind, k, bs, min(ix_rows, n)))
                if args.compile and isinstance(w.ours_fn, nn.Module):
                    twin = settings[-1]  # shares its ixai timings
                    settings.append(Setting(w, kind, k, bs, min(ix_rows, n), compiled=True,
                                            ixai_time=twin.ixai_time))
    if args.check_cost_only:
        settings = []
    data = {(id(s.work), b): batches(s.work, b) for s in settings for b in s.batch_sizes}
    for s in settings:  # record the model inputs (and warm up)
        for b in s.batch_sizes:
            s.recorded[b] = record_ours(classes, s, b, SEED, data[id(s.work), b])
            s.floor_rows[b] = max((Z.shape[0] for Z in s.recorded[b]), default=0)
            s.ours_time[b], s.floor_time[b] = [], []
    setup = time.perf_counter() - t_setup

    print(f"torchstream explainers vs ixai {ix['version'] if ix else '(not measured)'}: "
          f"{n} rows, {args.repeats} repeats, torch {torch.__version__} on {device} "
          f"({torch.get_num_threads()} thread), {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores")
    for w in works:
        print(f"  {w.name}: {w.note}")
    print(f"  setup (streams, pre-training, recording): {setup:.1f} s")
    checks = check_cost(classes, works, args.repeats)
    if args.check_cost_only:
        print_check_cost(checks)
        return 0

    t_bench = time.perf_counter()
    for r in range(args.repeats):
        seed = SEED + r
        for s in settings:
            if ix is not None and not s.compiled:  # ixai once per workload, explainer, K
                t, imp = run_ixai(ix, s, seed)
                s.ixai_time.append(t)
                s.ixai_imp = imp
            for b in s.batch_sizes:
                t, imp = run_ours(classes, s, b, seed, data[id(s.work), b])
                s.ours_time[b].append(t)
                s.ours_imp[b] = imp
                s.floor_time[b].append(run_floor(s, b))
                m = None if s.compiled else minimal_step_time(s, b)
                if m is not None:
                    s.minimal_time.setdefault(b, []).append(m)
    bench = time.perf_counter() - t_bench

    rows = table_rows(settings, n)
    print()
    print_table(rows)
    print_check_cost(checks)
    print("\nratio = ours obs/s / ixai obs/s (ixai: one row at a time); ours/floor = our time / "
          "time of the bare model_fn calls on the same inputs; minimal/floor = the least work any "
          "eager iPFI step must do (minimal_step_time) over the same floor")
    print(f"benchmark loop: {bench:.1f} s")
    print("\nFinal importance (debiased EMA, alpha = 0.001; last repeat):")
    imps = print_importances(
        settings, lambda s: s.K == max(x.K for x in settings if x.work is s.work))
    zero = [s.label for s in settings if s.ixai_imp is not None and not np.any(s.ixai_imp != 0)]
    if zero:
        print(f"\nWARNING: ixai returned all-zero importances for {zero}")

    if args.json:
        payload = {
            "rows": n, "pretrain": args.pretrain, "repeats": args.repeats, "device": str(device),
            "torch": torch.__version__, "numpy": np.__version__,
            "ixai": ix["version"] if ix else None, "threads": torch.get_num_threads(),
            "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "workloads": {w.name: w.note for w in works}, "results": rows, "importances": imps,
            "check_cost": checks,
        }
        with open(args.json, "w") as fh:
            json.dump(payload, fh, indent=2)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
