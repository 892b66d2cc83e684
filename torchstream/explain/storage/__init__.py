"""Storages of past stream rows: the replacement values of incremental explainers.

Incremental explainers replace ("remove") features of the current row by values of *past* rows.
The storages here keep a bounded, randomly or deterministically selected set of those rows:

* :class:`GeometricReservoir` — every new row replaces a uniformly chosen slot; recent rows are
  favoured, the age of a sampled row is geometric (iPFI "geometric sampling" [PFI]_).
* :class:`UniformReservoir` — Vitter's algorithm R; every past row is equally likely (iPFI
  "uniform sampling" [PFI]_).
* :class:`FrequencyStorage` — the last ``size`` values that passed an entrance coin, for
  quantiles of one feature (iPDP App. B.2, Alg. 3 [PDP]_).
* :class:`RollingExtremes` — the exact minimum and maximum of the last ``window`` values with
  monotone deques (iPDP App. B.1, Alg. 2 [PDP]_).
* :class:`FreshSampler` — iid rows from a known distribution (``update`` is ignored): isolates
  an explainer from reservoir effects in statistical tests.

Conventions shared by all of them:

* Rows live in tensors on ``device`` (float64 by default). Random numbers come from the
  storage's own CPU ``torch.Generator`` seeded with ``seed`` (``None`` draws a seed once from the
  operating system, see :attr:`seed`); the results do not depend on the device.
* ``update`` takes a batch in time order and is the same as updating with its rows one at a
  time: every row that meets a full storage consumes the same random number whichever batch it
  comes in, and all numbers of a batch are drawn in one call. ``sample(n)`` likewise equals
  ``sample(n1)`` followed by ``sample(n - n1)``.
* ``state_dict()`` holds the content, the counters and the generator state, so that a storage
  restored with ``load_state_dict`` continues bit-exactly.

The explainers use the duck type ``sample(n) -> Tensor [n, d]`` and ``update(X [B, d])``; any
object with these methods can serve as a storage.

References
----------
.. [PFI] F. Fumagalli, M. Muschalik, E. Hüllermeier, B. Hammer (2023). Incremental permutation
   feature importance (iPFI): towards online explanations on data streams. *Machine Learning*
   112, 4863-4903.
.. [PDP] M. Muschalik, F. Fumagalli, R. Jagtani, B. Hammer, E. Hüllermeier (2023). iPDP: on
   partial dependence plots in dynamic modeling scenarios. *xAI 2023*, CCIS 1901, 177-194.
"""

from torchstream.explain.storage.extremes import RollingExtremes
from torchstream.explain.storage.frequency import FrequencyStorage
from torchstream.explain.storage.fresh import FreshSampler
from torchstream.explain.storage.reservoirs import GeometricReservoir, UniformReservoir

__all__ = [
    "FrequencyStorage",
    "FreshSampler",
    "GeometricReservoir",
    "RollingExtremes",
    "UniformReservoir",
]
