"""What reading a CSV file decided, stated: every column's kind and role, the task and its
classes, what was left out and why, and how missing values are imputed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["IMPUTATION", "CSVInference", "ColumnReport"]

Role = Literal["feature", "target", "left out", "dropped"]

IMPUTATION = (
    "a numeric feature with missing values gets a '<name>:missing' indicator column (1 where "
    "missing) and, where missing, the mean of its values in the earlier rows of the stream (0.0 "
    "before its first value); later rows are never used. A categorical feature with missing "
    "values gets a '<missing>' category. A row encoded on its own with the schema (outside the "
    "stream's tensor) gets the feature's fill_value, 0.0."
)


@dataclass(frozen=True)
class ColumnReport:
    """One column of the file: its kind, its role, the encoded columns made from it and the
    rule that decided (``note``)."""

    name: str
    kind: str
    role: Role
    declared: bool
    n_missing: int
    encoded: tuple[str, ...]
    note: str


@dataclass(frozen=True)
class CSVInference:
    """How a CSV file was read; :meth:`describe` says it in words, :meth:`to_dict` as JSON."""

    source: str
    n_rows: int
    encoding: str
    bom: bool
    delimiter: str
    missing_tokens: tuple[str, ...]
    target: str
    task: str
    task_rule: str
    classes: tuple[Any, ...] | None
    class_counts: tuple[int, ...] | None
    columns: tuple[ColumnReport, ...]
    imputation: str = IMPUTATION

    @property
    def features(self) -> list[ColumnReport]:
        return [c for c in self.columns if c.role == "feature"]

    @property
    def left_out(self) -> list[ColumnReport]:
        """Columns that are not features and not the target (dropped or left out)."""
        return [c for c in self.columns if c.role in ("left out", "dropped")]

    @property
    def n_encoded(self) -> int:
        return sum(len(c.encoded) for c in self.columns)

    def describe(self) -> str:
        """The decisions in words, one line per column."""
        bom = ", BOM removed" if self.bom else ""
        tokens = ", ".join(repr(t) for t in self.missing_tokens)
        lines = [
            f"{self.source}: {self.n_rows:,} rows, {len(self.columns)} columns "
            f"({self.encoding}{bom}, delimiter {self.delimiter!r}, missing values: {tokens})",
            f"target {self.target!r}: {self.task} ({self.task_rule})",
        ]
        if self.classes is not None and self.class_counts is not None:
            shown = [f"{c!r} {k:,}" for c, k in zip(self.classes, self.class_counts)]
            more = f", ... ({len(shown) - 20} more)" if len(shown) > 20 else ""
            lines.append(f"classes ({len(shown)}): {', '.join(shown[:20])}{more}")
        width = max(len(c.name) for c in self.columns)
        for c in self.columns:
            if c.role == "target":
                continue
            text = f"  {c.name:<{width}}  {c.kind:<11}  {c.role:<8}  {c.note}"
            if c.role == "feature" and c.encoded != (c.name,):
                text += f" -> {_columns(c.encoded)}"
            lines.append(text)
        n_feat = len(self.features)
        lines.append(f"{n_feat} feature column{'s' * (n_feat != 1)} -> {self.n_encoded} encoded "
                     f"columns (categorical: one-hot); {len(self.left_out)} left out")
        lines.append(f"missing values: {self.imputation}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        """The decisions as plain data (JSON-able)."""
        out = asdict(self)
        out["missing_tokens"] = list(self.missing_tokens)
        out["classes"] = None if self.classes is None else list(self.classes)
        out["class_counts"] = None if self.class_counts is None else list(self.class_counts)
        out["columns"] = [{**asdict(c), "encoded": list(c.encoded)} for c in self.columns]
        out["n_encoded"] = self.n_encoded
        return out


def _columns(names: tuple[str, ...]) -> str:
    if len(names) <= 4:
        return ", ".join(names)
    return f"{', '.join(names[:3])}, ... ({len(names)} columns)"
