"""``torchstream run``: train one model prequentially on a stream, explain it, and log to
TensorBoard.

With no options it trains the ``mlp`` model spec (batches of 4 rows) on a synthetic Agrawal
stream with an abrupt concept drift in its middle, explains it with iPFI, iSAGE and an iPDP of
the first feature, logs metrics, importances and PDP pictures to TensorBoard and prints a summary
table.

iPFI and iSAGE explain the user's features: a one-hot encoded categorical feature, or a numeric
feature with its missing-value indicator, is permuted / removed as one block and gets one
importance under its own name (the schema's ``feature_groups()``); ``--explain-columns`` keeps
one importance per encoded column. The iPDP explains one encoded column.

``--detect`` adds drift detectors (river's on the 0/1 errors, ERICS, a detector on the iPDP's
score: :mod:`~torchstream.cli.detectors`); ``--report`` a drift report at every alarm and known
drift (:class:`~torchstream.report.reporter.DriftReporter`; the files and TensorBoard entries:
:mod:`~torchstream.cli.report`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack, nullcontext
from pathlib import Path
from typing import Any

import torch

from torchstream.checkpoint import check_key
from torchstream.cli import learners  # noqa: F401 (registers the learner "dmt")
from torchstream.cli.checks import check_device, check_output_path
from torchstream.cli.errors import CommandInterrupted
from torchstream.cli.heartbeat import Heartbeat
from torchstream.cli.interrupt import StopRequest, stopped_line
from torchstream.cli.monitoring import make_monitors
from torchstream.cli.names import EXPLAIN_LOSSES, EXPLAINERS
from torchstream.cli.outputs import check_outputs, run_outputs
from torchstream.cli.report import REPORT_MD, ReportWriter
from torchstream.cli.run_workers import run_workers, wants_workers
from torchstream.cli.stream_options import make_stream
from torchstream.compiling import CompileSwitch
from torchstream.evaluate import Prequential
from torchstream.evaluate.identity import file_identity
from torchstream.evaluate.result import RunResult
from torchstream.explain.interaction import IncrementalInteraction
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.files import PathLock, atomic_write, path_kind
from torchstream.learners.registry import BuiltLearner, LearnerOptions, make_learner
from torchstream.learners.threads import use_threads
from torchstream.sinks import TensorBoardSink
from torchstream.streams.base import Stream
from torchstream.viz.figures import plugin_figures
from torchstream.viz.importance import explanation_figures

__all__ = ["explanation_groups", "grouping_line", "learner_options", "make_explainers",
           "run_command", "tensorboard_sink"]

Explainer = IncrementalPFI | IncrementalSAGE | IncrementalPDP | IncrementalInteraction


def learner_options(args: argparse.Namespace) -> LearnerOptions:
    """The learner settings of ``run``'s options (``None``: the option was not given)."""
    return LearnerOptions(seed=args.seed, device=args.device, lr=args.lr,
                          scale_inputs=False if args.no_scale_inputs else None,
                          on_divergence=args.on_divergence, compile=args.compile)


def run_command(args: argparse.Namespace, *,
                make_runner: Callable[..., Prequential] | None = None) -> int:
    """Run ``torchstream run``: the run directory and the checkpoint are held (locked) by this
    process until it ends; SIGINT / SIGTERM end the run after the step in progress, write the
    checkpoint if one was asked for and say in one line how to resume (exit 130 / 143).
    ``--workers N`` hands the run to N processes (:mod:`torchstream.cli.run_workers`), each of
    which runs this function with its own ``make_runner`` (the runner's class by default)."""
    with ExitStack() as held:
        return _run(args, held, make_runner)


def _run(args: argparse.Namespace, held: ExitStack,
         make_runner: Callable[..., Prequential] | None = None) -> int:
    _check_run_args(args)
    if make_runner is None and wants_workers(args):  # one stream, several processes
        return run_workers(args)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        stream = make_stream(args)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    if Path(args.stream).is_file():
        stream.source = file_identity(args.stream)
    inference = getattr(stream, "inference", None)
    if inference is not None:  # every decision about the user's columns, before the run
        print(inference.describe())
    use_threads(args.threads)
    torch.manual_seed(args.seed)
    try:
        built = make_learner(args.model, stream, learner_options(args))
        explainers = make_explainers(args, stream)
        grouping = None
        if any(not isinstance(p, IncrementalPDP) for p in explainers):
            grouping = grouping_line(stream, explain_columns=args.explain_columns)
        writer = ReportWriter(args.logdir or default_logdir(stream, built.name, stamp))
        monitors = make_monitors(args, stream, explainers, on_report=writer)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    if grouping is not None:
        print(grouping)
    for line in monitors.lines:
        print(line)
    plugins = monitors.plugins
    learner = built.learner
    logdir = str(writer.run_dir)
    check_output_path(logdir, "--logdir", directory=True)
    if not args.logdir:
        check_outputs(run_outputs(None, None, logdir), _run_inputs(args), overwrite=args.overwrite)
    runner = (make_runner or Prequential)(
        learner, stream, batch_size=args.batch_size, window=args.window,
        log_every=args.log_every, plugins=plugins, records_path=Path(logdir) / "steps.csv",
        figure_every=args.figure_every, figures=plugin_figures,
        progress=not args.no_progress and sys.stderr.isatty(), config=_run_identity(args, built))
    state = None
    if args.resume:  # checked before anything is written
        state = runner.read_checkpoint(args.resume, trusted=args.trust_checkpoint)
    for path, what, directory in ((args.checkpoint, f"--checkpoint {args.checkpoint}", False),
                                  (logdir, f"--logdir {logdir}", True)):
        if path:  # one writer per run directory and checkpoint; the lock names its holder
            lock = held.enter_context(PathLock(path, what, directory=directory))
            if lock.stale_note:
                print(lock.stale_note)
    sink = tensorboard_sink(logdir, built.name, explainers, figure_every=args.figure_every)
    runner.add_sink(sink)
    writer.attach(sink)
    if inference is not None:
        _write_json(Path(logdir) / "schema.json", inference.to_dict())
    if state is not None:
        runner.load_state_dict(state)
        print(f"resumed from {args.resume} at row {runner.position:,}")
    print(f"stream  {stream!r}")
    device = getattr(learner, "device", None)
    print(f"learner {learner!r}" + (f" on {device}" if device is not None else ""))
    finished = stream.n_samples is not None and runner.position >= stream.n_samples
    stop = held.enter_context(StopRequest())  # SIGINT / SIGTERM: stop between two steps
    try:
        if finished:
            print(f"the run had already reached the end of the stream ({runner.position:,} "
                  "rows); nothing left to do")
        if args.compile and not finished:
            print("compiling: the first batch of each shape compiles the learner's and the "
                  "explainers' steps (about a minute cold, seconds from torch's disk cache); a "
                  "line every 15 s while the run goes on", flush=True)
        with Heartbeat("torchstream run --compile") if args.compile else nullcontext():
            result = runner.run(args.steps if not finished else 0,
                                checkpoint_every=args.checkpoint_every,
                                checkpoint_path=args.checkpoint, should_stop=stop)
        if monitors.reporter is not None:  # the runner finished it at the stream's end
            writer.write(monitors.reporter.reports)
    finally:
        runner.close()
    if args.checkpoint:  # the final state, also when periodic checkpoints were written
        result.checkpoint = runner.save(args.checkpoint)
    if stop.signum is not None:  # no summary and no --result-json: the run is not complete
        raise CommandInterrupted(stop.signum, stopped_line(
            stop.signum, runner.position, stream.n_samples, result.checkpoint,
            finished=not result.stopped))
    print(result.table())
    divergences = getattr(learner, "divergences", None)
    if divergences:  # on_divergence="warn" / "skip" went on: say how often
        counts = ", ".join(f"{k} {v:,}" for k, v in sorted(divergences.items()))
        print(f"divergent steps ({getattr(learner, 'on_divergence', args.on_divergence)}): "
              f"{counts}")
    for p in explainers:
        print(_importance_line(p))
    if args.compile:
        for line in compile_lines(learner, explainers):
            print(line)
    if stream.drift_positions:
        passed = [r for r in stream.drift_positions if r < runner.position]
        later = [r for r in stream.drift_positions if r >= runner.position]
        print(f"known drifts at rows {passed}" + (
            f" (the stream's drifts at rows {later} lie beyond the run's {runner.position:,} "
            "rows)" if later else ""))
    for det in monitors.detectors:
        print(f"{_name(det)} alarms at rows {list(det.alerts)}")
    if monitors.reporter is not None:
        for r in monitors.reporter.reports:
            print(f"[{r['detector']}] {r['summary']}")
            for also in r["also"]:  # the alarms that joined this report, and why
                rows = (f"row {also['first']:,}" if also["first"] == also["last"] else
                        f"rows {also['first']:,}..{also['last']:,}")
                print(f"    also {also['detector']} at {rows}: {also['note']}")
        n = len(monitors.reporter.reports)
        print(f"drift report ({n} report{'s' if n != 1 else ''}, "
              f"{monitors.reporter.seconds:.2f} s): {Path(logdir) / REPORT_MD}")
    if result.checkpoint:
        print(f"checkpoint: {result.checkpoint}")
    print(f"TensorBoard logs: tensorboard --logdir {logdir}")
    if args.result_json:
        alarms = {_name(d): [int(r) for r in d.alerts] for d in monitors.detectors}
        _write_result(Path(args.result_json), result, explainers, logdir, alarms,
                      [r for r in stream.drift_positions if r < runner.position])
    return 0


def tensorboard_sink(logdir: str, model: str, plugins: Sequence[Explainer], *,
                     figure_every: int) -> TensorBoardSink:
    """The run's TensorBoard runs: the main one named after the model, ``<logdir>/<model>``;
    one per explained feature, ``<logdir>/feature/<feature>`` (its tags
    ``importance/<explainer>`` of each per-feature explainer, iPFI, iSAGE); the figure of the
    explanations over rows with the drifts and alarms every ``figure_every`` rows and at the
    end."""
    explainers = [_name(p) for p in plugins]
    run = model if model not in explainers else f"model_{model}"
    return TensorBoardSink(logdir, run=run, figures=explanation_figures,
                           figure_every=figure_every)


def default_logdir(stream: Stream, model: str, stamp: str) -> str:
    """``runs/<stream>-<model>-<time>``: a run's directory without ``--logdir``."""
    return str(Path("runs") / f"{stream.name}-{model}-{stamp}")


def _check_run_args(args: argparse.Namespace) -> None:
    """Every option of ``run`` checked before a row is read or a file written."""
    for flag in ("batch_size", "log_every", "window", "n_samples", "threads", "figure_every",
                 "steps", "checkpoint_every", "report_window"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise SystemExit(f"error: --{flag.replace('_', '-')} must be >= 1, got {value}")
    if args.checkpoint_every and not args.checkpoint:
        raise SystemExit("error: --checkpoint-every needs --checkpoint PATH")
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        raise SystemExit(f"error: --lr must be a finite number > 0, got {args.lr}")
    if not 0 < args.explain_alpha <= 1:
        raise SystemExit(f"error: --explain-alpha must be in (0, 1], got {args.explain_alpha}")
    if args.report_at and not args.report:
        raise SystemExit("error: --report-at needs --report")
    if any(r < 1 for r in args.report_at):
        raise SystemExit(f"error: --report-at rows must be >= 1, got {args.report_at}")
    if args.report_settle is not None and args.report_settle < 0:
        raise SystemExit(f"error: --report-settle must be >= 0, got {args.report_settle}")
    if not args.explain.strip(" ,"):
        raise SystemExit(f"error: --explain {args.explain!r} names no explainer; choose from "
                         f"{', '.join(EXPLAINERS)}, or 'none' to run without explainers")
    check_device(args.device)
    for flag in ("checkpoint", "result_json"):
        path = getattr(args, flag)
        if path:
            check_output_path(path, f"--{flag.replace('_', '-')}")
    if args.logdir:
        check_output_path(args.logdir, "--logdir", directory=True)
    if args.resume:
        kind = path_kind(args.resume)
        if kind != "a regular file":
            what = "does not exist" if kind == "missing" else f"is {kind}, not a checkpoint file"
            raise SystemExit(f"error: --resume {args.resume} {what}")
    check_outputs(run_outputs(args.checkpoint, args.result_json, args.logdir), _run_inputs(args),
                  overwrite=args.overwrite, may_replace={"--checkpoint": "--resume"})
    if args.checkpoint or args.resume:  # a key that cannot sign fails now, not after the work
        check_key()


def _run_inputs(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The files a run reads: the stream and model spec when they are paths, the checkpoint
    it resumes from."""
    return [(flag, Path(value)) for flag, value in (("--stream", args.stream),
                                                    ("--model", args.model),
                                                    ("--resume", args.resume))
            if value and Path(value).exists()]


def _run_identity(args: argparse.Namespace, built: BuiltLearner) -> dict[str, Any]:
    """The options that define a run's results (logged as hparams, checked on --resume); the
    model's identity comes from the learner factory (a spec's file and tables, or the name,
    kind and class of a registered learner)."""
    identity: dict[str, Any] = {
        "model_spec": dict(built.identity),
        "seed": args.seed, "lr": args.lr,
        # the learner's own setting: None for learners that never scale (river, dmt)
        "scale_inputs": getattr(built.learner, "scale_inputs", None),
        "window": args.window, "explain": args.explain,
        "explain_alpha": args.explain_alpha, "pdp_feature": args.pdp_feature,
        "explain_columns": args.explain_columns,
        "stream_options": {"stream": args.stream, "target": args.target,
                           "drop": list(args.drop), "categorical": list(args.categorical),
                           "numeric": list(args.numeric), "missing": list(args.missing),
                           "dates": args.dates, "encoding": args.encoding,
                           "task": args.task, "n_samples": args.n_samples}}
    if args.explain_loss is not None:  # only when chosen, as below
        identity["explain_loss"] = args.explain_loss
    # only when used: a checkpoint written without detectors or a report still resumes
    if args.detect != "none":
        identity["detect"] = args.detect
    if args.report:
        identity["report"] = {"window": args.report_window, "settle": args.report_settle,
                              "at": list(args.report_at)}
    return identity


def _write_result(path: Path, result: RunResult, plugins: Sequence[Explainer], logdir: str,
                  alarms: Mapping[str, list[int]], known_drifts: list[int]) -> None:
    """The run's summary as JSON: rows, seconds, metrics, every explainer's current values
    (an iPDP's: its importance score), each detector's alarm rows and the known drifts the
    run passed (rows numbered from 0, as printed and in TensorBoard)."""
    payload = {"n_rows": result.n_rows, "n_steps": result.n_steps, "seconds": result.seconds,
               "metrics": {k: _finite_or_none(v) for k, v in result.metrics.items()},
               "explanations": {_name(p): {k: _finite_or_none(float(v))
                                           for k, v in _values(p).items()} for p in plugins},
               "alarms": dict(alarms), "known_drifts": list(known_drifts),
               "logdir": logdir}
    for p in plugins:  # the pairs largest first, with their half-widths (delta = 0.05)
        if isinstance(p, IncrementalInteraction):
            payload["interactions"] = [
                {"features": [a, b], "value": _finite_or_none(v), "bound": _finite_or_none(e)}
                for a, b, v, e in p.ranked_pairs()]
    _write_json(path, payload)


def _finite_or_none(v: float) -> float | None:
    """JSON has no NaN or infinity: those become null."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _name(plugin: Explainer) -> str:
    return getattr(plugin, "name", type(plugin).__name__)


def _values(plugin: Explainer) -> dict[str, float]:
    """An explainer's numbers: ``{"importance": score}`` for an iPDP, ``{feature: importance}``
    for the others."""
    if isinstance(plugin, IncrementalPDP):
        return {"importance": plugin.score}
    if isinstance(plugin, IncrementalInteraction):  # {"(a, b)": SII} as in TensorBoard
        return {plugin.pair_label(a, b): v for (a, b), v in plugin.interaction_dict().items()}
    return {str(k): float(v) for k, v in plugin.as_dict().items()}


def _write_json(path: Path, payload: Mapping[str, Any]) -> None:
    """Write ``payload`` as JSON atomically (a uniquely named temporary file, then a rename)."""
    atomic_write(path, json.dumps(payload, indent=1).encode())





def explain_loss(name: str | None, task: str, *, report: bool) -> str:
    """The loss of iPFI and iSAGE: ``name``, checked against the task, or the default — for a
    classification ``cross_entropy``, and ``zero_one`` for a drift report (on stationary
    streams cross-entropy importances keep growing as the model grows confident: iPFI of the
    top feature x1.6-1.8 between rows 4,000 and 12,000 on Agrawal and SEA with nothing
    changed, zero-one x0.9-1.1; ``scripts/explain_loss_growth.py``); ``mse`` for a
    regression."""
    if name is None:
        return ("zero_one" if report else "cross_entropy") if task == "classification" \
            else "mse"
    if EXPLAIN_LOSSES[name] != task:
        raise ValueError(f"--explain-loss {name} is a loss of a {EXPLAIN_LOSSES[name]}; this "
                         f"stream is a {task}: use one of "
                         f"{sorted(k for k, v in EXPLAIN_LOSSES.items() if v == task)}")
    return name


def make_explainers(args: argparse.Namespace, stream: Stream) -> list[Explainer]:
    """The explainer plug-ins named by ``--explain`` (they explain the learner itself)."""
    names = [n.strip() for n in args.explain.split(",") if n.strip()]
    if names == ["none"]:
        return []
    unknown = [n for n in names if n not in EXPLAINERS]
    if unknown:
        raise ValueError(f"unknown explainers {unknown}; choose from {', '.join(EXPLAINERS)}")
    columns = list(stream.schema.columns)
    loss = explain_loss(args.explain_loss, stream.task, report=args.report)
    groups = None if args.explain_columns else explanation_groups(stream)
    common = {"alpha": args.explain_alpha, "feature_names": columns, "seed": args.seed,
              "feature_groups": groups}
    out: list[Explainer] = []
    for name in names:
        if name == "ipfi":
            out.append(IncrementalPFI(None, loss, len(columns), compile=args.compile, **common))
        elif name == "isage":
            out.append(IncrementalSAGE(None, loss, len(columns), empty_prediction="imputed",
                                       compile=args.compile, **common))
        elif name == "interactions":
            out.append(IncrementalInteraction(None, loss, len(columns), **common))
        elif groups is not None:  # a feature as a whole: one point per category, or "missing"
            feature = args.pdp_feature or next(iter(groups))
            if feature not in groups:
                raise ValueError(f"--pdp-feature {feature!r} is not a feature; features: "
                                 f"{list(groups)} (--explain-columns explains encoded columns)")
            out.append(IncrementalPDP(None, feature, feature_groups=groups,
                                      feature_names=columns, alpha=args.explain_alpha,
                                      seed=args.seed, compile=args.compile))
        else:
            feature = args.pdp_feature or columns[0]
            if feature not in columns:
                raise ValueError(f"--pdp-feature {feature!r} is not a column; columns: {columns}")
            out.append(IncrementalPDP(None, feature, feature_names=columns,
                                      alpha=args.explain_alpha, seed=args.seed,
                                      compile=args.compile))
    return out


def compile_lines(learner: object, explainers: Sequence[object]) -> list[str]:
    """What ran compiled under ``--compile``: one line for the learner and each explainer,
    ``compiled (S s compiling)`` or ``eager, <why>``."""
    out = []
    for name, obj in (("learner", learner), *((_name(p), p) for p in explainers)):
        if isinstance(obj, IncrementalInteraction):
            out.append(f"{name}: eager, interactions have no compiled step")
        elif not isinstance(obj, CompileSwitch):
            out.append(f"{name}: eager, a {type(obj).__name__} has no torch module to compile")
        elif obj.compile_off_reason:
            out.append(f"{name}: eager, {obj.compile_off_reason}")
        else:
            out.append(f"{name}: compiled ({obj.compile_seconds:.1f} s compiling)")
    return out


def explanation_groups(stream: Stream) -> dict[str, list[int]] | None:
    """The ``feature_groups`` of iPFI and iSAGE: the schema's ``{feature: encoded columns}``
    when a feature spans several columns (a one-hot block, a numeric feature with its
    missing-value indicator); None when every feature is one column (the same explanation)."""
    groups = stream.schema.feature_groups()
    return groups if any(len(cols) > 1 for cols in groups.values()) else None


def grouping_line(stream: Stream, *, explain_columns: bool, shown: int = 4) -> str | None:
    """The printed line that says what iPFI and iSAGE explain: the features, with the first
    ``shown`` features that span several columns and their column counts, or the encoded
    columns (``--explain-columns``); None when every feature is one column."""
    groups = stream.schema.feature_groups()
    wide = [(name, len(cols)) for name, cols in groups.items() if len(cols) > 1]
    if not wide:
        return None
    if explain_columns:
        return (f"explanations by encoded column (--explain-columns): {stream.schema.n_columns} "
                f"columns of {len(groups)} features")
    parts = [f"{name} = {n} columns" for name, n in wide[:shown]]
    if len(wide) > shown:
        parts.append(f"{len(wide) - shown} more features of several columns")
    return (f"explanations by feature ({len(groups)} features, {stream.schema.n_columns} encoded "
            f"columns; --explain-columns for one per column): " + ", ".join(parts))


def _importance_line(plugin: Explainer) -> str:
    """One line per explainer: an iPDP's importance score, the others' five largest
    importances."""
    name = _name(plugin)
    if isinstance(plugin, IncrementalPDP):
        return f"{name}: importance {plugin.score:.4f}"
    if isinstance(plugin, IncrementalInteraction):  # the five largest pairs, with bounds
        ranked = plugin.ranked_pairs()[:5]
        if not ranked:
            return f"{name}: (no pair explained yet)"
        return f"{name}: " + ", ".join(f"({a}, {b})={v:.4f} ±{e:.4f}" for a, b, v, e in ranked)
    values = _values(plugin)
    if not values:
        return f"{name}: (no estimate yet)"
    top = sorted(values.items(), key=lambda kv: -abs(kv[1]))[:5]
    return f"{name}: " + ", ".join(f"{k}={v:.4f}" for k, v in top)
