"""Plumbing shared by the loss-based incremental explainers (iPFI, iSAGE).

What lives here: argument checks, feature names, the storage / generator set-up, the value
checks of every batch (finite ``X`` and ``y``, class labels in the model's range; one fused pass,
:mod:`torchstream.explain._checks`), batched (and optionally chunked) model calls under
``torch.no_grad()`` with a check of every output and a one-time check that it fits the loss, the
exponential smoothing of the per-row contributions, the plug-in glue for
:class:`~torchstream.evaluate.Prequential` and ``state_dict`` / ``load_state_dict``.

A batch that fails a check raises ``ValueError`` naming the batch row (and column) and leaves the
explainer as it was: the checks of the inputs run before anything changes, and the random
generators the model call draws from are restored when a check of its output fails.

A subclass implements ``_contributions(X, y, model_fn) -> Tensor [B, d]`` (the per-row
contributions of a batch, computed against the storage as it was before the batch) and may add
state through ``_extra_state`` / ``_load_extra_state``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import torch

from torchstream.base import ExplainerBase, PluginBase
from torchstream.checkpoint import check_settings
from torchstream.explain._checks import (
    FINITE,
    BatchScan,
    Scanner,
    first_nonfinite,
    make_scanner,
    read_scalars,
    scan_labels,
)
from torchstream.explain.groups import FeatureGroups, check_feature_groups
from torchstream.explain.smoothing import ExponentialSmoother, check_alpha
from torchstream.explain.storage import GeometricReservoir, UniformReservoir
from torchstream.explain.storage._common import _Reservoir
from torchstream.losses import BROADCAST_LOSSES, LOSSES, BroadcastLossFn, LossFn, get_loss
from torchstream.schema import feature_names_for
from torchstream.typing import BatchView, ModelFn, Storage

__all__ = ["LossExplainer", "ema_prefix", "make_storage"]

#: Named losses that read the model output as class probabilities.
_PROBA_LOSSES = {"cross_entropy", "log_loss"}
#: Named losses that read a 2-D output as class scores and need class-index labels.
_CLASS_LOSSES = {"cross_entropy", "log_loss", "zero_one"}
#: Named losses that compare a 2-D output with one-hot labels (and a 1-D one with values).
_REGRESSION_LOSSES = {"mse", "squared", "absolute", "mae"}


def check_positive_int(value: Any, argument: str) -> int:
    """``value`` as an ``int >= 1``, else ``ValueError`` naming ``argument``."""
    try:
        out = operator.index(value)
    except TypeError:
        raise ValueError(f"{argument} must be a positive integer, got {value!r}") from None
    if isinstance(value, bool) or out < 1:
        raise ValueError(f"{argument} must be a positive integer, got {value!r}")
    return out


def make_storage(storage: str | Storage, size: int, n_features: int, seed: int) -> Storage:
    """A storage from its name (``"geometric"``: :class:`GeometricReservoir`, ``"uniform"``:
    :class:`UniformReservoir`, each of ``size`` rows, seeded with ``seed``) or the given object,
    which needs ``sample(n) -> Tensor [n, d]`` and ``update(X)``."""
    if isinstance(storage, str):
        if storage == "geometric":
            return GeometricReservoir(size, n_features, seed=seed)
        if storage == "uniform":
            return UniformReservoir(size, n_features, seed=seed)
        raise ValueError(
            f"storage must be 'geometric', 'uniform' or a storage object, got {storage!r}"
        )
    has = [callable(getattr(storage, method, None)) for method in ("sample", "update")]
    if not all(has):
        raise TypeError(
            f"storage must be 'geometric', 'uniform' or an object with sample(n) and update(X), "
            f"got {type(storage).__name__}"
        )
    return storage


_EMA_WEIGHTS: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor]] = {}


def _ema_weights(
    n: int, alpha: float, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``w [n, n]`` (``w[i, j] = alpha (1 - alpha)^(i - j)`` for ``j <= i``) and the decay
    ``(1 - alpha)^(i + 1)`` as ``[n, 1]``; cached per ``(n, alpha, dtype, device)``."""
    key = (n, alpha, dtype, device)
    hit = _EMA_WEIGHTS.get(key)
    if hit is None:
        i = torch.arange(n, device=device)
        age = (i.view(-1, 1) - i.view(1, -1)).to(dtype)
        keep = age >= 0
        w = torch.where(keep, alpha * (1.0 - alpha) ** age.clamp_min(0), torch.zeros_like(age))
        decay = ((1.0 - alpha) ** (i + 1).to(dtype)).view(-1, 1)
        if len(_EMA_WEIGHTS) >= 16:
            _EMA_WEIGHTS.clear()
        hit = _EMA_WEIGHTS[key] = (w, decay)
    return hit


def ema_prefix(
    values: torch.Tensor, prev: torch.Tensor, alpha: float, block: int = 128
) -> torch.Tensor:
    """The EMA ``v_b = (1 - alpha) v_{b-1} + alpha u_b`` after each of the rows ``u_b`` of
    ``values [B, *k]``, starting from ``v_{-1} = prev [*k]``; in closed form per block of rows
    (a ``[block, block]`` lower-triangular weight matrix, cached), so no Python loop over
    rows."""
    b = values.shape[0]
    if b == 1:  # one row: a single interpolation
        return torch.lerp(prev.to(values.dtype), values[0], alpha).unsqueeze(0)
    flat = values.reshape(b, -1)
    state = prev.reshape(1, -1).to(flat.dtype)
    out = []
    for start in range(0, b, block):
        v = flat[start : start + block]
        w, decay = _ema_weights(v.shape[0], alpha, v.dtype, v.device)
        chunk = w @ v + decay * state
        out.append(chunk)
        state = chunk[-1:]
    return (out[0] if len(out) == 1 else torch.cat(out)).reshape(values.shape)


def _deferred_read(device: torch.device) -> bool:
    """Whether a batch's value check is read later, with the model outputs' check (on an
    accelerator: one host-device synchronisation per batch instead of two)."""
    return device.type != "cpu"


def _acc_dtype(device: torch.device) -> torch.dtype:
    """float64 for the loss arithmetic, except where the device has none (MPS)."""
    return torch.float32 if device.type == "mps" else torch.float64


def _describe(t: torch.Tensor) -> str:
    return f"shape {list(t.shape)}, dtype {t.dtype}"


class LossExplainer(ExplainerBase, PluginBase):
    """Base class of :class:`~torchstream.explain.ipfi.IncrementalPFI` and
    :class:`~torchstream.explain.isage.IncrementalSAGE`: a smoothed per-feature importance,
    updated from batches of rows. See the subclasses for the parameters."""

    #: Prefix of the plug-in's tags.
    name = "explainer"

    def __init__(
        self,
        model_fn: ModelFn | None,
        loss: str | LossFn,
        n_features: int,
        *,
        alpha: float,
        storage: str | Storage,
        storage_size: int,
        n_samples: int,
        feature_names: Sequence[str] | None,
        init: Literal["zero", "first"],
        chunk_size: int | None,
        seed: int | None,
        feature_groups: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        if model_fn is not None and not callable(model_fn):
            raise TypeError(f"model_fn must be callable or None, got {type(model_fn).__name__}")
        self.model_fn = model_fn
        if isinstance(loss, str):
            if loss not in LOSSES:
                raise ValueError(
                    f"loss: unknown loss {loss!r}; known: {sorted(LOSSES)} or a callable"
                )
            self.loss_name: str | None = loss
        elif callable(loss):
            self.loss_name = None
        else:
            raise TypeError(f"loss must be a loss name or a callable, got {loss!r}")
        self.loss_fn: LossFn = get_loss(loss)
        self.n_features = check_positive_int(n_features, "n_features")
        self.alpha = check_alpha(alpha, "alpha")
        self.n_samples = check_positive_int(n_samples, "n_samples")
        self.chunk_size = (
            None if chunk_size is None else check_positive_int(chunk_size, "chunk_size")
        )
        #: The names of the encoded columns (used in the messages about ``X``).
        self.column_names = feature_names_for(feature_names, self.n_features)
        #: The validated groups (None: every column is its own feature).
        self.groups: FeatureGroups | None = (
            None if feature_groups is None
            else check_feature_groups(feature_groups, self.n_features)
        )
        #: The names of the explained features: the group names with ``feature_groups``,
        #: else the column names.
        self.feature_names = (
            self.column_names if self.groups is None else list(self.groups.names)
        )
        #: Number of explained features (the width of :attr:`importance`).
        self.n_explained_features = (
            self.n_features if self.groups is None else self.groups.n_groups
        )
        if init not in ("zero", "first"):
            raise ValueError(f"init must be 'zero' or 'first', got {init!r}")
        self.seed = seed
        self.generator = torch.Generator()
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(int(seed))
        storage_seed = int(torch.randint(0, 2**62, (1,), generator=self.generator))
        if isinstance(storage, str):
            storage_size = check_positive_int(storage_size, "storage_size")
        # a Storage; observational iSAGE replaces it by its conditional sampler, and the
        # reservoir fast paths reach past the protocol (sample_indices, _data)
        self.storage: Any = make_storage(storage, storage_size, self.n_features, storage_seed)
        self.smoother = ExponentialSmoother(self.alpha, self.n_explained_features, init=init)
        self.n_batches = 0  # explain() calls so far (the step named in error messages)
        self._checked = False
        #: Whether the storage was built here (then it follows X's device and dtype).
        self._own_storage = isinstance(storage, str)
        self._batch_sig: tuple[Any, ...] | None = None  # last (X, y) signature that passed
        #: Width of the last model output (0 for ``[n]``; None before the first model call):
        #: picks what the next batch's scan gathers about ``y``. Not state: results ignore it.
        self._out_width: int | None = None
        self._scan: BatchScan | None = None  # the current batch's scan (for the output checks)
        #: On an accelerator: the batch scan's queued reductions, read with the outputs' check.
        self._pending: tuple[list[torch.Tensor], Callable[[list[float]], BatchScan],
                             torch.Tensor, torch.Tensor] | None = None
        self._scanner: Scanner | None = None  # the fused check for the current batch layout
        self._placed: tuple[Any, ...] | None = None  # (device, dtype) the state was moved to
        named = self.loss_name
        self._broadcast_loss: BroadcastLossFn | None = (
            None if named is None else BROADCAST_LOSSES[named]
        )

    # ------------------------------------------------------------------ results
    @property
    def importance(self) -> torch.Tensor:
        """The debiased importance ``[d]`` (``[G]`` with ``feature_groups``;
        raw / (1 - (1 - alpha)^n); zeros before the first explained row)."""
        return self.smoother.debiased.clone()

    @property
    def importance_raw(self) -> torch.Tensor:
        """The zero-initialised EMA ``[d]`` the papers' theorems are about (biased towards 0 for
        the first ~1/alpha rows)."""
        return self.smoother.raw.clone()

    def half_width(self, delta: float = 0.05) -> torch.Tensor:
        """Chebyshev half-width ``[d]`` at level ``1 - delta`` around the debiased importance,
        from the EMA of squared deviations of the per-row contributions and the variance
        ``sigma^2 alpha / (2 - alpha)`` of an EMA of iid contributions."""
        return self.smoother.half_width(delta)

    @property
    def n_explained(self) -> int:
        """Number of rows explained so far (rows of a batch that met an empty storage are only
        stored, not explained)."""
        return self.smoother.n

    def as_dict(self) -> dict[str, float]:
        """``{feature name: debiased importance}``."""
        return dict(zip(self.feature_names, self.importance.tolist()))

    # ------------------------------------------------------------------ explaining
    def explain(self, X: torch.Tensor, y: torch.Tensor) -> None:
        """Explain the batch ``X [B, d]``, ``y [B]`` with the current model (the debiased
        estimate is then :attr:`importance`); the rows are added to the storage afterwards.

        Every batch is checked: ``X`` and ``y`` finite and, for a class loss (or an ``[n, k]``
        output scored by a regression loss), labels that are integers in ``0..k-1`` of the
        model's ``k`` outputs (``0`` or ``1`` for an ``[n]`` probability output); the model's
        outputs finite. A failed check raises ``ValueError`` naming the batch row (and column,
        or the label and what was expected) and leaves the explainer unchanged. The first batch
        meets an empty storage and is only stored; for a class loss the model's output for its
        first row is computed all the same, to check its labels."""
        if self.model_fn is None:
            raise ValueError(
                f"{type(self).__name__} was built with model_fn=None: pass model_fn= to use "
                f"explain(), or use it as a plug-in (it then explains batch.learner)"
            )
        self._explain(X, y, self.model_fn)

    def _explain(self, X: torch.Tensor, y: torch.Tensor, model_fn: ModelFn) -> None:
        if self._compiled_batch(X, y, model_fn):
            return
        X, y = self._check_batch(X, y)
        self._check_values(X, y)
        self._place(X)
        if self._storage_size() > 0:
            saved = [(g, g.get_state()) for g in self._generators()]
            try:
                contributions = self._contributions(X, y, model_fn)
                if self._pending is not None:  # no model call read the batch's scan
                    self._resolve_pending([])
            except BaseException:
                for g, state in saved:  # the failed batch leaves no trace
                    g.set_state(state)
                raise
            self.smoother.update(contributions)
        else:
            if self._pending is not None:
                self._resolve_pending([])
            self._check_first_labels(X, y, model_fn)
        self.n_batches += 1
        storage = self.storage
        if isinstance(storage, _Reservoir):
            storage._update_finite(X)  # X was checked above
        else:
            storage.update(X)

    def _compiled_batch(self, X: torch.Tensor, y: torch.Tensor, model_fn: ModelFn) -> bool:
        """Explain the batch through a compiled step (``compile=True``); False: run it
        eagerly (nothing has changed then). No compiled step here."""
        return False

    def _generators(self) -> list[torch.Generator]:
        """The generators :meth:`_contributions` draws from (restored if the batch fails)."""
        g = getattr(self.storage, "generator", None)
        return [g] if isinstance(g, torch.Generator) else []

    def _contributions(self, X: torch.Tensor, y: torch.Tensor, model_fn: ModelFn) -> torch.Tensor:
        raise NotImplementedError

    def _check_batch(self, X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(X, torch.Tensor) or not isinstance(y, torch.Tensor):
            raise TypeError(
                f"X and y must be tensors, got {type(X).__name__} and {type(y).__name__}"
            )
        sig = (X.shape, X.dtype, X.device, y.shape, y.dtype, y.device)
        if sig == self._batch_sig:  # shapes validated once per layout (values: every batch)
            return X, y
        self._scanner = None
        if X.dim() != 2 or X.shape[1] != self.n_features:
            raise ValueError(
                f"X must have shape [B, n_features={self.n_features}], got {list(X.shape)}"
            )
        if X.shape[0] < 1:
            raise ValueError("X must hold at least one row")
        if y.dim() != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must have shape [B={X.shape[0]}], got {list(y.shape)}")
        if not X.is_floating_point():
            return X.to(torch.get_default_dtype()), y
        self._batch_sig = sig
        return X, y

    # ------------------------------------------------------------------ value checks
    def _labels_scanned(self) -> bool:
        """Whether ``y`` is scanned as class labels: always for a class loss; for a regression
        loss while the model output may be ``[n, k]`` (compared with one-hot labels)."""
        name = self.loss_name
        if name in _CLASS_LOSSES:
            return True
        return name in _REGRESSION_LOSSES and self._out_width != 0

    def _check_values(self, X: torch.Tensor, y: torch.Tensor) -> None:
        """Every batch, before anything changes: ``X`` finite, ``y`` finite and, for a class
        loss, integer labels ``>= 0`` (their upper bound is checked against the model's output
        in :meth:`_check_output`). One fused pass and one host read (:func:`make_scanner`); the
        offending row is only looked for when the pass fails."""
        scanner = self._scanner
        if scanner is None:
            scanner = self._scanner = make_scanner(X, y, self._labels_scanned())
        parts = scanner.parts(X, y)
        if not _deferred_read(X.device):
            self._pending = None
            self._apply_scan(scanner.interpret(read_scalars(parts)), X, y)
        else:  # read with the outputs' check: one host read per batch (_check_output)
            self._pending = (parts, scanner.interpret, X, y)

    def _resolve_pending(self, extra: list[torch.Tensor]) -> list[float]:
        """Read the deferred batch scan together with ``extra`` scalars (one host read), apply
        the scan (raising for a bad batch) and return the values of ``extra``."""
        assert self._pending is not None
        parts, interpret, X, y = self._pending
        self._pending = None
        values = read_scalars([*parts, *(e.to(parts[0].device) for e in extra)])
        self._apply_scan(interpret(values[: len(parts)]), X, y)
        return values[len(parts):]

    def _apply_scan(self, scan: BatchScan, X: torch.Tensor, y: torch.Tensor) -> None:
        """Raise for what the batch's scan found (naming the row); keep it for the label
        checks against the model's outputs."""
        self._scan = scan
        if scan is FINITE:
            return
        if not scan.values_finite:
            self._raise_nonfinite(X, y if scan.x_finite is None else None)
        if scan.y_min is None:
            return
        y_ok = math.isfinite(scan.y_min) and math.isfinite(scan.y_max)  # type: ignore[arg-type]
        if not y_ok or scan.y_frac != 0.0:
            self._raise_nonfinite(None, y)
        if self.loss_name in _CLASS_LOSSES and (scan.y_frac != 0.0 or scan.y_min < 0):
            self._raise_label(y, None, "integer class labels >= 0 (indices of the model's classes)")

    def _raise_nonfinite(self, X: torch.Tensor | None, y: torch.Tensor | None) -> None:
        """Raise ``ValueError`` for the first NaN / inf of ``X``, then of ``y``; return if there
        is none (the fused sum overflowed on finite values)."""
        step = self.n_batches
        if X is not None:
            hit = first_nonfinite(X)
            if hit is not None:
                (row, col), value = hit
                raise ValueError(
                    f"X has NaN or inf values at step {step}: batch row {row}, column {col} "
                    f"({self.column_names[col]!r}) is {value}; every value must be finite"
                )
        if y is not None:
            hit = first_nonfinite(y)
            if hit is not None:
                (row,), value = hit
                raise ValueError(
                    f"y has NaN or inf values at step {step}: batch row {row} is {value}; "
                    f"loss {self._loss_label()!r} needs finite targets"
                )

    def _raise_label(self, y: torch.Tensor, k: int | None, expected: str) -> None:
        """Raise ``ValueError`` naming the first label of ``y`` that is not an integer in
        ``[0, k)`` (``k`` None: no upper bound); return if there is none."""
        yv = y.to(torch.float64)
        bad = (yv != yv.round()) | (yv < 0)
        if k is not None:
            bad |= yv >= k
        rows = bad.nonzero()
        if rows.shape[0] == 0:
            return
        row = int(rows[0])
        value = y[row].item()
        raise ValueError(
            f"y has an invalid label at step {self.n_batches}: batch row {row} is {value!r}; "
            f"loss {self._loss_label()!r} needs {expected}"
            + (f" ({int(rows.shape[0])} of {y.shape[0]} rows)" if rows.shape[0] > 1 else "")
        )

    def _check_first_labels(self, X: torch.Tensor, y: torch.Tensor, model_fn: ModelFn) -> None:
        """The batch that meets an empty storage calls no model for its importances; for a
        class loss its labels are checked against the model's outputs all the same (the
        output of the batch's first row gives the number of classes ``k``)."""
        if self.loss_name in _CLASS_LOSSES:
            self._check_labels(self._forward(model_fn, X[:1]), y)

    def _loss_label(self) -> str:
        return self.loss_name or str(getattr(self.loss_fn, "__name__", "callable"))

    def _check_labels(self, out: torch.Tensor, y: torch.Tensor) -> None:
        """Labels against the output ``[n, k]`` of this batch's model call: integers in
        ``0..k-1`` for a class loss or an ``[n, k]`` output of a regression loss (one-hot
        labels), ``0`` or ``1`` for a class loss on an ``[n]`` output (probability of class 1).
        Uses the extremes from the batch's scan; no further host read unless the output changed
        from ``[n]`` to ``[n, k]``."""
        name = self.loss_name
        classes = out.dim() == 2
        width = out.shape[1] if classes else 0
        if width != self._out_width:  # what the next batches' scans gather may change
            self._out_width, self._scanner = width, None
        if not (name in _CLASS_LOSSES or (classes and name in _REGRESSION_LOSSES)):
            return
        scan = self._scan
        if scan is None or scan.y_min is None:  # scanned as values: the output became [n, k]
            y_min, y_max, y_frac = scan_labels(y)
        else:
            y_min, y_max, y_frac = scan.y_min, scan.y_max, scan.y_frac  # type: ignore[assignment]
        k = out.shape[1] if classes else 2
        if y_frac != 0.0 or y_min < 0 or y_max >= k:
            shape = f"[n, {k}]" if classes else "[n] (probability of class 1)"
            expected = (
                f"class labels in 0..{k - 1} for a model output of shape {shape}" if classes
                else f"labels 0 or 1 for a model output of shape {shape}"
            )
            self._raise_label(y, k, expected)

    def _place(self, X: torch.Tensor) -> None:
        """Keep the state where the batches are: the smoother on ``X``'s device, a storage
        built here on ``X``'s device and dtype (widened, never narrowed, once it holds rows, so
        stored values stay exact)."""
        where = (X.device, X.dtype)
        if where == self._placed:
            return
        if self.smoother.device != X.device:
            self.smoother.to(X.device)
        storage = self.storage
        if self._own_storage and callable(getattr(storage, "to", None)):
            dtype = X.dtype if len(storage) == 0 else torch.promote_types(storage.dtype, X.dtype)
            if storage.device != X.device or storage.dtype != dtype:
                storage.to(X.device, dtype)
        self._placed = where

    def _storage_size(self) -> int:
        size = getattr(self.storage, "__len__", None)
        return 1 if size is None else len(self.storage)

    def _sample_rows(self, n: int, like: torch.Tensor) -> torch.Tensor:
        """``n`` rows from the storage, on ``like``'s device and dtype."""
        rows = self.storage.sample(n)
        if rows.shape != (n, self.n_features):
            raise ValueError(
                f"storage.sample({n}) returned {list(rows.shape)}, "
                f"expected [{n}, {self.n_features}]"
            )
        return rows.to(device=like.device, dtype=like.dtype)

    # ------------------------------------------------------------------ model calls
    def _evaluate(self, model_fn: ModelFn, Z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``model_fn`` on all rows of ``Z`` (in chunks of ``chunk_size`` rows when set), under
        ``torch.no_grad()``, as a float64 tensor ``[n]`` or ``[n, k]``. The first ``len(y)`` rows
        of ``Z`` must be the batch itself: on the first call their outputs are checked against
        the loss."""
        out = self._forward(model_fn, Z)
        self._check_output(out, y)
        return out.to(_acc_dtype(out.device))

    def _forward(self, model_fn: ModelFn, Z: torch.Tensor) -> torch.Tensor:
        """The raw output ``[n]`` or ``[n, k]`` of ``model_fn`` on the rows of ``Z`` (in chunks
        of ``chunk_size`` rows when set), under ``torch.no_grad()``, shape-checked."""
        n = Z.shape[0]
        step = self.n_batches
        chunk = self.chunk_size
        grad = torch.is_grad_enabled()
        if grad:
            torch.set_grad_enabled(False)
        try:
            if chunk is None or chunk >= n:
                return self._check_shape(model_fn(Z), n, step)
            outs = []
            for start in range(0, n, chunk):
                part = Z[start : start + chunk]
                outs.append(self._check_shape(model_fn(part), part.shape[0], step))
        finally:
            if grad:
                torch.set_grad_enabled(True)
        if len({tuple(o.shape[1:]) for o in outs}) > 1:
            raise ValueError(
                f"model_fn returned outputs of different widths across chunks at step {step}: "
                f"{sorted({tuple(o.shape[1:]) for o in outs})}"
            )
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    def _check_output(self, out: torch.Tensor, y: torch.Tensor) -> None:
        """Every call: the outputs are finite (one reduction and one host read: a NaN or inf
        makes the sum non-finite; only then are the rows looked at) and the labels fit them
        (:meth:`_check_labels`); on the first call also that the outputs of the batch's own
        rows (the first ``len(y)`` rows) fit the loss. The rows of ``out`` are group-major:
        row ``r`` was built from batch row ``r mod B``."""
        extra = [out.sum()] if out.is_floating_point() else []
        if self._pending is not None:  # the batch's own scan, read with the outputs' sum
            totals = self._resolve_pending(extra)
        else:
            totals = [t.item() for t in extra]
        if totals and not math.isfinite(totals[0]):
            bad = (~torch.isfinite(out)).reshape(out.shape[0], -1).any(1)
            rows = bad.nonzero()
            if rows.shape[0]:
                step, n, b = self.n_batches, out.shape[0], y.shape[0]
                first = int(rows[0])
                kind = "NaN" if bool(torch.isnan(out[first]).any()) else "inf"
                raise ValueError(
                    f"model_fn returned {kind} at step {step} for {int(rows.shape[0])} of {n} "
                    f"evaluated rows (first: model input row {first}, built from batch row "
                    f"{first % b}), although the batch is finite: the model itself gives "
                    f"non-finite outputs"
                )
        self._check_labels(out, y)
        if not self._checked:
            self._check_loss_fit(out[: y.shape[0]].to(_acc_dtype(out.device)), y)
            self._checked = True

    @staticmethod
    def _check_shape(out: Any, n: int, step: int) -> torch.Tensor:
        if not isinstance(out, torch.Tensor):
            raise TypeError(
                f"model_fn must return a tensor [n] or [n, k], got {type(out).__name__} "
                f"at step {step}"
            )
        if out.dim() == 2 and out.shape[1] == 1:
            out = out.reshape(-1)
        if out.dim() not in (1, 2) or out.shape[0] != n:
            raise ValueError(
                f"model_fn returned {_describe(out)} for {n} rows at step {step}; expected [{n}] "
                f"(values, or the probability of class 1) or [{n}, k] (class probabilities)"
            )
        return out

    def _check_loss_fit(self, out: torch.Tensor, y: torch.Tensor) -> None:
        """Raise ``ValueError`` saying what was expected if ``out`` (the outputs of the batch's
        own rows) cannot be scored against ``y`` by the loss (the labels are checked every batch
        by :meth:`_check_labels`)."""
        name = self.loss_name
        if name in _PROBA_LOSSES:
            lo, hi = float(out.min()), float(out.max())
            sums_ok = out.dim() == 1 or bool(((out.sum(1) - 1).abs() < 1e-3).all())
            if lo < -1e-6 or hi > 1 + 1e-6 or not sums_ok:
                raise ValueError(
                    f"loss {name!r} needs class probabilities from model_fn: [n, k] with rows "
                    f"summing to 1, or [n] (the probability of class 1); got {_describe(out)} "
                    f"with values in [{lo:.4g}, {hi:.4g}]"
                )
        try:
            value = self.loss_fn(out, y)
        except Exception as exc:  # a callable loss that cannot take this output
            raise ValueError(
                f"loss {name or getattr(self.loss_fn, '__name__', 'callable')!r} failed on the "
                f"model output ({_describe(out)}) and y ({_describe(y)}): {exc}"
            ) from exc
        if not isinstance(value, torch.Tensor) or value.shape != (y.shape[0],):
            shape = list(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValueError(
                f"the loss must return one value per row, shape [{y.shape[0]}], got {shape} for a "
                f"model output of {_describe(out)}"
            )

    def _loss(self, out: torch.Tensor, y: torch.Tensor, repeats: int) -> torch.Tensor:
        """Per-row losses of ``out [B * repeats, ...]`` (row-major in the batch) against ``y``,
        as ``[B, repeats]``."""
        b = y.shape[0]
        return self._group_loss(out.reshape(b, repeats, *out.shape[1:]), y.view(b, 1), out.dtype)

    def _group_loss(
        self, out: torch.Tensor, y: torch.Tensor, dtype: torch.dtype, lead: int = 2
    ) -> torch.Tensor:
        """Losses ``[*L]`` of the outputs ``out [*L]`` or ``[*L, k]`` (``L`` its first ``lead``
        dimensions) against labels ``y`` that broadcast against ``L`` (a named loss never
        repeats them), in ``dtype``."""
        shape = out.shape[:lead]
        classes = out.dim() > lead
        if self._broadcast_loss is not None:
            return self._broadcast_loss(out, y, classes, dtype)
        flat = out.to(dtype).reshape(-1, *out.shape[lead:])
        yy = y.expand(shape).reshape(-1)
        return self.loss_fn(flat, yy).to(dtype).reshape(shape)

    # ------------------------------------------------------------------ plug-in
    def on_batch(self, batch: BatchView) -> None:
        """Plug-in hook: explain ``batch.X``, ``batch.y`` with ``model_fn`` (or, if that is
        None, with ``batch.learner``); the runner records the importance by feature
        (:meth:`step_importance`)."""
        model_fn = self.model_fn if self.model_fn is not None else batch.learner
        self._explain(batch.X, batch.y, model_fn)

    def step_importance(self) -> dict[str, float]:
        """The importance by feature once a row has been explained (the first batch only
        fills the storage), else empty: what a step record holds of this explainer."""
        return self.as_dict() if self.n_explained else {}

    def _extra_state(self) -> dict[str, object]:
        return {}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        pass

    def state_dict(self) -> dict[str, object]:
        """Everything needed to resume bit-exactly: smoother, storage, generator, counters."""
        storage_state = getattr(self.storage, "state_dict", None)
        return {
            "class": type(self).__name__,
            "n_features": self.n_features,
            "smoother": self.smoother.state_dict(),
            "storage": storage_state() if callable(storage_state) else None,
            "generator": self.generator.get_state(),
            "n_batches": self.n_batches,
            "checked": self._checked,
            **self._extra_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        check_settings(state, {"class": type(self).__name__, "n_features": self.n_features},
                       type(self).__name__)
        self.smoother.load_state_dict(state["smoother"])
        if state["storage"] is not None:
            self.storage.load_state_dict(state["storage"])
        self.generator.set_state(state["generator"])
        self.n_batches = int(state["n_batches"])
        self._checked = bool(state["checked"])
        self._load_extra_state(state)

    def __repr__(self) -> str:
        loss = self.loss_name or getattr(self.loss_fn, "__name__", "callable")
        return (
            f"{type(self).__name__}(n_features={self.n_features}, loss={loss!r}, "
            f"alpha={self.alpha}, n_samples={self.n_samples}, n_explained={self.n_explained})"
        )
