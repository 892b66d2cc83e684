"""False alarms of ERICS on drift streams with known drift positions, per setting.

    python scripts/erics_false_alarms.py [--seeds 5] [--batches 600] [--tolerance 50]

Streams: SEA (sudden switches of the threshold variant 0 -> 1 -> 2 -> 3 -> 0, 10% label
noise) and Agrawal (gradual switches of the classification function 0 -> 1 -> 2 -> 3 -> 0,
width 1% of the stream, 10% perturbation), batches of 100 rows, features min-max scaled over
the whole stream (as in the ERICS paper), drifts at 20/40/60/80% of the stream. Every setting
reads the same Probit head (10 epochs per batch, lr 0.01), so the settings differ only in the
test.

An alert is *true* when it falls in ``[d, d + tolerance]`` batches of a known drift ``d``,
otherwise it is a *false alarm*; the alerts in batches ``[0, 60)`` (the start-up, before the
first drift) are also counted on their own. A drift is detected when a true alert follows it.
The delay is the number of batches from a drift to its first true alert (detected drifts only).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from torchstream.drift import ERICS
from torchstream.models.distributional import ProbitHead
from torchstream.streams.synthetic import SEA, Agrawal, ConceptDrift

B = 100
START_UP = 60
#: The settings compared: ERICS keyword arguments (window sizes and decay at their defaults).
SETTINGS: dict[str, dict[str, Any]] = {
    "warm_up=0, refractory=0": {"warm_up": 0, "refractory": 0},
    "reference_compat=True": {"reference_compat": True},
    "defaults (warm_up=M+W=100, refractory=W=50)": {},
    "warm_up=100, refractory=25": {"warm_up": 100, "refractory": 25},
}


def drift_stream(
    name: str, n_batches: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """``X`` (min-max scaled), ``y`` and the drift positions in batches of the stream ``name``."""
    n = n_batches * B
    variants = [0, 1, 2, 3, 0]
    step = n // len(variants)
    width = 1 if name == "SEA" else max(n // 100, 1)

    def make(v: int, i: int) -> Any:
        if name == "SEA":
            return SEA(v, seed=10 * seed + i, n_samples=None, noise=0.1)
        return Agrawal(v, seed=10 * seed + i, n_samples=None, perturbation=0.1)

    stream = make(variants[-1], len(variants) - 1)
    for i in range(len(variants) - 2, -1, -1):
        stream = ConceptDrift(make(variants[i], i), stream, position=step, width=width, seed=i)
    parts = list(stream.take(n).batches(B, dtype=torch.float64))
    X = torch.cat([p[0] for p in parts])
    y = torch.cat([p[1] for p in parts])
    lo, hi = X.min(0).values, X.max(0).values
    X = (X - lo) / torch.where(hi > lo, hi - lo, torch.ones_like(hi))
    return X, y, [step // B * k for k in range(1, len(variants))]


def classify(alerts: list[int], drifts: list[int], tolerance: int) -> dict[str, float]:
    """Counts of one run: start-up alerts, false alarms, detected drifts, mean delay."""
    true = [t for t in alerts if any(d <= t <= d + tolerance for d in drifts)]
    delays = []
    for d in drifts:
        hits = [t - d for t in true if d <= t <= d + tolerance]
        if hits:
            delays.append(min(hits))
    return {
        "start_up": sum(t < START_UP for t in alerts),
        "false": len(alerts) - len(true),
        "alerts": len(alerts),
        "detected": len(delays),
        "delay": float(np.mean(delays)) if delays else float("nan"),
    }


def measure(
    settings: Mapping[str, Mapping[str, Any]],
    seeds: int,
    n_batches: int,
    tolerance: int,
    echo: Callable[[str], None] = print,
) -> dict[tuple[str, str], list[dict[str, float]]]:
    """Per (stream, setting): one :func:`classify` result per seed."""
    out: dict[tuple[str, str], list[dict[str, float]]] = {}
    for name in ("SEA", "Agrawal"):
        for seed in range(seeds):
            X, y, drifts = drift_stream(name, n_batches, seed)
            head = ProbitHead(X.shape[1], epochs=10)
            detectors = {k: ERICS(head, **kw) for k, kw in settings.items()}
            for t in range(n_batches):
                head.learn(X[t * B : (t + 1) * B], y[t * B : (t + 1) * B])
                for det in detectors.values():
                    det.observe()
            for k, det in detectors.items():
                res = classify(det.alert_steps, drifts, tolerance)
                out.setdefault((name, k), []).append(res)
                echo(f"{name} seed {seed} {k}: {res} alerts<{START_UP}: "
                     f"{[t for t in det.alert_steps if t < START_UP]}")
    return out


def table(results: Mapping[tuple[str, str], list[dict[str, float]]], n_drifts: int) -> str:
    """Markdown table: totals over the seeds (delay: mean over the detected drifts' runs)."""
    lines = [
        "| stream | setting | alerts in batches 0-59 | false alarms | alerts | drifts detected "
        "| mean delay |",
        "|---|---|---|---|---|---|---|",
    ]
    for (name, k), runs in results.items():
        s = {key: sum(r[key] for r in runs) for key in ("start_up", "false", "alerts", "detected")}
        delay = np.nanmean([r["delay"] for r in runs]) if s["detected"] else float("nan")
        lines.append(
            f"| {name} | {k} | {s['start_up']} | {s['false']} | {s['alerts']} | "
            f"{s['detected']}/{n_drifts * len(runs)} | {delay:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="stream seeds per data set")
    parser.add_argument("--batches", type=int, default=600, help="batches of 100 rows")
    parser.add_argument("--tolerance", type=int, default=50, help="batches after a drift")
    parser.add_argument("--quiet", action="store_true", help="only the table")
    args = parser.parse_args()
    torch.set_num_threads(1)
    echo = (lambda s: None) if args.quiet else print
    results = measure(SETTINGS, args.seeds, args.batches, args.tolerance, echo)
    print(f"\n{args.seeds} seeds x {args.batches} batches of {B} rows; drifts at 20/40/60/80%; "
          f"tolerance {args.tolerance} batches")
    print(table(results, 4))


if __name__ == "__main__":
    main()
