"""One number of a reproduction next to the paper's, and a markdown table of them."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Comparison", "table"]


@dataclass(frozen=True)
class Comparison:
    """One number of a reproduction: ours, the paper's, and the accepted difference.

    ``tolerance`` is an absolute bound on ``|ours - paper|`` in quick mode (None: reported
    only, e.g. a number whose setting differs from the paper's); ``why`` justifies it.
    """

    measure: str
    ours: float
    paper: float
    tolerance: float | None = None
    why: str = ""

    @property
    def within(self) -> bool | None:
        if self.tolerance is None:
            return None
        return bool(math.isfinite(self.ours) and abs(self.ours - self.paper) <= self.tolerance)


def table(rows: list[Comparison]) -> str:
    """A markdown table of the comparisons."""
    lines = ["| measure | torchstream | paper | tolerance | within |", "|---|---|---|---|---|"]
    for r in rows:
        tol = "—" if r.tolerance is None else f"±{r.tolerance:g}"
        ok = {True: "yes", False: "**no**", None: "—"}[r.within]
        lines.append(f"| {r.measure} | {r.ours:.4f} | {r.paper:.4f} | {tol} | {ok} |")
    notes = [f"- {r.measure}: {r.why}" for r in rows if r.why]
    return "\n".join(lines + ([""] + notes if notes else []))
