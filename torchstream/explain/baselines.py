"""Baselines for local feature attributions, in streaming form (Haug et al. 2021 [BL]_).

Attribution methods such as Integrated Gradients, DeepLift, KernelSHAP or Shapley value sampling
explain ``f(x)`` *relative to a baseline* ``b``: a locally accurate method satisfies
``sum_j phi_j = f(x) - f(b)``. The choice of ``b`` changes the attributions a lot, and no
baseline is best everywhere [BL]_. The baselines paper sorts them by two properties (for rows
``x_i``, ``x_j`` and the baselines ``b_x`` a method assigns):

* **static**: ``b_{x_i} = b_{x_j}`` for all rows, else **dynamic**;
* **deterministic**: two runs give the same baseline for the same row, else **stochastic**.

==========================  ========  =============  ===============================================
class                       static    deterministic  construction
==========================  ========  =============  ===============================================
:class:`ConstantBaseline`   yes       yes            a fixed vector (zeros by default)
:class:`MaxDistanceBaseline` no       yes            the corner of the observed box farthest from
                                                     ``x`` in l1: ``b_j = min_j`` if ``x_j >= mid_j``
                                                     else ``max_j``
:class:`BlurredBaseline`    no        no             a 1-D Gaussian blur of ``x`` along a random
                                                     permutation of the features
:class:`GaussianBaseline`   no        no             ``x + N(0, sigma^2)``, clipped to the observed
                                                     range of each feature
:class:`UniformBaseline`    no        no             ``U(min_j, max_j)`` per feature
:class:`ExpectationBaseline` yes      no             rows of a reservoir of past rows (a background
                                                     sample: attributions are averaged over them)
:class:`NeutralBaseline`    no        yes            the point where the segment from a reference
                                                     to ``x`` crosses the decision level
:class:`EWMABaseline`       yes       yes            the exponentially weighted mean of the past
                                                     rows (CDLEEDS' baseline input, [CD]_)
==========================  ========  =============  ===============================================

Streaming forms. The ranges of the max-distance, Gaussian and uniform baselines are the running
minimum and maximum of the rows seen (all of them, or the last ``window``); the expectation
baseline samples a reservoir of past rows; the EWMA baseline starts at the mean of its first batch
and then folds in row by row, ``b_t = beta x_t + (1 - beta) b_{t-1}``. Each baseline learns from
``update(X)`` only, so the user decides whether a row joins it before or after it is explained.

Documented choices (the paper's per-row definitions, not the reference code's variants, which
perturb *training rows* instead of ``x``): the blur acts on ``x`` itself (``scipy``'s
``gaussian_filter1d`` with mode ``"reflect"`` along a fresh random feature order per draw); the
neutral baseline is searched on the segment between a reference (default: the EWMA mean) and
``x`` (spec §6.2.7), which makes it dynamic; a row whose segment does not cross the level gets
the reference itself and is marked in :attr:`NeutralBaseline.last_fallback`.

Every baseline gives, through ``baseline(X)``, a tensor ``[B, d]`` that captum's ``baselines=``
accepts for the inputs ``X`` ``[B, d]``; ``baseline.sample(X, n)`` gives ``[n, B, d]`` (``n = 1``
for deterministic baselines), so that an explainer can average over the draws of a stochastic
baseline in one batched call (:class:`~torchstream.explain.local.LocalAttributor`).

References
----------
.. [BL] J. Haug, S. Zürn, P. El-Jiz, G. Kasneci (2021). On baselines for local feature
   attributions. AAAI-21 Workshop on Explainable Agency in Artificial Intelligence.
.. [CD] J. Haug, A. Braun, S. Zürn, G. Kasneci (2022). Change detection for local explainability
   in evolving data streams. CIKM 2022, 706-716.
"""

from __future__ import annotations

import math
import operator
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import torch
from scipy.ndimage import gaussian_filter1d

from torchstream.checkpoint import check_settings
from torchstream.devices import as_device
from torchstream.explain.smoothing import ExponentialSmoother
from torchstream.explain.storage import GeometricReservoir, UniformReservoir
from torchstream.typing import Storage

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "BASELINES",
    "Baseline",
    "BlurredBaseline",
    "ConstantBaseline",
    "EWMABaseline",
    "ExpectationBaseline",
    "GaussianBaseline",
    "MaxDistanceBaseline",
    "NeutralBaseline",
    "UniformBaseline",
    "make_baseline",
]

ScalarFn = Callable[[torch.Tensor], torch.Tensor]


def _seeded(seed: int | None) -> tuple[int, torch.Generator]:
    if seed is None:
        seed = secrets.randbits(63)
    try:
        if isinstance(seed, bool):
            raise TypeError
        seed = operator.index(seed)
        return seed, torch.Generator().manual_seed(seed)
    except (TypeError, RuntimeError, OverflowError):
        raise ValueError(f"seed must be None or an integer, got {seed!r}") from None


class BaselineOptions(TypedDict, total=False):
    """The keywords every baseline passes on to :class:`Baseline`."""

    seed: int | None
    dtype: torch.dtype
    device: torch.device | str | None


def _positive_int(value: Any, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{argument} must be an integer >= 1, got {value!r}")
    return value


def _positive_float(value: Any, argument: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{argument} must be a positive number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{argument} must be finite, got {value!r}")
    return float(value)


class Baseline:
    """Base class: feature count, dtype / device, generator, input checks and state.

    A subclass sets :attr:`static` and :attr:`stochastic`, implements ``_draw(X, n, model_fn)
    -> [n, B, d]`` and, if it learns from the stream, ``_update(X)`` and ``_extra_state`` /
    ``_load_extra_state``.

    Parameters
    ----------
    n_features
        ``d``; ``None``: taken from the first rows seen (then fixed).
    seed
        Seed of the baseline's CPU generator (``None``: drawn once from the operating system).
    dtype, device
        Of the stored state and of the baselines returned (default float64 on the CPU; the
        baselines are cast to the inputs' dtype and device when given).
    """

    static: bool = True
    stochastic: bool = False
    #: Whether :meth:`sample` needs the model (the neutral baseline).
    needs_model: bool = False

    def __init__(
        self,
        n_features: int | None = None,
        *,
        seed: int | None = 0,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        self.n_features = None if n_features is None else _positive_int(n_features, "n_features")
        self.seed, self.generator = _seeded(seed)
        self.dtype = dtype
        self.device = as_device(device)
        self.n_seen = 0

    # ------------------------------------------------------------------ checks
    def _rows(self, X: object, argument: str = "X") -> torch.Tensor:
        if not isinstance(X, torch.Tensor):
            X = torch.as_tensor(X)
        if X.dim() != 2:
            raise ValueError(f"{argument} must have shape [B, d], got {list(X.shape)}")
        if self.n_features is None:
            self.n_features = int(X.shape[1])
            self._on_width()
        if X.shape[1] != self.n_features:
            raise ValueError(
                f"{argument} has {X.shape[1]} features but the {type(self).__name__} has "
                f"n_features={self.n_features}"
            )
        X = X.detach().to(device=self.device, dtype=self.dtype)
        if not bool(torch.isfinite(X).all()):
            row = int((~torch.isfinite(X)).any(1).nonzero()[0])
            raise ValueError(f"{argument} row {row} has a non-finite value")
        return X

    def _on_width(self) -> None:
        """Hook: ``n_features`` has just been set from the data."""

    # ------------------------------------------------------------------ API
    def update(self, X: torch.Tensor) -> None:
        """Learn from the rows ``X`` ``[B, d]`` (in time order)."""
        X = self._rows(X)
        if X.shape[0]:
            self._update(X)
            self.n_seen += int(X.shape[0])

    def _update(self, X: torch.Tensor) -> None:
        pass

    def sample(
        self, X: torch.Tensor, n_samples: int = 1, model_fn: ScalarFn | None = None
    ) -> torch.Tensor:
        """Baselines ``[S, B, d]`` for the rows ``X`` ``[B, d]``: ``S = n_samples`` draws for a
        stochastic baseline, ``S = 1`` for a deterministic one. ``model_fn`` maps rows
        ``[n, d]`` to one output ``[n]`` (used by :class:`NeutralBaseline` only). The result
        has the dtype and device of ``X``."""
        n_samples = _positive_int(n_samples, "n_samples")
        rows = self._rows(X)
        if self.needs_model and model_fn is None:
            raise ValueError(f"{type(self).__name__} needs model_fn (the model's output [n])")
        out = self._draw(rows, n_samples if self.stochastic else 1, model_fn)
        return out.to(device=X.device, dtype=X.dtype if X.is_floating_point() else out.dtype)

    def __call__(self, X: torch.Tensor, model_fn: ScalarFn | None = None) -> torch.Tensor:
        """One baseline per row, ``[B, d]`` (one draw for a stochastic baseline): what captum's
        ``baselines=`` takes for the inputs ``X``."""
        return self.sample(X, 1, model_fn)[0]

    def _draw(self, X: torch.Tensor, n: int, model_fn: ScalarFn | None) -> torch.Tensor:
        raise NotImplementedError  # pragma: no cover

    # ------------------------------------------------------------------ state
    def _config(self) -> dict[str, object]:
        return {"kind": type(self).__name__}

    def _extra_state(self) -> dict[str, object]:
        return {}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        pass

    def state_dict(self) -> dict[str, object]:
        return {
            **self._config(),
            "n_features": self.n_features,
            "n_seen": self.n_seen,
            "seed": self.seed,
            "generator": self.generator.get_state(),
            **self._extra_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        check_settings(state, self._config(), "baseline")
        if state["n_features"] is not None and self.n_features is None:
            self.n_features = int(state["n_features"])
            self._on_width()
        self.n_seen = int(state["n_seen"])
        self.seed = int(state["seed"])
        self.generator.set_state(torch.as_tensor(state["generator"]).cpu().clone())
        self._load_extra_state(state)

    def __repr__(self) -> str:
        cfg = {k: v for k, v in self._config().items() if k != "kind"}
        args = ", ".join(f"{k}={v!r}" for k, v in cfg.items())
        return f"{type(self).__name__}({args})"


# ---------------------------------------------------------------------------------- static
class ConstantBaseline(Baseline):
    """A fixed vector (static, deterministic); zeros by default — on standardised inputs the
    training mean.

    >>> ConstantBaseline([1.0, 2.0])(torch.zeros(2, 2)).tolist()
    [[1.0, 2.0], [1.0, 2.0]]
    """

    static, stochastic = True, False

    def __init__(self, value: float | Sequence[float] | torch.Tensor = 0.0,
                 n_features: int | None = None,
                 **kwargs: Unpack[BaselineOptions]):
        value_t = torch.as_tensor(value, dtype=kwargs.get("dtype", torch.float64))
        if value_t.dim() > 1:
            raise ValueError(f"value must be a number or a vector [d], got {list(value_t.shape)}")
        if not bool(torch.isfinite(value_t).all()):
            raise ValueError("value must be finite")
        if value_t.dim() == 1:
            if n_features is not None and n_features != value_t.shape[0]:
                raise ValueError(
                    f"value has {value_t.shape[0]} entries but n_features={n_features}"
                )
            n_features = int(value_t.shape[0])
        super().__init__(n_features, **kwargs)
        self.value = value_t.to(self.device)

    def _draw(self, X: torch.Tensor, n: int, model_fn: ScalarFn | None) -> torch.Tensor:
        return self.value.expand(1, X.shape[0], X.shape[1]).clone()

    def _extra_state(self) -> dict[str, object]:
        return {"value": self.value.clone()}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        self.value = torch.as_tensor(state["value"]).to(self.device, self.dtype)


class EWMABaseline(Baseline):
    """The exponentially weighted mean of the past rows (static at a time step, deterministic;
    dynamic in *time*): CDLEEDS' baseline input ``b_t = beta x_t + (1 - beta) b_{t-1}``,
    ``b_0`` = the mean of the first batch [CD]_. Before any update there is no mean and
    asking for the baseline raises ``ValueError``.

    >>> b = EWMABaseline(beta=0.5)
    >>> b.update(torch.tensor([[0.0], [2.0]]))   # b_0 = mean = 1
    >>> b.update(torch.tensor([[3.0]]))          # 0.5 * 3 + 0.5 * 1
    >>> b.mean.tolist()
    [2.0]
    """

    static, stochastic = True, False

    def __init__(self, beta: float = 0.001, n_features: int | None = None,
                 **kwargs: Unpack[BaselineOptions]):
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 < beta <= 1:
            raise ValueError(f"beta must be in (0, 1], got {beta!r}")
        self.beta = float(beta)
        self._smoother: ExponentialSmoother | None = None
        super().__init__(n_features, **kwargs)
        if self.n_features is not None:
            self._on_width()

    def _on_width(self) -> None:
        assert self.n_features is not None
        self._smoother = ExponentialSmoother(
            self.beta, self.n_features, init="first", dtype=self.dtype, device=self.device
        )

    def _update(self, X: torch.Tensor) -> None:
        assert self._smoother is not None
        if self._smoother.n == 0:
            self._smoother.update(X.mean(0, keepdim=True))
        else:
            self._smoother.update(X)

    @property
    def mean(self) -> torch.Tensor:
        """The current weighted mean ``[d]``."""
        if self._smoother is None or self._smoother.n == 0:
            raise ValueError("EWMABaseline has seen no rows: call update(X) first")
        return self._smoother.raw

    def _draw(self, X: torch.Tensor, n: int, model_fn: ScalarFn | None) -> torch.Tensor:
        return self.mean.expand(1, X.shape[0], X.shape[1]).clone()

    def _config(self) -> dict[str, object]:
        return {**super()._config(), "beta": self.beta}

    def _extra_state(self) -> dict[str, object]:
        return {"smoother": None if self._smoother is None else self._smoother.state_dict()}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        if state["smoother"] is not None:
            assert self._smoother is not None
            self._smoother.load_state_dict(state["smoother"])


class ExpectationBaseline(Baseline):
    """A background sample of past rows (static, stochastic), the SHAP "expectation"
    baseline: the attributions of a row are averaged over ``n`` baseline rows drawn from a
    reservoir of the stream; every row of a batch gets the same draws.

    Parameters
    ----------
    size
        Rows kept by the reservoir (when ``storage`` is a name).
    storage
        ``"uniform"`` (a uniform sample of the whole stream), ``"geometric"`` (recent rows
        favoured; follows drift), or an object with ``update(X)``, ``sample(n)`` and
        ``__len__`` (e.g. a reservoir of :mod:`torchstream.explain.storage`).

    Before the first update the reservoir is empty and asking for a baseline raises
    ``ValueError``.

    >>> b = ExpectationBaseline(size=4, seed=0)
    >>> b.update(torch.arange(12.0).reshape(6, 2))
    >>> draws = b.sample(torch.zeros(3, 2), n_samples=2)
    >>> draws.shape, bool((draws[:, 0] == draws[:, 2]).all())
    (torch.Size([2, 3, 2]), True)
    """

    static, stochastic = True, True

    def __init__(
        self,
        size: int = 100,
        storage: str | Storage = "uniform",
        n_features: int | None = None,
        **kwargs: Unpack[BaselineOptions],
    ) -> None:
        self.size = _positive_int(size, "size")
        if isinstance(storage, str) and storage not in ("uniform", "geometric"):
            raise ValueError(
                f"storage must be 'uniform', 'geometric' or an object, got {storage!r}"
            )
        if not isinstance(storage, str):
            missing = [m for m in ("update", "sample", "__len__") if not hasattr(storage, m)]
            if missing:
                raise TypeError(f"storage needs update(X), sample(n) and len(); lacks {missing}")
        self._storage_arg = storage
        self.storage: Any = None if isinstance(storage, str) else storage
        super().__init__(n_features, **kwargs)
        if self.n_features is not None and self.storage is None:
            self._on_width()

    def _on_width(self) -> None:
        if self.storage is not None:
            return
        cls = UniformReservoir if self._storage_arg == "uniform" else GeometricReservoir
        assert self.n_features is not None
        # a seed derived from the baseline's own: both streams of random numbers are fixed
        self.storage = cls(
            self.size, self.n_features, seed=self.seed + 1, dtype=self.dtype, device=self.device
        )

    def _update(self, X: torch.Tensor) -> None:
        self.storage.update(X)

    def background(self, n: int) -> torch.Tensor:
        """``n`` rows ``[n, d]`` drawn from the reservoir."""
        if self.storage is None or len(self.storage) == 0:
            raise ValueError("ExpectationBaseline's reservoir is empty: call update(X) first")
        return self.storage.sample(n).to(self.device, self.dtype)

    def _draw(self, X: torch.Tensor, n: int, model_fn: ScalarFn | None) -> torch.Tensor:
        return self.background(n).unsqueeze(1).expand(n, X.shape[0], X.shape[1]).clone()

    def _config(self) -> dict[str, object]:
        name = self._storage_arg if isinstance(self._storage_arg, str) else "custom"
        return {**super()._config(), "size": self.size, "storage": name}

    def _extra_state(self) -> dict[str, object]:
        has = self.storage is not None and hasattr(self.storage, "state_dict")
        return {"storage_state": self.storage.state_dict() if has else None}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        if state["storage_state"] is not None:
            self.storage.load_state_dict(state["storage_state"])


# ---------------------------------------------------------------------------------- ranges
class _RangeBaseline(Baseline):
    """A baseline that needs the observed range ``[min_j, max_j]`` of each feature: over all
    rows seen (``window=None``) or over the last ``window`` rows (a ring buffer)."""

    def __init__(self, window: int | None = None, n_features: int | None = None,
                 **kwargs: Unpack[BaselineOptions]):
        self.window = None if window is None else _positive_int(window, "window")
        self._lo: torch.Tensor | None = None
        self._hi: torch.Tensor | None = None
        self._ring: torch.Tensor | None = None
        super().__init__(n_features, **kwargs)

    def _update(self, X: torch.Tensor) -> None:
        if self.window is None:
            lo, hi = X.min(0).values, X.max(0).values
            self._lo = lo if self._lo is None else torch.minimum(self._lo, lo)
            self._hi = hi if self._hi is None else torch.maximum(self._hi, hi)
            return
        ring = X if self._ring is None else torch.cat([self._ring, X])
        self._ring = ring[-self.window :].clone()
        self._lo, self._hi = self._ring.min(0).values, self._ring.max(0).values

    def ranges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(min [d], max [d])`` of the rows in scope."""
        if self._lo is None or self._hi is None:
            raise ValueError(f"{type(self).__name__} has seen no rows: call update(X) first")
        return self._lo, self._hi

    def _config(self) -> dict[str, object]:
        return {**super()._config(), "window": self.window}

    def _extra_state(self) -> dict[str, object]:
        clone = lambda t: None if t is None else t.clone()
        return {"lo": clone(self._lo), "hi": clone(self._hi), "ring": clone(self._ring)}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        move = lambda t: None if t is None else t.to(self.device, self.dtype).clone()
        self._lo, self._hi, self._ring = move(state["lo"]), move(state["hi"]), move(state["ring"])


class MaxDistanceBaseline(_RangeBaseline):
    """The corner of the observed box farthest from ``x`` in l1 distance (dynamic,
    deterministic): ``b_j = min_j`` if ``x_j >= (min_j + max_j) / 2``, else ``max_j``.

    >>> b = MaxDistanceBaseline()
    >>> b.update(torch.tensor([[0.0, 0.0], [4.0, 2.0]]))
    >>> b(torch.tensor([[3.0, 0.5]])).tolist()
    [[0.0, 2.0]]
    """

    static, stochastic = False, False

    def _draw(self, X: torch.Tensor, n: int, model_fn: ScalarFn | None) -> torch.Tensor:
        lo, hi = self.ranges()
        return torch.where(X >= (lo + hi) / 2, lo, hi).unsqueeze(0)


class UniformBaseline(_RangeBaseline):
    """A uniform draw from the observed range of each feature (dynamic, stochastic)."""

    static, stochastic = False, True

    def _draw(self, X: torch.Tensor, n: int, model_fn: ScalarFn | None) -> torch.Tensor:
        lo, hi = self.ranges()
        u = torch.rand((n, *X.shape), generator=self.generator, dtype=self.dtype)
        return lo + u.to(self.device) * (hi - lo)


class GaussianBaseline(_RangeBaseline):
    """``x`` plus Gaussian noise ``N(0, sigma^2)`` per feature (dynamic, stochastic), clipped
    to the observed range of each feature (``clip=True``; that needs at least one update,
    else ``ValueError``)."""

    static, stochastic = False, True

    def __init__(
        self,
        sigma: float = 0.5,
        *,
        clip: bool = True,
        window: int | None = None,
        n_features: int | None = None,
        **kwargs: Unpack[BaselineOptions],
    ) -> None:
        self.sigma = _positive_float(sigma, "sigma")
        self.clip = bool(clip)
        super().__init__(window, n_features, **kwargs)

    def _draw(self, X: torch.Tensor, n: int, model_fn: ScalarFn | None) -> torch.Tensor:
        noise = torch.randn((n, *X.shape), generator=self.generator, dtype=self.dtype)
        out = X + self.sigma * noise.to(self.device)
        if self.clip:
            lo, hi = self.ranges()
            out = torch.minimum(torch.maximum(out, lo), hi)
        return out

    def _config(self) -> dict[str, object]:
        return {**super()._config(), "sigma": self.sigma, "clip": self.clip}


# ---------------------------------------------------------------------------------- per row
class BlurredBaseline(Baseline):
    """A Gaussian blur of ``x`` across "neighbouring" features (dynamic, stochastic). Tabular
    features have no order, so every draw blurs along a fresh random permutation of the
    features and permutes back; the paper averages over many such permutations.

    The blur is ``scipy.ndimage.gaussian_filter1d(x[perm], sigma, mode="reflect")``, applied
    as a ``[d, d]`` matrix built once.

    >>> b = BlurredBaseline(sigma=1e-3)   # almost no blur: the row itself
    >>> torch.allclose(b(torch.tensor([[1.0, 2.0, 3.0]])), torch.tensor([[1.0, 2.0, 3.0]]))
    True
    """

    static, stochastic = False, True

    def __init__(self, sigma: float = 3.0, n_features: int | None = None,
                 **kwargs: Unpack[BaselineOptions]):
        self.sigma = _positive_float(sigma, "sigma")
        self._matrix: torch.Tensor | None = None
        super().__init__(n_features, **kwargs)

    def blur_matrix(self) -> torch.Tensor:
        """``M [d, d]`` with ``blur(z) = M @ z`` for a row ``z`` in the permuted order."""
        if self._matrix is None:
            assert self.n_features is not None
            eye = np.eye(self.n_features)
            m = gaussian_filter1d(eye, self.sigma, axis=0, mode="reflect")
            self._matrix = torch.from_numpy(m).to(self.device, self.dtype)
        return self._matrix

    def _draw(self, X: torch.Tensor, n: int, model_fn: ScalarFn | None) -> torch.Tensor:
        d = X.shape[1]
        M = self.blur_matrix()
        perms = torch.stack([torch.randperm(d, generator=self.generator) for _ in range(n)])
        perms = perms.to(self.device)
        inv = torch.argsort(perms, dim=1)
        permuted = X[:, perms].permute(1, 0, 2)  # [n, B, d]
        blurred = permuted @ M.T
        return torch.gather(blurred, 2, inv.unsqueeze(1).expand(n, X.shape[0], d))

    def _config(self) -> dict[str, object]:
        return {**super()._config(), "sigma": self.sigma}


class NeutralBaseline(Baseline):
    """A point on the model's decision level (dynamic, deterministic): bisection on the segment
    from a reference point ``r`` to ``x`` for ``f(r + t (x - r)) = level`` (spec §6.2.7).

    Parameters
    ----------
    reference
        A baseline giving ``r`` (default: an :class:`EWMABaseline` with ``beta``), updated by
        :meth:`update`.
    level
        The decision level of the explained output (0.5 for a probability, 0 for a logit).
    n_iter
        Bisection steps (the point is within ``2**-n_iter`` of the crossing, along the segment).

    Rows whose segment does not cross the level keep the reference point; they are marked in
    :attr:`last_fallback` ``[B]`` (bool) after every call.

    >>> b = NeutralBaseline(reference=ConstantBaseline([0.0, 0.0]), level=0.0)
    >>> b(torch.tensor([[2.0, 2.0]]), model_fn=lambda z: z.sum(1) - 1.0).tolist()
    [[0.5, 0.5]]
    """

    static, stochastic, needs_model = False, False, True

    def __init__(
        self,
        reference: Baseline | None = None,
        *,
        level: float = 0.5,
        beta: float = 0.001,
        n_iter: int = 30,
        n_features: int | None = None,
        **kwargs: Unpack[BaselineOptions],
    ) -> None:
        if reference is not None and reference.stochastic:
            raise ValueError("reference must be a deterministic baseline")
        self.reference = reference if reference is not None else EWMABaseline(beta)
        self.level = float(level)
        self.n_iter = _positive_int(n_iter, "n_iter")
        self.last_fallback = torch.zeros(0, dtype=torch.bool)
        super().__init__(n_features or self.reference.n_features, **kwargs)

    def _update(self, X: torch.Tensor) -> None:
        self.reference.update(X)

    def _draw(self, X: torch.Tensor, n: int, model_fn: ScalarFn | None) -> torch.Tensor:
        assert model_fn is not None
        r = self.reference(X).to(self.device, self.dtype)
        with torch.no_grad():

            def g(t: torch.Tensor) -> torch.Tensor:
                z = r + t.unsqueeze(1) * (X - r)
                out = torch.as_tensor(model_fn(z)).reshape(-1).to(self.dtype)
                return out - self.level

            lo = torch.zeros(X.shape[0], dtype=self.dtype, device=self.device)
            hi = torch.ones_like(lo)
            g_lo, g_hi = g(lo), g(hi)
            crosses = (g_lo * g_hi) <= 0
            for _ in range(self.n_iter):
                mid = (lo + hi) / 2
                g_mid = g(mid)
                left = (g_lo * g_mid) <= 0  # the crossing is in [lo, mid]
                hi = torch.where(left, mid, hi)
                lo = torch.where(left, lo, mid)
                g_lo = torch.where(left, g_lo, g_mid)
            t = torch.where(crosses, (lo + hi) / 2, torch.zeros_like(lo))
        self.last_fallback = ~crosses.cpu()
        return (r + t.unsqueeze(1) * (X - r)).unsqueeze(0)

    def _config(self) -> dict[str, object]:
        return {**super()._config(), "level": self.level, "n_iter": self.n_iter}

    def _extra_state(self) -> dict[str, object]:
        return {"reference": self.reference.state_dict()}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        self.reference.load_state_dict(state["reference"])


#: The baselines by short name (:func:`make_baseline`).
BASELINES: dict[str, type[Baseline]] = {
    "constant": ConstantBaseline,
    "max_distance": MaxDistanceBaseline,
    "blurred": BlurredBaseline,
    "gaussian": GaussianBaseline,
    "uniform": UniformBaseline,
    "expectation": ExpectationBaseline,
    "neutral": NeutralBaseline,
    "ewma": EWMABaseline,
}


def make_baseline(name: str, **kwargs: Any) -> Baseline:
    """A baseline by its short name (keys of :data:`BASELINES`) with keyword arguments."""
    try:
        cls = BASELINES[name]
    except KeyError:
        raise ValueError(f"baseline must be one of {sorted(BASELINES)}, got {name!r}") from None
    return cls(**kwargs)
