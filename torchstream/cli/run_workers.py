"""``torchstream run --workers N``: one stream learned and explained by N processes (on this
machine, or Ray actors with ``--ray-address``), with one model and one explanation
(:mod:`torchstream.distributed.data_parallel`).

This process starts the workers and waits for them; each worker runs ``torchstream run``
itself (:func:`torchstream.cli.run.run_command`) with the runner of a worker
(:mod:`torchstream.cli.run_rank`). Worker 0 prints, writes the run directory (TensorBoard,
``steps.csv``, the drift report), the checkpoint and ``--result-json``, exactly as a single
process does; the others write nothing. What is refused, and why, before a worker starts:

- a ``--resume`` checkpoint written by a run with another number of workers (each worker's
  explainers resume from their own state, and the model was trained on batches of that many
  workers' rows);
- ``--compile`` (a compiled explainer folds a batch into its average inside the compiled
  step, where the workers' contributions cannot be combined);
- ``--on-divergence skip`` (a step undone by one worker's rows alone would part the
  replicas);
- a CUDA ``--device``: the workers exchange through gloo on the CPU (``auto`` runs on the
  CPU, and says so).

The first SIGINT / SIGTERM is passed on to every worker, which all stop after the same step
(and write the checkpoint); a second stops at once. A worker that fails or dies stops the run
with an error naming it and the checkpoint to resume from.

With ``--ray-address`` the workers are Ray actors of that cluster (``local``: Ray started on
this machine), a CPU each: worker 0 on this process's node where it has a CPU free, the others
where Ray places them (the nodes are printed as the run starts). Worker 0 writes the run's
files on its node — a warning says so when that is not this one — and its printed lines come
back to this process at the end of the run. A stop signal then ends the actors at once
(the run resumes from its last checkpoint).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType

from torchstream.checkpoint import CheckpointError, load_checkpoint
from torchstream.cli.errors import CommandInterrupted, signal_name
from torchstream.cli.interrupt import StopRequest
from torchstream.distributed.processes import Named, WorkerFailed, launch
from torchstream.distributed.ray_workers import connected, launch_ray, ray_module

__all__ = ["Outcome", "checkpoint_workers", "run_workers", "wants_workers"]


@dataclass(frozen=True)
class Outcome:
    """How worker 0's ``torchstream run`` ended: its exit status, when a signal stopped it the
    signal and the line that says where the run stopped, and what it printed when asked to
    keep it (a Ray actor's output)."""

    code: int
    signum: int | None = None
    message: str | None = None
    printed: str = ""


def checkpoint_workers(path: str | None, *, trusted: bool = False) -> int | None:
    """The number of workers of the run that wrote the checkpoint ``path`` (1: one process);
    None without a path or when the file cannot be read (the run's own checks then say why)."""
    if not path:
        return None
    try:
        saved = load_checkpoint(path, trusted=trusted)
    except (CheckpointError, OSError):
        return None
    identity = saved.get("identity")
    config = identity.get("config") if isinstance(identity, Mapping) else None
    if not isinstance(config, Mapping):
        return None
    return int(config.get("workers", 1))


def wants_workers(args: argparse.Namespace) -> bool:
    """Whether ``run`` goes to the workers: ``--workers`` other than 1, or a ``--resume``
    checkpoint of a run with several workers (refused with the reason when they differ)."""
    if args.workers != 1 or args.ray_address:
        return True
    saved = checkpoint_workers(args.resume, trusted=args.trust_checkpoint)
    return saved is not None and saved != 1


def run_workers(args: argparse.Namespace) -> int:
    """Run ``torchstream run`` with ``args.workers`` processes (the options already checked);
    the exit status of worker 0's run."""
    n = args.workers
    if n < 1:
        raise SystemExit(f"error: --workers must be >= 1, got {n}")
    saved = checkpoint_workers(args.resume, trusted=args.trust_checkpoint)
    if saved is not None and saved != n:
        raise SystemExit(
            f"error: --resume {args.resume} was written by a run with --workers {saved} and "
            f"this run has --workers {n}: each worker's explainers resume from their own "
            f"state, and the model was trained on global batches of {saved} x --batch-size "
            f"rows; resume with --workers {saved}")
    if args.compile:
        raise SystemExit("error: --compile with --workers: a compiled explainer folds a batch "
                         "into its average inside the compiled step, where the workers' "
                         "contributions cannot be combined; run without --compile")
    if args.on_divergence == "skip":
        raise SystemExit("error: --on-divergence skip with --workers: a step undone by one "
                         "worker's rows alone would part the replicas; use raise or warn")
    if args.device not in ("auto", "cpu"):
        raise SystemExit(f"error: --device {args.device} with --workers: the workers exchange "
                         "gradients and contributions through gloo on the CPU; use --device "
                         "cpu (or one process on the GPU: --workers 1)")
    if args.ray_address:
        return _on_ray(args, Named("torchstream.cli.run_rank", "run_rank", (args, True)))
    target: Named[Outcome] = Named("torchstream.cli.run_rank", "run_rank", (args,))
    with StopRequest() as stop:
        try:
            outcome: Outcome = launch(target, n, returns=(Outcome,),
                                      signal_to_pass=lambda: stop.signum, pin=args.pin_workers,
                                      threads=args.threads)
        except WorkerFailed as e:
            if stop.signum is not None:  # a worker met the stop before it could agree on it
                raise CommandInterrupted(stop.signum, (
                    f"{_verb(stop.signum)} by {signal_name(stop.signum)} before the workers "
                    f"could stop at a step boundary ({e}); nothing more was written")) from None
            raise SystemExit(f"error: {e}{_resume_hint(args)}") from None
    if outcome.signum is not None:
        raise CommandInterrupted(outcome.signum, outcome.message or "")
    return outcome.code


def _on_ray(args: argparse.Namespace, target: Named[Outcome]) -> int:
    """The workers as Ray actors of the cluster at ``--ray-address`` (a CPU each)."""
    try:
        ray = ray_module()
        with connected(ray, args.ray_address):
            outcome = launch_ray(target, args.workers, ray=ray, returns=(Outcome,),
                                 on_start=partial(_placed, ray))
    except ValueError as e:  # Ray missing or not reached
        raise SystemExit(f"error: --ray-address: {e}") from None
    except WorkerFailed as e:
        raise SystemExit(f"error: {e}{_resume_hint(args)}") from None
    print(outcome.printed, end="")  # worker 0's lines (an actor's output is its own)
    if outcome.signum is not None:
        raise CommandInterrupted(outcome.signum, outcome.message or "")
    return outcome.code


def _placed(ray: ModuleType, nodes: list[str], here: str) -> None:
    """Say where the Ray workers run; worker 0 writes the run's files on its node."""
    addresses = {n["NodeID"]: n.get("NodeManagerAddress", "?") for n in ray.nodes()}
    where = ", ".join(f"{r}: node {n[:12]} at {addresses.get(n, '?')}"
                      f"{' (here)' if n == here else ''}" for r, n in enumerate(nodes))
    print(f"workers on Ray nodes: {where}", flush=True)
    if nodes[0] != here:
        print(f"warning: worker 0 runs on node {nodes[0][:12]} at "
              f"{addresses.get(nodes[0], '?')}, not this "
              "one (no CPU free here): it writes the run's files (--logdir, --checkpoint, "
              "--result-json) on that node's disk", file=sys.stderr, flush=True)


def _verb(signum: int) -> str:
    return "interrupted" if signum == signal.SIGINT else "terminated"


def _resume_hint(args: argparse.Namespace) -> str:
    """Where the run can go on from after a worker failed."""
    if not args.checkpoint:
        return "; no --checkpoint was asked for, so the run cannot be resumed"
    if not Path(args.checkpoint).is_file():
        return f"; no checkpoint had been written to {args.checkpoint} yet"
    return (f"; to go on from its last checkpoint, run the same command with --resume "
            f"{args.checkpoint}")
