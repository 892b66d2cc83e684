"""Deprecated: this module moved to :mod:`torchstream.cli.reproduce`; import it from there."""

import warnings

from torchstream.cli.reproduce import (
    PACKAGE,
    Comparison,
    available,
    load,
    missing_data,
    report,
    reproduce_command,
    run,
    table,
)

__all__ = [
    "PACKAGE",
    "Comparison",
    "available",
    "load",
    "missing_data",
    "report",
    "reproduce_command",
    "run",
    "table",
]

warnings.warn(
    "torchstream.reproduce is deprecated; "
    "import from torchstream.cli.reproduce instead",
    DeprecationWarning,
    stacklevel=2,
)
