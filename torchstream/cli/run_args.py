"""The options of ``torchstream run`` (argument definitions only: building this parser
imports none of torch, river or matplotlib; :mod:`torchstream.cli.run` runs the command)."""

from __future__ import annotations

import argparse

from torchstream.cli.names import DETECTORS, EXPLAIN_LOSSES
from torchstream.cli.stream_args import add_stream_args

__all__ = ["add_parser", "run_parser"]


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add ``torchstream run`` and its options to the sub-commands ``sub``."""
    run = sub.add_parser(
        "run",
        help="train a model prequentially on a stream and log to TensorBoard",
        description="Test-then-train a model on a stream; metrics go to TensorBoard.",
    )
    add_stream_args(run)
    run.add_argument("--model", default="mlp",
                     help="a model spec name, a TOML path, a river model or dmt "
                          "(see `torchstream list`; default: %(default)s)")
    run.add_argument("--lr", type=float,
                     help="override the learning rate (model specs, dmt)")
    run.add_argument("--on-divergence", choices=["raise", "warn", "skip"],
                     help="model specs: when training diverges (a non-finite or exploding loss, "
                          "non-finite parameters): stop with an error naming the row (default), "
                          "warn and go on, or undo the step and go on")
    run.add_argument("--no-scale-inputs", action="store_true",
                     help="model specs: do not standardise inputs with running statistics")
    run.add_argument("--steps", type=int, help="number of batches (default: the whole stream)")
    run.add_argument("--batch-size", type=int, default=4,
                     help="rows per step (default: %(default)s; 1 is the per-row protocol)")
    run.add_argument("--window", type=int, default=1000,
                     help="rows in the windowed metrics (default: %(default)s)")
    run.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 or auto (default)")
    run.add_argument("--workers", type=int, default=1,
                     help="processes on this machine that learn and explain the stream "
                          "together: each takes --batch-size rows of every global batch of "
                          "N x --batch-size rows; one model (the workers' gradients combined "
                          "every step), one iPFI / iSAGE explanation (their contributions "
                          "combined every step); on the CPU (default: %(default)s)")
    run.add_argument("--ray-address", metavar="ADDRESS",
                     help="with --workers N: the workers are Ray actors of the cluster at "
                          "ADDRESS, a CPU each (local: Ray started on this machine); worker 0, "
                          "which writes the run's files, runs on this node where it has a CPU "
                          "free (a warning says where otherwise)")
    run.add_argument("--pin-workers", action=argparse.BooleanOptionalAction, default=True,
                     help="with --workers N: worker r runs on the r-th --threads CPUs this "
                          "process may use, when there are N x threads of them (default: on; "
                          "measured 1.57x instead of 1.45x at N = 2 on 2 cores; "
                          "--no-pin-workers when other runs share those CPUs)")
    run.add_argument("--threads", type=int, default=1,
                     help="torch CPU threads (default: 1; online models are small and extra "
                          "threads only add synchronisation)")
    run.add_argument("--logdir",
                     help="TensorBoard directory of the run (default: runs/<stream>-<model>-"
                          "<time>); it holds the runs <model> (metrics, loss, alarms, figures) "
                          "and feature/<feature> (one per feature, a tag per explainer)")
    run.add_argument("--log-every", type=int, default=10, help="log scalars every N batches")
    run.add_argument("--checkpoint",
                     help="checkpoint file written every --checkpoint-every batches")
    run.add_argument("--checkpoint-every", type=int, help="batches between checkpoints")
    run.add_argument("--resume", help="resume from this checkpoint file (a checkpoint of the "
                                      "same run: stream, model, seed, explainers)")
    run.add_argument("--trust-checkpoint", action="store_true",
                     help="load pickled parts (river models, detectors) of a --resume file that "
                          "was not written with this user's key; only for files you trust")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.add_argument("--result-json", help="also write the final metrics and explanations here")
    run.add_argument("--overwrite", action="store_true",
                     help="replace existing files at the output paths (--checkpoint, "
                          "--result-json, the run directory's steps.csv, schema.json, report.*) "
                          "that are not torchstream outputs of that kind; an input of the run "
                          "is never replaced")
    run.add_argument("--explain", default="ipfi,isage,ipdp",
                     help="explainers run on the stream, comma-separated from ipfi, isage, ipdp, "
                          "interactions (pairwise SAGE interactions among the 5 features with "
                          "the largest SAGE values), or 'none' (default: %(default)s)")
    run.add_argument("--explain-alpha", type=float, default=0.001,
                     help="smoothing factor of the explainers (default: %(default)s)")
    run.add_argument("--explain-loss", choices=sorted(EXPLAIN_LOSSES),
                     help="the loss iPFI and iSAGE measure importance with (default: "
                          "cross_entropy, zero_one with --report: its importance does not grow "
                          "with the model's confidence alone; mse for a regression)")
    run.add_argument("--explain-columns", action="store_true",
                     help="iPFI and iSAGE explain every encoded column (one-hot columns, "
                          "missing-value indicators) instead of the features they encode "
                          "(default: one importance per feature, its columns permuted / removed "
                          "together)")
    run.add_argument("--compile", action="store_true",
                     help="run the explainers' batches (ipfi, isage, ipdp) and a torch "
                          "learner's step as torch.compile'd functions (a torch model; the "
                          "first compile takes seconds, torch caches it on disk; the eager path "
                          "runs, with a warning, where compiling is not possible; what ran "
                          "compiled is printed at the end)")
    run.add_argument("--pdp-feature", help="feature of the iPDP (default: the first); a "
                                           "categorical feature gets one point per category, a "
                                           "numeric one with missing cells a 'missing' point; "
                                           "with --explain-columns an encoded column")
    run.add_argument("--detect", default="none",
                     help="drift detectors, comma-separated: river's "
                          f"{', '.join(DETECTORS)} on the 0/1 errors, erics (a Probit head's "
                          "parameters, a partial test per feature; binary classification), "
                          "cdleeds (the model's outputs by neighbourhood; the regions that "
                          "changed) or pdp (ADWIN on the iPDP's importance score); alarms go to "
                          "TensorBoard (default: %(default)s)")
    run.add_argument("--report", action="store_true",
                     help="write a drift report at every alarm and known drift: report.md, "
                          "report.json and report/*.png in the run directory, and the text and "
                          "figures in TensorBoard at the alarm's row (needs ipfi, isage or "
                          "interactions; with interactions it also names the pairs that gained "
                          "or lost interaction)")
    run.add_argument("--report-at", type=int, nargs="+", default=[], metavar="ROW",
                     help="also report at these rows (changes you know of; a synthetic "
                          "stream's known drifts are reported anyway)")
    run.add_argument("--report-window", type=int,
                     help="rows compared on each side of an alarm (default: the explainers' "
                          "span 2 / --explain-alpha)")
    run.add_argument("--report-settle", type=int,
                     help="rows after an alarm left out before the after window (the model's "
                          "time to adapt; default: one --report-window)")
    run.add_argument("--figure-every", type=int, default=4000,
                     help="rows between the pictures in TensorBoard (importance over rows "
                          "with the drifts, iPDP) (default: %(default)s)")
    return run


def run_parser() -> argparse.ArgumentParser:
    """A ``torchstream`` parser that knows only the ``run`` command (a sweep checks and runs
    its jobs with it)."""
    parser = argparse.ArgumentParser(prog="torchstream")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser
