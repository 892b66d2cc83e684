"""Command line: ``torchstream run`` (the main job) and ``torchstream list``.

``torchstream run`` with no arguments trains the ``mlp`` model spec prequentially (batches of 4
rows) on a synthetic Agrawal stream with an abrupt concept drift in its middle, explains it with
iPFI, iSAGE and an iPDP of the first feature, logs metrics, importances and PDP pictures to
TensorBoard and prints a summary table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torchstream.cli_checks import check_device, check_output_path

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
    p.add_argument("--numeric", nargs="*", default=[],
                   help="CSV columns to treat as numeric (every value must be a number)")
    p.add_argument("--missing", nargs="*", default=[],
                   help="CSV values that mean 'missing', besides '', ?, NA, N/A, NaN, nan, null, "
                        "None")
    p.add_argument("--dates", choices=["parts", "drop"], default="parts",
                   help="CSV date columns: numeric parts (year, month, day, weekday, hour, "
                        "minute) or left out (default: %(default)s)")
    p.add_argument("--encoding", default="utf-8",
                   help="text encoding of a CSV file (default: %(default)s)")
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
    run.add_argument("--on-divergence", choices=["raise", "warn", "skip"], default="raise",
                     help="when training diverges (a non-finite or exploding loss, non-finite "
                          "parameters): stop with an error naming the row (default), warn and go "
                          "on, or undo the step and go on")
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
    run.add_argument("--resume", help="resume from this checkpoint file (a checkpoint of the "
                                      "same run: stream, model, seed, explainers)")
    run.add_argument("--trust-checkpoint", action="store_true",
                     help="load pickled parts (river models, detectors) of a --resume file that "
                          "was not written with this user's key; only for files you trust")
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
        try:
            return streams.from_river(cls(), task=args.task)
        except OSError as e:  # a remote data set that is not downloaded yet, while offline
            raise SystemExit(f"error: river dataset {name.split(':', 1)[1]} could not be read "
                             f"({' '.join(str(e).split())}); it may need a download, which "
                             "needs the network") from None
    path = Path(name)
    if path.suffix.lower() == ".csv" or path.exists():
        if not path.exists():
            raise SystemExit(f"error: CSV file not found: {path}")
        from torchstream.streams.csv_reader import MISSING_TOKENS, read_header

        encoding = getattr(args, "encoding", "utf-8")
        target = args.target
        if target is None:  # the last name of the parsed header (BOM removed, quotes honoured)
            target = read_header(path, encoding=encoding)[-1]
        return streams.read_csv(path, target, drop=args.drop, categorical=args.categorical,
                                numeric=getattr(args, "numeric", []),
                                missing=(*MISSING_TOKENS, *getattr(args, "missing", [])),
                                dates=getattr(args, "dates", "parts"), encoding=encoding,
                                task=args.task)
    known = ", ".join(sorted(streams.SYNTHETIC))
    raise SystemExit(f"error: unknown stream {name!r}; use one of {known}, a CSV path or river:<Dataset>")


def _run(args: argparse.Namespace) -> int:
    import torch

    from torchstream.evaluate import Prequential
    from torchstream.evaluate.identity import file_identity
    from torchstream.learners import OnlineLearner
    from torchstream.models import load_spec
    from torchstream.sinks import TensorBoardSink

    _check_run_args(args)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        spec = load_spec(args.model)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"error: {e}") from None
    if spec.type == "autoencoder":
        raise SystemExit("error: the autoencoder spec is unsupervised; `run` needs a predictor")
    try:
        stream = make_stream(args)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    if Path(args.stream).is_file():
        stream.source = file_identity(args.stream)
    inference = getattr(stream, "inference", None)
    if inference is not None:  # every decision about the user's columns, before the run
        print(inference.describe())
    logdir = args.logdir or str(Path("runs") / f"{stream.name}-{spec.name}-{stamp}")
    check_output_path(logdir, "--logdir", directory=True)
    overrides: dict[str, Any] = {"device": args.device, "seed": args.seed,
                                 "scale_inputs": not args.no_scale_inputs,
                                 "schema": stream.schema, "on_divergence": args.on_divergence}
    if args.lr is not None:
        overrides["lr"] = args.lr
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    learner = OnlineLearner.from_spec(spec, task=stream.task, **overrides)
    try:
        plugins = make_explainers(args, stream)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    runner = Prequential(learner, stream, batch_size=args.batch_size, window=args.window,
                         log_every=args.log_every, plugins=plugins,
                         records_path=Path(logdir) / "steps.csv",
                         figure_every=args.figure_every,
                         progress=not args.no_progress and sys.stderr.isatty(),
                         config=_run_identity(args, spec))
    state = None
    if args.resume:  # checked before anything is written
        state = runner.read_checkpoint(args.resume, trusted=args.trust_checkpoint)
    runner.sinks.append(TensorBoardSink(logdir))
    if inference is not None:
        _write_json(Path(logdir) / "schema.json", inference.to_dict())
    if state is not None:
        runner.load_state_dict(state)
        print(f"resumed from {args.resume} at row {runner.position:,}")
    print(f"stream  {stream!r}")
    print(f"learner {learner!r} on {learner.device}")
    finished = stream.n_samples is not None and runner.position >= stream.n_samples
    try:
        if finished:
            print(f"the run had already reached the end of the stream ({runner.position:,} "
                  "rows); nothing left to do")
        result = runner.run(args.steps if not finished else 0,
                            checkpoint_every=args.checkpoint_every,
                            checkpoint_path=args.checkpoint)
    finally:
        runner.close()
    if args.checkpoint:  # the final state, also when periodic checkpoints were written
        result.checkpoint = runner.save(args.checkpoint)
    print(result.table())
    if learner.divergences:  # on_divergence="warn" / "skip" went on: say how often
        counts = ", ".join(f"{k} {v:,}" for k, v in sorted(learner.divergences.items()))
        print(f"divergent steps ({args.on_divergence}): {counts}")
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


def _check_run_args(args: argparse.Namespace) -> None:
    """Every option of ``run`` checked before a row is read or a file written."""
    for flag in ("batch_size", "log_every", "window", "n_samples", "threads", "figure_every",
                 "steps", "checkpoint_every"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise SystemExit(f"error: --{flag.replace('_', '-')} must be >= 1, got {value}")
    if args.checkpoint_every and not args.checkpoint:
        raise SystemExit("error: --checkpoint-every needs --checkpoint PATH")
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        raise SystemExit(f"error: --lr must be a finite number > 0, got {args.lr}")
    if not 0 < args.explain_alpha <= 1:
        raise SystemExit(f"error: --explain-alpha must be in (0, 1], got {args.explain_alpha}")
    check_device(args.device)
    for flag in ("checkpoint", "result_json"):
        path = getattr(args, flag)
        if path:
            check_output_path(path, f"--{flag.replace('_', '-')}")
    if args.resume and not Path(args.resume).is_file():
        what = "is a directory" if Path(args.resume).is_dir() else "does not exist"
        raise SystemExit(f"error: --resume {args.resume} {what}")


def _run_identity(args: argparse.Namespace, spec: Any) -> dict[str, Any]:
    """The options that define a run's results (logged as hparams, checked on --resume)."""
    return {"model_spec": {"name": spec.name, "source": str(spec.source), **spec.model,
                           "learner": dict(spec.learner)},
            "seed": args.seed, "lr": args.lr, "scale_inputs": not args.no_scale_inputs,
            "window": args.window, "explain": args.explain,
            "explain_alpha": args.explain_alpha, "pdp_feature": args.pdp_feature,
            "stream_options": {"stream": args.stream, "target": args.target,
                               "drop": list(args.drop), "categorical": list(args.categorical),
                               "numeric": list(args.numeric), "missing": list(args.missing),
                               "dates": args.dates, "encoding": args.encoding,
                               "task": args.task, "n_samples": args.n_samples}}


def _write_result(path: Path, result: Any, plugins: Sequence[Any], logdir: str) -> None:
    """The run's summary as JSON: rows, seconds, metrics, every explainer's current values."""
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
    _write_json(path, payload)


def _write_json(path: Path, payload: Mapping[str, Any]) -> None:
    """Write ``payload`` as JSON atomically (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
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


class CommandError(SystemExit):
    """A usage or data error: its one-line message went to stderr; the exit status is 2."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; errors are one line on stderr and exit status 2 (argparse's convention),
    never a traceback (set ``TORCHSTREAM_DEBUG=1`` to see one)."""
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except CommandError:
        raise
    except SystemExit as e:
        if not isinstance(e.code, str):
            raise
        message = e.code
    except (ValueError, OSError) as e:  # bad data, divergence, checkpoints, files
        if os.environ.get("TORCHSTREAM_DEBUG"):
            raise
        text = " ".join(str(e).split()) or type(e).__name__
        message = f"error: {text}"
    print(message, file=sys.stderr)
    raise CommandError(message) from None


def _dispatch(args: argparse.Namespace) -> int:
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
