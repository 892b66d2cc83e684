"""Command line: ``torchstream run`` (the main job) and ``torchstream list``.

``torchstream run`` with no arguments trains the ``mlp`` model spec prequentially (batches of 4
rows) on a synthetic Agrawal stream with an abrupt concept drift in its middle, explains it with
iPFI, iSAGE and an iPDP of the first feature, logs metrics, importances and PDP pictures to
TensorBoard and prints a summary table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["build_parser", "main", "make_stream"]

DEFAULT_STREAM = "agrawal-drift"


def add_stream_args(p: argparse.ArgumentParser) -> None:
    """The options that choose a stream (shared by the commands)."""
    p.add_argument("--stream", default=DEFAULT_STREAM,
                   help="a synthetic stream name (see `torchstream list`), a CSV path, or "
                        "river:<Dataset> (default: %(default)s)")
    p.add_argument("--target", help="target column of a CSV stream (default: the last column)")
    p.add_argument("--drop", nargs="*", default=[], help="CSV columns to ignore")
    p.add_argument("--categorical", nargs="*", default=[], help="CSV columns to treat as categorical")
    p.add_argument("--task", choices=["classification", "regression"],
                   help="override the task inferred from the target")
    p.add_argument("--n-samples", type=int, default=10_000,
                   help="rows of a synthetic stream (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the stream and the models")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchstream", description="Explainable online learning on data streams."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="train a model prequentially on a stream and log to TensorBoard",
        description="Test-then-train a model on a stream; metrics go to TensorBoard.",
    )
    add_stream_args(run)
    run.add_argument("--model", default="mlp",
                     help="a model spec name in models/ or a TOML path (default: %(default)s)")
    run.add_argument("--lr", type=float, help="override the spec's learning rate")
    run.add_argument("--no-scale-inputs", action="store_true",
                     help="do not standardise inputs with running statistics")
    run.add_argument("--steps", type=int, help="number of batches (default: the whole stream)")
    run.add_argument("--batch-size", type=int, default=4,
                     help="rows per step (default: %(default)s; 1 is the per-row protocol)")
    run.add_argument("--window", type=int, default=1000,
                     help="rows in the windowed metrics (default: %(default)s)")
    run.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 or auto (default)")
    run.add_argument("--threads", type=int, default=1,
                     help="torch CPU threads (default: 1; online models are small and extra "
                          "threads only add synchronisation)")
    run.add_argument("--logdir", help="TensorBoard run directory (default: runs/<stream>-<model>-<time>)")
    run.add_argument("--log-every", type=int, default=10, help="log scalars every N batches")
    run.add_argument("--checkpoint", help="checkpoint file written every --checkpoint-every batches")
    run.add_argument("--checkpoint-every", type=int, help="batches between checkpoints")
    run.add_argument("--resume", help="resume from this checkpoint file")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.add_argument("--result-json", help="also write the final metrics and explanations here")
    run.add_argument("--explain", default="ipfi,isage,ipdp",
                     help="explainers run on the stream, comma-separated from ipfi, isage, ipdp, "
                          "or 'none' (default: %(default)s)")
    run.add_argument("--explain-alpha", type=float, default=0.001,
                     help="smoothing factor of the explainers (default: %(default)s)")
    run.add_argument("--pdp-feature", help="feature (encoded column) of the iPDP "
                                           "(default: the first column)")
    run.add_argument("--figure-every", type=int, default=1000,
                     help="batches between iPDP pictures in TensorBoard (default: %(default)s)")
    from torchstream.evaluate.command import add_parser as add_evaluate

    add_evaluate(sub, add_stream_args)
    from torchstream.sweep import add_parser as add_sweep

    add_sweep(sub)
    from torchstream.reproduce import add_parser as add_reproduce

    add_reproduce(sub)
    sub.add_parser("list", help="list the built-in streams, model specs and river models")
    return parser


def make_stream(args: argparse.Namespace) -> Any:
    """The stream named by ``--stream`` (synthetic name, CSV path or ``river:<Dataset>``)."""
    from torchstream import streams

    name: str = args.stream
    if name in streams.SYNTHETIC:
        return streams.make_synthetic(name, n_samples=args.n_samples, seed=args.seed)
    if name.startswith("river:"):
        from river import datasets

        cls = getattr(datasets, name.split(":", 1)[1], None)
        if cls is None:
            raise SystemExit(f"error: river has no dataset {name.split(':', 1)[1]!r}")
        return streams.from_river(cls(), task=args.task)
    path = Path(name)
    if path.suffix.lower() == ".csv" or path.exists():
        if not path.exists():
            raise SystemExit(f"error: CSV file not found: {path}")
        target = args.target
        if target is None:
            with path.open() as fh:
                target = fh.readline().strip().split(",")[-1]
        return streams.read_csv(path, target, drop=args.drop, categorical=args.categorical,
                                task=args.task)
    known = ", ".join(sorted(streams.SYNTHETIC))
    raise SystemExit(f"error: unknown stream {name!r}; use one of {known}, a CSV path or river:<Dataset>")


def _run(args: argparse.Namespace) -> int:
    import torch

    from torchstream.evaluate import Prequential
    from torchstream.learners import OnlineLearner
    from torchstream.models import load_spec
    from torchstream.sinks import TensorBoardSink

    for flag in ("batch_size", "log_every", "window", "n_samples", "threads", "figure_every"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise SystemExit(f"error: --{flag.replace('_', '-')} must be >= 1, got {value}")
    if args.steps is not None and args.steps < 1:
        raise SystemExit(f"error: --steps must be >= 1, got {args.steps}")
    if args.checkpoint_every and not args.checkpoint:
        raise SystemExit("error: --checkpoint-every needs --checkpoint PATH")
    try:
        spec = load_spec(args.model)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"error: {e}") from None
    try:
        stream = make_stream(args)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    if spec.type == "autoencoder":
        raise SystemExit("error: the autoencoder spec is unsupervised; `run` needs a predictor")
    overrides: dict[str, Any] = {"device": args.device, "seed": args.seed,
                                 "scale_inputs": not args.no_scale_inputs,
                                 "schema": stream.schema}
    if args.lr is not None:
        overrides["lr"] = args.lr
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    learner = OnlineLearner.from_spec(spec, task=stream.task, **overrides)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    logdir = args.logdir or str(Path("runs") / f"{stream.name}-{spec.name}-{stamp}")
    sink = TensorBoardSink(logdir)
    config = {"model_spec": {"name": spec.name, "source": str(spec.source), **spec.model},
              "seed": args.seed}
    try:
        plugins = make_explainers(args, stream)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    runner = Prequential(learner, stream, batch_size=args.batch_size, window=args.window,
                         sinks=[sink], log_every=args.log_every, plugins=plugins,
                         figure_every=args.figure_every,
                         progress=not args.no_progress and sys.stderr.isatty(), config=config)
    if args.resume:
        runner.resume(args.resume)
        print(f"resumed from {args.resume} at row {runner.position:,}")
    print(f"stream  {stream!r}")
    print(f"learner {learner!r} on {learner.device}")
    try:
        result = runner.run(args.steps, checkpoint_every=args.checkpoint_every,
                            checkpoint_path=args.checkpoint)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    finally:
        runner.close()
    if args.checkpoint and not args.checkpoint_every:
        result.checkpoint = runner.save(args.checkpoint)
    print(result.table())
    for p in plugins:
        print(_importance_line(p))
    if stream.drift_positions:
        print(f"known drifts at rows {list(stream.drift_positions)}")
    if result.checkpoint:
        print(f"checkpoint: {result.checkpoint}")
    print(f"TensorBoard logs: tensorboard --logdir {logdir}")
    if args.result_json:
        _write_result(Path(args.result_json), result, plugins, logdir)
    return 0


def _write_result(path: Path, result: Any, plugins: Sequence[Any], logdir: str) -> None:
    """The run's summary as JSON: rows, seconds, metrics, every explainer's current values."""
    import json
    import math

    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    explained: dict[str, Any] = {}
    for p in plugins:
        values = p.as_dict()
        if "grid" in values and "pd" in values:
            values = {"importance": float(p.importance())}
        explained[getattr(p, "name", type(p).__name__)] = {
            str(k): clean(float(v)) for k, v in values.items()}
    payload = {"n_rows": result.n_rows, "n_steps": result.n_steps, "seconds": result.seconds,
               "metrics": {k: clean(v) for k, v in result.metrics.items()},
               "explanations": explained, "logdir": logdir}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1))
    tmp.replace(path)


EXPLAINERS = ("ipfi", "isage", "ipdp")


def make_explainers(args: argparse.Namespace, stream: Any) -> list[Any]:
    """The explainer plug-ins named by ``--explain`` (they explain the learner itself)."""
    names = [n.strip() for n in args.explain.split(",") if n.strip()]
    if names == ["none"]:
        return []
    unknown = [n for n in names if n not in EXPLAINERS]
    if unknown:
        raise ValueError(f"unknown explainers {unknown}; choose from {', '.join(EXPLAINERS)}")
    from torchstream.explain.ipdp import IncrementalPDP
    from torchstream.explain.ipfi import IncrementalPFI
    from torchstream.explain.isage import IncrementalSAGE

    columns = list(stream.schema.columns)
    loss = "cross_entropy" if stream.task == "classification" else "mse"
    common = {"alpha": args.explain_alpha, "feature_names": columns, "seed": args.seed}
    out: list[Any] = []
    for name in names:
        if name == "ipfi":
            out.append(IncrementalPFI(None, loss, len(columns), **common))
        elif name == "isage":
            out.append(IncrementalSAGE(None, loss, len(columns), empty_prediction="imputed",
                                       **common))
        else:
            feature = args.pdp_feature or columns[0]
            if feature not in columns:
                raise ValueError(f"--pdp-feature {feature!r} is not a column; columns: {columns}")
            out.append(IncrementalPDP(None, columns.index(feature), alpha=args.explain_alpha,
                                      feature_name=feature, seed=args.seed))
    return out


def _importance_line(plugin: Any) -> str:
    name = getattr(plugin, "name", type(plugin).__name__)
    values = plugin.as_dict()
    if not isinstance(values, dict) or not values:
        return f"{name}: (no estimate yet)"
    if "grid" in values and "pd" in values:
        return f"{name}: importance {plugin.importance():.4f}"
    top = sorted(values.items(), key=lambda kv: -abs(kv[1]))[:5]
    return f"{name}: " + ", ".join(f"{k}={v:.4f}" for k, v in top)


def _list() -> int:
    from torchstream.learners.registry import RIVER_MODELS
    from torchstream.models import available_specs
    from torchstream.streams import SYNTHETIC

    print("streams:", ", ".join(sorted(SYNTHETIC)), "| a CSV path | river:<Dataset>")
    print("models: ", ", ".join(available_specs()))
    print("river models (evaluate):", ", ".join(RIVER_MODELS))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return _run(args)
    if args.command == "evaluate":
        from torchstream.evaluate.command import evaluate

        return evaluate(args, make_stream)
    if args.command == "sweep":
        from torchstream.sweep import sweep_command

        return sweep_command(args)
    if args.command == "reproduce":
        from torchstream.reproduce import reproduce_command

        return reproduce_command(args)
    return _list()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
