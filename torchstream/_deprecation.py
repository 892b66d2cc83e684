"""Renamed keyword arguments: the old name keeps working for one release, with a
``DeprecationWarning`` that names the new one."""

from __future__ import annotations

import warnings
from typing import TypeVar

__all__ = ["renamed"]

T = TypeVar("T")


def _given(value: object, default: object) -> bool:
    """Whether ``value`` differs from the parameter's ``default`` (identity first, so values
    whose ``==`` is not a plain bool, such as tensors, count as given unless they are it)."""
    if value is default:
        return False
    try:
        return not bool(value == default)
    except (TypeError, ValueError, RuntimeError):
        return True


def renamed(
    old_name: str, old_value: T | None, new_name: str, new_value: T, default: T, owner: str
) -> T:
    """The value to use for the keyword ``new_name`` whose former name is ``old_name``.

    ``old_value`` (``None``: not given) wins with a ``DeprecationWarning``; giving both the old
    keyword and a ``new_value`` other than ``default`` is a ``TypeError``.

    >>> renamed("alpha", None, "significance", 0.05, 0.01, "CDLEEDS")
    0.05
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     renamed("alpha", 0.05, "significance", 0.01, 0.01, "CDLEEDS")
    0.05
    >>> str(caught[0].message)
    'CDLEEDS: alpha is deprecated, use significance'
    """
    if old_value is None:
        return new_value
    if _given(new_value, default):
        raise TypeError(
            f"{owner}: got both {old_name}={old_value!r} and {new_name}={new_value!r}; "
            f"{old_name} is the deprecated name of {new_name}, pass only {new_name}"
        )
    warnings.warn(
        DeprecationWarning(f"{owner}: {old_name} is deprecated, use {new_name}"), stacklevel=3
    )
    return old_value
