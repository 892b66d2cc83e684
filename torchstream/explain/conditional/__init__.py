"""Conditional (observational) feature removal for iSAGE [SAGE]_: incremental trees that predict
each feature from the others, with geometric reservoirs at their nodes.

* :class:`ConditionalTreeSampler` — the sampler (one tree per feature, Alg. 3-4 of [SAGE]_);
  it is both the storage (``update``) and the imputer (``impute``) of observational iSAGE.
* ``_trees.TreeBank`` — the ``d`` trees in tensors (heap layout, Hoeffding-style growth).

References
----------
.. [SAGE] M. Muschalik, F. Fumagalli, B. Hammer, E. Hüllermeier (2023). iSAGE: an incremental
   version of SAGE for online explanation on data streams. *ECML PKDD 2023*, LNCS 14171,
   428-445.
"""

from torchstream.explain.conditional.sampler import ConditionalTreeSampler

__all__ = ["ConditionalTreeSampler"]
