"""``torchstream evaluate``: compare predictors (and drift detectors) on one stream.

Writes to ``--out``: ``summary.csv`` / ``summary.md`` (final measures per predictor),
``steps.csv`` (per-step records), ``detections.csv`` and ``detection_measures.csv`` (when
detectors run), the plots ``metric.png``, ``spider.png`` (several predictors) and
``detections.png``, and TensorBoard logs in ``tensorboard/``: one run per predictor
(``tensorboard/<predictor>``, its metrics over the rows seen) and the run ``evaluation`` (the
config, the detectors' alarm series ``alarms/<detector>`` and a table of the alarm rows).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from torchstream.cli.checks import check_device, check_output_path
from torchstream.cli.detectors import river_detector
from torchstream.cli.stream_options import make_stream
from torchstream.drift import ErrorDetector
from torchstream.evaluate.measures.detection import detection_measures
from torchstream.evaluate.metrics import METRICS
from torchstream.evaluate.runner import Evaluator
from torchstream.learners.registry import LearnerOptions, make_learner
from torchstream.learners.threads import use_threads
from torchstream.evaluate.result import RunResult
from torchstream.sinks import TensorBoardSink
from torchstream.sinks.summary_table import markdown_table
from torchstream.viz.evaluation import (
    SMOOTH_STEPS,
    plot_detections,
    plot_metric_over_time,
    plot_spider,
)

__all__ = ["evaluate"]



def evaluate(args: argparse.Namespace) -> int:
    """Run ``torchstream evaluate``: the predictors named by ``--models`` come from the learner
    factory (:func:`~torchstream.learners.registry.make_learner`), as ``run``'s model does."""
    for flag in ("batch_size", "window", "threads", "test_interval", "k", "detection_window"):
        if getattr(args, flag) < 1:
            raise SystemExit(f"error: --{flag.replace('_', '-')} must be >= 1")
    if args.n_pretrain < 0:
        raise SystemExit("error: --n-pretrain must be >= 0")
    if args.strategy == "kfold" and args.k < 2:
        raise SystemExit("error: --k must be >= 2")
    check_device(args.device)
    if args.out:
        check_output_path(args.out, "--out", directory=True)
    use_threads(args.threads)
    torch.manual_seed(args.seed)
    try:
        stream = make_stream(args)
        names = [n.strip() for n in args.models.split(",") if n.strip()]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"--models needs distinct names, got {args.models!r}")
        options = LearnerOptions(seed=args.seed, device=args.device)
        learners = {n: make_learner(n, stream, options).learner for n in names}
        det_names = [] if args.detectors == "none" else [
            d.strip() for d in args.detectors.split(",") if d.strip()]
        detectors = [ErrorDetector(river_detector(d), name=f"drift_{d}") for d in det_names]
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    strategy_args: dict[str, Any] = {}
    if args.strategy == "holdout":
        strategy_args = {"test_interval": args.test_interval, "holdout_size": args.holdout_size,
                         "replace_every": args.replace_every}
    elif args.strategy == "kfold":
        strategy_args = {"k": args.k, "mode": args.mode}  # seeded from the runner's seed
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or Path("runs") / f"evaluate-{stream.name}-{stamp}")
    out.mkdir(parents=True, exist_ok=True)
    # one TensorBoard run per predictor, overlaid in colour; the config, the detectors and
    # their alarms in the run "evaluation"
    main_run = "evaluation" if "evaluation" not in learners else "evaluation_"
    sink = TensorBoardSink(str(out / "tensorboard"), run=main_run, predictors=list(learners))
    runner = Evaluator(
        learners, stream, strategy=args.strategy, strategy_args=strategy_args,
        batch_size=args.batch_size, n_pretrain=args.n_pretrain,
        label_delay=tuple(args.label_delay) if args.label_delay else None,
        window=args.window, plugins=detectors, sinks=[sink], log_every=1,
        progress=sys.stderr.isatty(), seed=args.seed, records_path=out / "steps.csv",
    )
    print(f"stream   {stream!r}")
    print(f"strategy {runner.strategy!r}, batch size {args.batch_size}, "
          f"pre-training {args.n_pretrain} rows")
    try:
        result = runner.run()
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    finally:
        runner.close()
    summary = result.summary()
    summary.to_csv(out / "summary.csv")
    (out / "summary.md").write_text(markdown_table(summary))
    steps = result.to_frame()  # read back from steps.csv, written as the run went
    print(result.table())
    known = list(stream.drift_positions)
    n_total = result.n_rows
    if detectors:
        rows = []
        for d in detectors:
            m = detection_measures(known, _alarms(d), window=args.detection_window,
                                   n_total=n_total) if known else {}
            rows.append({"detector": d.name, "n_detections": len(_alarms(d)), **m})
        table = pd.DataFrame(rows).set_index("detector")
        table.to_csv(out / "detection_measures.csv")
        pd.DataFrame([{"detector": d.name, "position": p} for d in detectors
                      for p in _alarms(d)]).to_csv(out / "detections.csv", index=False)
        print(table.to_string(float_format=lambda v: f"{v:.4f}"))
    _plots(out, result, steps, known, detectors, args, n_total)
    print(f"results in {out}; TensorBoard: tensorboard --logdir {out / 'tensorboard'}")
    return 0



def _alarms(detector: ErrorDetector) -> list[int]:
    """The stream rows at which ``detector`` alarmed."""
    return list(detector.alerts)


def _plots(out: Path, result: RunResult, steps: pd.DataFrame, known: list[int],
           detectors: list[ErrorDetector], args: argparse.Namespace, n_total: int) -> None:
    """``metric.png`` (every predictor's score, smoothed over :data:`SMOOTH_STEPS` steps,
    with the known drifts and every detector's alarms), ``detections.png`` and, for several
    predictors, ``spider.png``."""
    matplotlib.use("Agg")
    metric = "accuracy" if "accuracy" in steps else "mse"
    series = {}
    for name, frame in steps.groupby("predictor", sort=False):
        per_step = frame.groupby("step")[metric].mean()  # k-fold: mean of the testers
        series[str(name)] = per_step.to_numpy()
    fig = plot_metric_over_time(series, known_drifts=known,
                                detected_drifts={d.name: _alarms(d) for d in detectors},
                                smooth=SMOOTH_STEPS, n_pretrain=args.n_pretrain,
                                batch_size=args.batch_size, y_label=f"{metric} per step",
                                path=out / "metric.png")
    plt.close(fig)
    if detectors:
        fig = plot_detections({d.name: _alarms(d) for d in detectors},
                              known_drifts=known, n_total=n_total, path=out / "detections.png")
        plt.close(fig)
    summary = result.summary()
    if len(summary.index) > 1:
        cols = [c for c in summary.columns if c.split("_window")[0] in METRICS
                and not c.endswith("_std")]
        invert = [not METRICS[c.split("_window")[0]].bigger_is_better for c in cols]
        values = summary[cols].to_numpy(dtype=float)
        if cols and len(cols) >= 3 and bool(np.isfinite(values).all()):
            fig = plot_spider(values, cols, [str(p) for p in summary.index], invert=invert,
                              path=out / "spider.png")
            plt.close(fig)
