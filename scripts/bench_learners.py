"""Throughput of ``torchstream.OnlineLearner`` next to deep-river's ``Classifier``.

Both learners train the same network (MLP 9-64-64-2, ReLU, cross-entropy, Adam lr 1e-3, the same
initial weights) on the same stream (river's Phishing, repeated to ``--rows`` rows), in one
process, with torch on one thread. Every setting is prequential: predict first, then learn, and
the accuracy is that of the predictions (argmax of the probabilities vs the label). Settings:

* ``B=1 river API``: ``predict_proba_one(x)`` then ``learn_one(x, y)`` on dict rows, ours vs
  deep-river (the headline ratio; the goal is ours >= 2x deep-river).
* ``B=1 tensor API`` (ours only): ``predict_proba(X)`` then ``learn(X, y)`` on ``[1, 9]`` tensors.
* ``--compile`` adds ``B=1 river API, compile=True`` (ours only): the same loop with
  ``OnlineClassifier(..., compile=True)``. Its learner first runs ``COMPILE_WARMUP`` rows untimed
  (the one-off compiles of the prediction and the step, for one and for two classes seen), then
  the timed loop over all rows goes on training it.
* ``ref: torch loop``: a plain per-row loop (forward under ``no_grad``, then forward, loss,
  backward, step) with ``Adam`` and ``Adam(fused=True)``: what a wrapper adds its work to. Ours
  takes the same steps (bit for bit, with the fused kernel) but runs the forward pass once per
  row: the prediction's output, computed with autograd, is the one the step differentiates. Its
  ratio column is relative to deep-river at B=1.
* ``B=32`` / ``B=256``: our tensor API (``predict_proba(X)`` then ``learn(X, y)``) against
  deep-river's ``predict_proba_many`` / ``learn_many`` on pandas frames of the same batches, and
  both libraries on the same pandas frames.

Every setting runs ``--repeats`` times, interleaved (ours, deep-river, ours, ...), and the table
gives the median throughput (observations per second of predict + learn) and the median accuracy.
Only the loop is timed: data preparation (dict rows, tensors, frames) and learner construction are
not.

Run it from the repository root::

    python scripts/bench_learners.py                      # 5000 rows, 3 repeats
    python scripts/bench_learners.py --rows 1000 --repeats 1   # smoke run (a few seconds)
    python scripts/bench_learners.py --json bench.json    # also write the numbers
    python scripts/bench_learners.py --compile --no-peer  # eager vs compile=True at B=1

deep-river is a peer measured for comparison, not a dependency of torchstream. Version 0.3.4 pins
``torch<2.6`` and ``river<0.26``, so install it beside our torch and river without its
dependencies (plus ``sortedcontainers``, which it imports and river 0.26 no longer brings)::

    pip install --no-deps deep-river==0.3.4 sortedcontainers

deep-river 0.3.4 imports ``river.anomaly.base``, which river 0.26 moved to
``river.base.anomaly_detector``; the script aliases the old name before importing deep-river.
Without deep-river the script says how to install it and measures our side only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Hashable
from typing import Any

import torch
import torch.nn.functional as F
from river import datasets
from torch import nn

from torchstream import OnlineClassifier, OnlineLearner
from torchstream.models import MLP
from torchstream.streams import from_river

HIDDEN = (64, 64)
LR = 1e-3
SEED = 0
INSTALL_HINT = "pip install --no-deps deep-river==0.3.4 sortedcontainers"
COMPILE_WARMUP = 50

# A run returns (seconds spent in the timed loop, number of correct predictions).
Run = Callable[[], tuple[float, int]]


# ---------------------------------------------------------------------- data
class Data:
    """The stream in every form the settings need, prepared once (outside the timings)."""

    def __init__(self, n_rows: int) -> None:
        pairs = list(itertools.islice(itertools.cycle(datasets.Phishing()), n_rows))
        self.rows: list[dict[Hashable, Any]] = [dict(x) for x, _ in pairs]
        self.labels: list[Any] = [y for _, y in pairs]
        stream = from_river(list(zip(self.rows, self.labels)), task="classification")
        self.names = list(stream.schema.names)  # column order of X (the rows' key order)
        self.classes = list(stream.classes)  # class index -> label (sorted labels)
        self.X = stream.X.to(torch.float32)  # [n, d]
        self.y = stream.y  # [n] class indices
        self.y_list: list[int] = self.y.tolist()
        self.n, self.d = self.X.shape
        # labels in order of first appearance: the class order of our river API
        self.first_seen = list(dict.fromkeys(self.labels))
        self._frames: dict[int, list[tuple[Any, Any]]] = {}

    def frames(self, size: int) -> list[tuple[Any, Any]]:
        """The batches of ``size`` rows as (DataFrame, Series of labels)."""
        if size not in self._frames:
            import pandas as pd

            out = []
            for lo in range(0, self.n, size):
                hi = min(lo + size, self.n)
                X = pd.DataFrame(self.rows[lo:hi], index=range(lo, hi))
                out.append((X, pd.Series(self.labels[lo:hi], index=X.index)))
            self._frames[size] = out
        return self._frames[size]


# ---------------------------------------------------------------------- the network
class PlainMLP(nn.Module):
    """The same architecture as ``torchstream.models.MLP(d, 2, hidden=(64, 64))`` as a bare
    ``nn.Sequential`` (no input checks): what deep-river and the reference loop train."""

    def __init__(self, n_features: int, n_outputs: int = 2, hidden: tuple[int, ...] = HIDDEN):
        super().__init__()
        layers: list[nn.Module] = []
        width = n_features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, n_outputs))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def factory(d: int, k: int) -> nn.Module:
    return MLP(d, k, hidden=HIDDEN)


def make_ours(compile: bool = False) -> OnlineLearner:
    return OnlineClassifier(factory, lr=LR, optimizer="adam", seed=SEED, compile=compile)


def initial_weights(d: int) -> list[torch.Tensor]:
    """Our learner's initial weights (the same seed builds the same module every time), as
    ``[W0, b0, W1, b1, ..., W_out, b_out]``; columns follow our features, rows our classes."""
    probe = OnlineClassifier(factory, lr=LR, optimizer="adam", seed=SEED, n_features=d)
    assert probe.module is not None
    return [p.detach().clone() for p in probe.module.parameters()]


def plain_copy(
    weights: list[torch.Tensor], columns: list[int] | None = None, units: list[int] | None = None
) -> PlainMLP:
    """A :class:`PlainMLP` holding ``weights``, its input columns taken in the order ``columns``
    and its output units in the order ``units`` (indices into ours), so that it computes the same
    function as our module when the peer orders features and classes differently."""
    d, k = weights[0].shape[1], weights[-1].shape[0]
    net = PlainMLP(d, k)
    ws = [w.clone() for w in weights]
    if columns is not None:
        ws[0] = ws[0][:, columns]
    if units is not None:
        ws[-2], ws[-1] = ws[-2][units], ws[-1][units]
    with torch.no_grad():
        for p, w in zip(net.parameters(), ws):
            p.copy_(w)
    return net


# ---------------------------------------------------------------------- deep-river
def import_deep_river() -> tuple[Any, str] | tuple[None, str]:
    """deep-river's ``Classifier`` class and version, or ``(None, why)``."""
    try:
        import river.anomaly
        from river.base import anomaly_detector

        if "river.anomaly.base" not in sys.modules:
            try:
                import river.anomaly.base
            except ModuleNotFoundError:  # river >= 0.26 moved it
                sys.modules["river.anomaly.base"] = anomaly_detector
                river.anomaly.base = anomaly_detector  # type: ignore[attr-defined]
    except ImportError:
        pass
    try:
        from deep_river.classification import Classifier
    except ImportError as e:
        return None, f"{type(e).__name__}: {e}"
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("deep-river")
    except PackageNotFoundError:
        ver = "?"
    return Classifier, ver


def make_peer(Classifier: Any, data: Data, weights: list[torch.Tensor], units: list[int]) -> Any:
    """deep-river's classifier on a :class:`PlainMLP` with our initial weights. deep-river orders
    the features and the classes by sorting their names / labels; ``units[j]`` is our output unit
    for deep-river's class ``j``."""
    sorted_names = sorted(data.names)
    columns = [data.names.index(n) for n in sorted_names]
    module = plain_copy(weights, columns=columns, units=units)
    return Classifier(
        module=module,
        loss_fn="cross_entropy",
        optimizer_fn="adam",
        lr=LR,
        output_is_logit=True,
        is_class_incremental=False,
        is_feature_incremental=False,
        device="cpu",
    )


# ---------------------------------------------------------------------- runs
def _argmax(proba: dict[Any, float]) -> Any:
    return max(proba, key=proba.get) if proba else None


def river_one(model: Any, data: Data) -> tuple[float, int]:
    """B = 1, river API: predict_proba_one then learn_one per row."""
    correct = 0
    rows, labels = data.rows, data.labels
    t0 = time.perf_counter()
    for x, y in zip(rows, labels):
        correct += _argmax(model.predict_proba_one(x)) == y
        model.learn_one(x, y)
    return time.perf_counter() - t0, correct


def river_one_compiled(data: Data, notes: list[str]) -> tuple[float, int]:
    """B = 1, river API, ``compile=True``: warmed up on ``COMPILE_WARMUP`` rows (untimed)."""
    model = make_ours(compile=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        for x, y in zip(data.rows[:COMPILE_WARMUP], data.labels[:COMPILE_WARMUP]):
            model.predict_proba_one(x)
            model.learn_one(x, y)
    note = (
        f"compile off ({model.compile_off_reason})" if model.compile_off_reason
        else f"compiled in {model.compile_seconds:.1f} s, before the timed loop"
    )
    notes[:] = [note] + [str(w.message) for w in caught if "compile=True" not in str(w.message)]
    return river_one(model, data)


def ours_tensor(data: Data, size: int) -> tuple[float, int]:
    """Our tensor API: predict_proba(X) then learn(X, y) per batch of ``size`` rows."""
    learner = make_ours()
    batches = [(data.X[lo : lo + size], data.y[lo : lo + size]) for lo in range(0, data.n, size)]
    n_correct = []
    t0 = time.perf_counter()
    for X, y in batches:
        n_correct.append((learner.predict_proba(X).argmax(1) == y).sum())
        learner.learn(X, y)
    elapsed = time.perf_counter() - t0
    return elapsed, int(sum(int(c) for c in n_correct))


def river_many(model: Any, data: Data, size: int) -> tuple[float, int]:
    """predict_proba_many then learn_many per pandas batch of ``size`` rows."""
    frames = data.frames(size)
    correct = 0
    t0 = time.perf_counter()
    for X, y in frames:
        proba = model.predict_proba_many(X)
        if proba.shape[1]:
            correct += int((proba.idxmax(axis=1).to_numpy() == y.to_numpy()).sum())
        model.learn_many(X, y)
    return time.perf_counter() - t0, correct


def torch_loop(data: Data, weights: list[torch.Tensor], fused: bool) -> tuple[float, int]:
    """The plain per-row loop: forward under no_grad for the prediction, then one Adam step."""
    net = plain_copy(weights)
    opt = torch.optim.Adam(net.parameters(), lr=LR, fused=fused or None)
    rows = [data.X[i : i + 1] for i in range(data.n)]
    targets = [data.y[i : i + 1] for i in range(data.n)]
    y_list = data.y_list
    correct = 0
    t0 = time.perf_counter()
    for x, t, y in zip(rows, targets, y_list):
        with torch.no_grad():
            correct += int(net(x).argmax(1)) == y
        loss = F.cross_entropy(net(x), t)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return time.perf_counter() - t0, correct


# ---------------------------------------------------------------------- the benchmark
class Setting:
    def __init__(
        self, name: str, ours: Run, peer: Run | None = None, note: str = "", ref: bool = False
    ) -> None:
        self.name, self.ours, self.peer, self.note, self.ref = name, ours, peer, note, ref
        self.runs: dict[str, list[tuple[float, int]]] = {"ours": [], "deep_river": []}
        self.notes: list[str] = []  # filled by a run (the compile time of compile=True)


def build_settings(
    data: Data, Classifier: Any | None, batch_sizes: list[int], compile: bool = False
) -> list[Setting]:
    weights = initial_weights(data.d)
    # river API: our class order is that of first appearance, deep-river's the sorted one
    units_river = [data.first_seen.index(c) for c in sorted(data.first_seen)]
    # tensor API: our classes are the stream's class indices (sorted labels), as deep-river's
    has_many = Classifier is not None and all(
        hasattr(Classifier, m) for m in ("learn_many", "predict_proba_many")
    )

    def peer(units: list[int]) -> Any:
        return make_peer(Classifier, data, weights, units)

    settings = [
        Setting(
            "B=1 river API (predict_proba_one + learn_one)",
            lambda: river_one(make_ours(), data),
            (lambda: river_one(peer(units_river), data)) if Classifier is not None else None,
        ),
        Setting("B=1 tensor API (predict_proba + learn)", lambda: ours_tensor(data, 1)),
    ]
    if compile:
        compile_notes: list[str] = []
        compiled = Setting(
            "B=1 river API, compile=True", lambda: river_one_compiled(data, compile_notes)
        )
        compiled.notes = compile_notes
        settings.append(compiled)
    settings += [
        Setting("ref: torch loop B=1, Adam", lambda: torch_loop(data, weights, False), ref=True),
        Setting(
            "ref: torch loop B=1, Adam(fused=True)",
            lambda: torch_loop(data, weights, True),
            ref=True,
        ),
    ]
    no_many = "deep-river has no learn_many/predict_proba_many" if Classifier is not None else ""
    sorted_units = list(range(len(data.classes)))
    for b in batch_sizes:
        settings.append(
            Setting(
                f"B={b} ours tensor API vs deep-river frames",
                lambda b=b: ours_tensor(data, b),
                (lambda b=b: river_many(peer(sorted_units), data, b)) if has_many else None,
                note="" if has_many else no_many,
            )
        )
        if has_many:
            settings.append(
                Setting(
                    f"B={b} both on frames (predict_proba_many + learn_many)",
                    lambda b=b: river_many(make_ours(), data, b),
                    lambda b=b: river_many(peer(units_river), data, b),
                )
            )
    return settings


def summarise(runs: list[tuple[float, int]], n: int) -> dict[str, Any] | None:
    if not runs:
        return None
    return {
        "obs_per_s": statistics.median(n / t for t, _ in runs),
        "best_obs_per_s": max(n / t for t, _ in runs),
        "accuracy": statistics.median(c / n for _, c in runs),
        "seconds": [round(t, 4) for t, _ in runs],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=5000, help="rows of Phishing, cycled (5000 = x4)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per setting; the median is shown")
    ap.add_argument("--batch-sizes", default="32,256", help="comma-separated mini-batch sizes")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--no-peer", action="store_true", help="measure our side only")
    ap.add_argument(
        "--compile", action="store_true", help="add the B=1 river API with compile=True"
    )
    ap.add_argument("--json", metavar="PATH", help="write the numbers to PATH")
    args = ap.parse_args(argv)
    if args.rows < 1 or args.repeats < 1:
        ap.error("--rows and --repeats must be >= 1")
    batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]

    torch.set_num_threads(args.threads)
    Classifier, peer_version = (None, "not requested") if args.no_peer else import_deep_river()
    if Classifier is None and not args.no_peer:
        print(f"deep-river is not importable ({peer_version}); measuring our side only.")
        print(f"To compare, install the peer beside torch and river: {INSTALL_HINT}\n")

    data = Data(args.rows)
    settings = build_settings(data, Classifier, batch_sizes, args.compile)
    # one untimed pass of every setting on a few rows: lazy imports and first-call costs
    for s in build_settings(Data(min(args.rows, 300)), Classifier, batch_sizes, args.compile):
        for run in (s.ours, s.peer):
            if run is not None:
                run()
    print(
        f"Phishing x{args.rows / 1250:g} ({data.n} rows, {data.d} features), MLP "
        f"{data.d}-{'-'.join(map(str, HIDDEN))}-{len(data.classes)}, Adam lr {LR:g}; "
        f"torch {torch.__version__} on {torch.get_num_threads()} thread(s); "
        f"deep-river {peer_version if Classifier is not None else '-'}; "
        f"{args.repeats} interleaved repeat(s), medians"
    )

    for rep in range(args.repeats):
        for s in settings:
            sides = [("ours", s.ours)] + ([("deep_river", s.peer)] if s.peer else [])
            if rep % 2:
                sides.reverse()
            for side, run in sides:
                s.runs[side].append(run())
        print(f"  repeat {rep + 1}/{args.repeats} done", file=sys.stderr)

    results = []
    for s in settings:
        results.append(
            {
                "setting": s.name,
                "reference": s.ref,
                "ours": summarise(s.runs["ours"], data.n),
                "deep_river": summarise(s.runs["deep_river"], data.n),
                "note": "; ".join(filter(None, [s.note, *s.notes])),
            }
        )
    peer_b1 = results[0]["deep_river"]
    for r in results:
        if r["deep_river"] is not None:
            r["ratio"] = r["ours"]["obs_per_s"] / r["deep_river"]["obs_per_s"]
        elif r["reference"] and peer_b1 is not None:
            r["ratio"] = r["ours"]["obs_per_s"] / peer_b1["obs_per_s"]
        else:
            r["ratio"] = None

    print_table(results)
    head = results[0]
    if head["ratio"] is not None:
        verdict = "met" if head["ratio"] >= 2 else "NOT met"
        print(f"\nB=1 river API: ours / deep-river = {head['ratio']:.2f}x (goal >= 2x: {verdict})")
    for r in results:
        if r["note"]:
            print(f"note: {r['setting']}: {r['note']}")
    if any(r["reference"] for r in results) and peer_b1 is not None:
        print("ref rows: 'ours' is the plain loop; the ratio is against deep-river at B=1.")
    print(
        "accuracy: our river API predicts nothing before its first learn (no class seen yet), "
        "which counts as a miss: the whole first batch on frames. Our river API numbers its "
        "classes in order of appearance, deep-river in sorted order (its initial weights are "
        "permuted to match). Throughput varies with the load of a shared machine: compare "
        "ratios from the same run."
    )

    if args.json:
        payload = {
            "config": {
                "rows": data.n,
                "repeats": args.repeats,
                "threads": torch.get_num_threads(),
                "batch_sizes": batch_sizes,
                "network": f"MLP {data.d}-{'-'.join(map(str, HIDDEN))}-{len(data.classes)}",
                "optimizer": f"adam lr={LR}",
                "torch": torch.__version__,
                "river": _version("river"),
                "deep_river": peer_version if Classifier is not None else None,
                "python": platform.python_version(),
                "machine": platform.machine(),
                "cpu_count": os.cpu_count(),
                "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            },
            "results": results,
        }
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)
        print(f"wrote {args.json}")
    return 0


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def print_table(results: list[dict[str, Any]]) -> None:
    def num(r: dict[str, Any] | None, key: str, fmt: str) -> str:
        return "-" if r is None else format(r[key], fmt)

    header = ["setting", "ours obs/s", "deep-river obs/s", "ratio", "ours acc", "deep-river acc"]
    lines = []
    for r in results:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        lines.append(
            [
                r["setting"],
                num(r["ours"], "obs_per_s", ",.0f"),
                num(r["deep_river"], "obs_per_s", ",.0f"),
                ratio,
                num(r["ours"], "accuracy", ".3f"),
                num(r["deep_river"], "accuracy", ".3f"),
            ]
        )
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    fmt = " | ".join(f"{{:<{widths[0]}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    print()
    print(fmt.format(*header))
    print("-+-".join("-" * w for w in widths))
    for row in lines:
        print(fmt.format(*row))


if __name__ == "__main__":
    sys.exit(main())
