"""CPU against CUDA in one run: explainers, FIRES / ERICS heads and training, with the ratios.

    python scripts/bench_gpu.py [--repeats 3] [--steps 20] [--compile] [--json out.json]

Workloads (seeded; the same computation on each device):

* iPFI, iSAGE (joint marginal imputation) and iPDP explaining a 100-128-128-10 MLP classifier,
  d = 100, K = 10 classes, B = 256 rows per step;
* ``floor``: the bare model calls of each explainer step, i.e. one forward pass over exactly as
  many rows as the explainer hands to its model in one step (counted, not assumed), so
  ``explainer / floor`` is the explainer's overhead over its model evaluations;
* online training of the same MLP at B = 256 (prediction + one optimiser step, the learner's
  divergence check included);
* FIRES + ERICS on a Probit head and on an MLP head (100-100-100, 5 Monte Carlo draws,
  ``sigma_init = 0.01``) at d = 1,000 and d = 10,000, B = 100.

With ``--compile`` the explainers and the learner also run with ``compile=True`` (their whole
step as one ``torch.compile``d function; rows marked ``compile=True``, on both devices; the
one-off compile time is excluded from the timing and reported as ``compile_s``).

CPU timings use one torch thread (``--cpu-threads``), CUDA timings synchronise before reading
the clock; the table gives the median milliseconds per step over ``--repeats`` runs of
``--steps`` steps, and the CPU / CUDA ratio. On CUDA every workload is also run once under
``torch.cuda.set_sync_debug_mode("warn")``: ``syncs`` is the number of host-device
synchronisations in one step, and ``--json`` lists where in the package each one happens.
Without a CUDA device only the CPU column is measured, and the script says so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from torchstream.drift import ERICS
from torchstream.explain import IncrementalPDP, IncrementalPFI, IncrementalSAGE
from torchstream.learners import OnlineClassifier
from torchstream.models import MLP, MLPHead, ProbitHead
from torchstream.select import FIRES

Step = Callable[[], None]


@dataclass
class Setup:
    """A workload prepared on one device: its step, and the rows its model saw in one step."""

    step: Step
    model_rows: int = 0
    notes: dict[str, float] = field(default_factory=dict)


Workload = Callable[[torch.device, bool], Setup]


def _mlp(d: int, k: int, device: torch.device, width: int = 128) -> torch.nn.Module:
    torch.manual_seed(0)
    hidden = (width, width) if width == 128 else (width, width, width)
    return MLP(d, k, hidden=hidden).to(device).eval()


def _batch(d: int, k: int, batch: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(batch, d, generator=g).to(device)
    y = torch.randint(k, (batch,), generator=g).to(device)
    return X, y


def explainer(kind: str, d: int = 100, k: int = 10, batch: int = 256, width: int = 128
              ) -> Workload:
    def setup(device: torch.device, compile_: bool) -> Setup:
        probs = torch.nn.Sequential(_mlp(d, k, device, width), torch.nn.Softmax(dim=1))
        seen = [0]
        if not compile_:  # rows counted on the eager path (a hook would not trace)
            probs.register_forward_pre_hook(lambda _, args: seen.__setitem__(
                0, seen[0] + args[0].shape[0]))
        X, y = _batch(d, k, batch, device)
        if kind == "ipdp":
            pdp = IncrementalPDP(probs, 0, alpha=0.01, grid_size=20, n_ice=20, output_index=0,
                                 seed=0, **({"compile": True} if compile_ else {}))
            run: Step = lambda: pdp.explain(X)  # noqa: E731
            exp: object = pdp
        else:
            cls = IncrementalPFI if kind == "ipfi" else IncrementalSAGE
            loss = cls(probs, "cross_entropy", d, alpha=0.01, storage_size=1000, seed=0,
                       **({"compile": True} if compile_ else {}))
            run = lambda: loss.explain(X, y)  # noqa: E731
            exp = loss
        with torch.no_grad():
            run()  # fill the storage
            seen[0] = 0
            run()
            run()  # compile=True: the first explained batch runs eagerly, this one compiles
        return Setup(run, seen[0] // 2, _compile_notes(exp))
    return setup


def _compile_notes(obj: object) -> dict[str, float]:
    """``compile_s`` of an object built with ``compile=True``; an error if its path is off."""
    if not getattr(obj, "compile", False):
        return {}
    reason = getattr(obj, "compile_off_reason", None)
    if reason:
        raise RuntimeError(f"compile=True is off: {reason}")
    return {"compile_s": round(float(getattr(obj, "compile_seconds", 0.0)), 2)}


def floor(kind: str, d: int = 100, k: int = 10, batch: int = 256, width: int = 128
          ) -> Workload:
    """The bare model calls of one ``kind`` step: one forward pass over as many rows."""
    def setup(device: torch.device, compile_: bool) -> Setup:
        rows = explainer(kind, d, k, batch, width)(device, False).model_rows
        model = _mlp(d, k, device, width)
        Z = torch.randn(rows, d, generator=torch.Generator().manual_seed(1)).to(device)

        @torch.no_grad()
        def step() -> None:
            torch.softmax(model(Z), dim=1)
        return Setup(step, rows)
    return setup


def training(d: int = 100, k: int = 10, batch: int = 256) -> Workload:
    def setup(device: torch.device, compile_: bool) -> Setup:
        def factory(n: int, c: int) -> torch.nn.Module:
            torch.manual_seed(0)
            return MLP(n, c, hidden=(128, 128))

        learner = OnlineClassifier(factory, lr=1e-3, device=str(device), seed=0,
                                classes=list(range(k)),
                                **({"compile": True} if compile_ else {}))
        X, y = _batch(d, k, batch, device)

        def step() -> None:
            with torch.no_grad():
                learner(X)
            learner.learn(X, y)
        step()  # compile=True: the first calls compile
        return Setup(step, batch, _compile_notes(learner))
    return setup


def fires_erics(head: str, d: int, batch: int = 100) -> Workload:
    def setup(device: torch.device, compile_: bool) -> Setup:
        g = torch.Generator().manual_seed(0)
        if head == "probit":
            h = ProbitHead(d, device=device)
            dtype = torch.float64
        else:
            # sigma_init 0.01: with the default 1, weights drawn at std 1 over d >= 1000 inputs
            # blow the activations up and the head stops with non-finite parameters
            h = MLPHead(d, hidden=(100, 100, 100), seed=0, sigma_init=0.01, device=device)
            dtype = torch.float32
        fires = FIRES(h, n_selected=max(1, d // 10))
        erics = ERICS(h)
        X = torch.randn(batch, d, generator=g, dtype=dtype).to(device)
        y = (X[:, 0] > 0).long()

        def step() -> None:
            fires.learn(X, y)
            erics.observe()
        return Setup(step, batch)
    return setup


#: name: (workload, may be compiled, CUDA only). The 1024-wide MLP (3 hidden layers) shows the
#: explainers' fixed cost per step against a model whose calls take longer; its CPU column
#: would take seconds per step and is left out.
WORKLOADS: dict[str, tuple[Workload, bool, bool]] = {
    "iPFI  MLP d=100 K=10 B=256": (explainer("ipfi"), True, False),
    "  floor (model calls of iPFI)": (floor("ipfi"), False, False),
    "iSAGE MLP d=100 K=10 B=256": (explainer("isage"), True, False),
    "  floor (model calls of iSAGE)": (floor("isage"), False, False),
    "iPDP  MLP d=100 K=10 B=256": (explainer("ipdp"), True, False),
    "  floor (model calls of iPDP)": (floor("ipdp"), False, False),
    "iPFI  MLP-1024 d=100 K=10 B=256": (explainer("ipfi", width=1024), False, True),
    "  floor (model calls of iPFI-1024)": (floor("ipfi", width=1024), False, True),
    "iSAGE MLP-1024 d=100 K=10 B=256": (explainer("isage", width=1024), False, True),
    "  floor (model calls of iSAGE-1024)": (floor("isage", width=1024), False, True),
    "train MLP d=100 K=10 B=256": (training(), True, False),
    "FIRES+ERICS Probit d=1000 B=100": (fires_erics("probit", 1000), False, False),
    "FIRES+ERICS Probit d=10000 B=100": (fires_erics("probit", 10_000), False, False),
    "FIRES+ERICS MLP-head d=1000 B=100": (fires_erics("mlp", 1000), False, False),
    "FIRES+ERICS MLP-head d=10000 B=100": (fires_erics("mlp", 10_000), False, False),
}


def time_ms(step: Step, device: torch.device, steps: int, repeats: int) -> float:
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


def _package_frame(stack: traceback.StackSummary) -> str:
    """The innermost frame of the package (else of this script) that led to a sync."""
    for frame in reversed(stack):
        if "/torchstream/" in frame.filename:
            return f"torchstream/{frame.filename.split('/torchstream/')[-1]}:{frame.lineno} " \
                   f"({frame.name}: {(frame.line or '').strip()})"
    for frame in reversed(stack):
        if frame.filename.endswith("bench_gpu.py"):
            return f"bench_gpu.py:{frame.lineno} ({frame.name})"
    return "elsewhere"


def count_syncs(step: Step) -> Counter[str]:
    """Host-device synchronisations of one step, by the package line that caused them."""
    where: Counter[str] = Counter()
    shown = warnings.showwarning
    inside = [False]  # only the step's own syncs (not the mode switches around it)

    def record(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
        if "synchroniz" not in str(message):
            shown(message, category, filename, lineno, file, line)
        elif inside[0]:
            where[_package_frame(traceback.extract_stack()[:-1])] += 1

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            inside[0] = True
            step()
        finally:
            inside[0] = False
            torch.cuda.set_sync_debug_mode("default")
            warnings.showwarning = shown
    return where


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--compile", action="store_true",
                        help="also time the explainers and training with compile=True")
    parser.add_argument("--only", help="run only the workloads whose name contains this text")
    parser.add_argument("--json", type=Path, help="write the numbers and the sync sites here")
    parser.add_argument("--profile", type=Path,
                        help="CUDA: write torch.profiler tables (host and device time by op) of "
                             "five steps of each explainer here")
    parser.add_argument("--cpu-threads", type=int, default=1,
                        help="torch threads of the CPU column (default: %(default)s)")
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    devices = [torch.device("cpu")]
    cuda = torch.cuda.is_available()
    header = {"torch": torch.__version__, "python": sys.version.split()[0],
              "cpu_threads": torch.get_num_threads()}
    if cuda:
        devices.append(torch.device("cuda"))
        header["cuda_device"] = torch.cuda.get_device_name(0)
        print(f"CUDA device: {header['cuda_device']}, torch {torch.__version__}")
    else:
        print(f"no CUDA device: measuring the CPU only (torch {torch.__version__})")
    cols = f"{'workload':<38}{'CPU ms':>10}"
    if cuda:
        cols += f"{'CUDA ms':>10}{'CPU/CUDA':>10}{'syncs':>7}"
    print(cols)
    results: list[dict[str, object]] = []
    variants = [False, True] if args.compile else [False]
    for name, (workload, compilable, cuda_only) in WORKLOADS.items():
        if args.only and args.only not in name or (cuda_only and not cuda):
            continue
        for compile_ in variants:
            if compile_ and not compilable:
                continue
            label = name + (" compile=True" if compile_ else "")
            row: dict[str, object] = {"workload": label}
            try:
                per_device = []
                for dev in devices:
                    if cuda_only and dev.type == "cpu":
                        per_device.append(float("nan"))
                        continue
                    setup = workload(dev, compile_)
                    t0 = time.perf_counter()
                    per_device.append(time_ms(setup.step, dev, args.steps, args.repeats))
                    row[f"{dev.type}_setup_and_time_s"] = round(time.perf_counter() - t0, 2)
                    if setup.model_rows:  # counted on the eager path only
                        row["model_rows_per_step"] = setup.model_rows
                    for note, value in setup.notes.items():
                        row[f"{dev.type}_{note}"] = value
                    if dev.type == "cuda":
                        where = count_syncs(setup.step)
                        row["syncs_per_step"] = sum(where.values())
                        row["sync_sites"] = dict(where.most_common())
                row["cpu_ms"] = per_device[0]
                line = f"{label:<38}{per_device[0]:>10.2f}"
                if cuda:
                    row["cuda_ms"] = per_device[1]
                    line += f"{per_device[1]:>10.2f}{per_device[0] / per_device[1]:>9.1f}x" \
                            f"{row['syncs_per_step']:>7}"
            except Exception as e:  # one broken workload must not hide the others
                row["error"] = f"{type(e).__name__}: {e}"
                line = f"{label:<38} failed: {row['error'][:160]}"
            print(line, flush=True)
            results.append(row)
    by = {r["workload"]: r for r in results}
    print("\nexplainer / floor (overhead over its bare model calls, same device):")
    for kind, name in (("iPFI", "iPFI  MLP d=100 K=10 B=256"),
                       ("iSAGE", "iSAGE MLP d=100 K=10 B=256"),
                       ("iPDP", "iPDP  MLP d=100 K=10 B=256"),
                       ("iPFI-1024", "iPFI  MLP-1024 d=100 K=10 B=256"),
                       ("iSAGE-1024", "iSAGE MLP-1024 d=100 K=10 B=256")):
        fl = by.get(f"  floor (model calls of {kind})", {})
        for label in (name, name + " compile=True"):
            exp = by.get(label, {})
            ms = [(dev.type, exp.get(f"{dev.type}_ms"), fl.get(f"{dev.type}_ms"))
                  for dev in devices]
            ratios = [f"{dev} {float(e) / float(f):.2f}x" for dev, e, f in ms  # type: ignore
                      if e is not None and f is not None and e == e]  # not NaN
            if ratios:
                print(f"  {kind + label[len(name):]:<24}{', '.join(ratios)}"
                      f"  ({by[name].get('model_rows_per_step')} model rows/step)")
    if cuda:
        print("\nsync sites (one step, by package line):")
        for r in results:
            for site, n in dict(r.get("sync_sites", {})).items():  # type: ignore[call-overload]
                print(f"  {r['workload']:<38}{n:>3}  {site}")
    if args.json:
        args.json.write_text(json.dumps({"header": header, "results": results}, indent=1))
    if args.profile and cuda:
        args.profile.write_text(profile_tables(torch.device("cuda"), args.compile))


def profile_tables(device: torch.device, compiled: bool = False) -> str:
    """torch.profiler over five steps of each explainer (with ``compiled`` also of its
    compile=True step): the ops by host (self CPU) time and by device time, the evidence of
    where a step's time goes."""
    out = []
    for kind in ("ipfi", "isage", "ipdp"):
        for compile_ in (False, True) if compiled else (False,):
            step = explainer(kind)(device, compile_).step
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            activities = [torch.profiler.ProfilerActivity.CPU,
                          torch.profiler.ProfilerActivity.CUDA]
            with torch.profiler.profile(activities=activities) as prof:
                for _ in range(5):
                    step()
                torch.cuda.synchronize()
            table = prof.key_averages()
            name = kind + (" compile=True" if compile_ else "")
            out.append(f"== {name}: by self CPU time (5 steps)\n"
                       + table.table(sort_by="self_cpu_time_total", row_limit=15))
            out.append(f"== {name}: by device time (5 steps)\n"
                       + table.table(sort_by="self_cuda_time_total", row_limit=10))
    return "\n".join(out)


if __name__ == "__main__":
    main()
