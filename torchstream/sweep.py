"""Deprecated: this module moved to :mod:`torchstream.cli.sweep`; import it from there."""

import warnings

from torchstream.cli.sweep import (
    RunSpec,
    SweepConfig,
    check_runs,
    execute,
    load_sweep,
    run_sweep,
    sweep_command,
)

__all__ = [
    "RunSpec",
    "SweepConfig",
    "check_runs",
    "execute",
    "load_sweep",
    "run_sweep",
    "sweep_command",
]

warnings.warn(
    "torchstream.sweep is deprecated; "
    "import from torchstream.cli.sweep instead",
    DeprecationWarning,
    stacklevel=2,
)
