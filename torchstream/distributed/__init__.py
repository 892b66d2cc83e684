"""Work spread over several processes or machines.

:mod:`~torchstream.distributed.data_parallel` learns and explains one stream with several
processes joined by ``torch.distributed``: one model (gradients summed every step) and one
explanation (every worker's contributions folded in row order); its parts are
:mod:`~torchstream.distributed.exchange` (a worker's rows and collectives),
:mod:`~torchstream.distributed.sharded` (a worker's replica and explainers) and
:mod:`~torchstream.distributed.processes` (starting and watching the workers).
:mod:`~torchstream.distributed.snapshots` keeps the latest snapshot of each run of a sweep on
Ray (:mod:`torchstream.cli.sweep_ray`), so that a run whose machine is lost resumes elsewhere
from its last checkpoint. The package's ``__init__`` imports nothing: a Ray actor built from one
of its classes starts without loading torch.
"""
