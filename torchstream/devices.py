"""Devices named one way, and host-to-device copies that do not stop the host.

Two small rules every component follows on an accelerator:

* a stored device is *indexed* (``cuda:0``, not ``cuda``): tensors always report an index, so a
  device kept as ``torch.device("cuda")`` would never compare equal to the device of its own
  tensors (:func:`as_device`);
* small tensors made on the host (slot indices drawn by a CPU generator, smoothing weights) go
  to the device through page-locked memory without waiting (:func:`to_device`); a copy from
  ordinary memory makes the host wait for all the work queued before it, once per step.

>>> as_device("cpu"), as_device(None)
(device(type='cpu'), device(type='cpu'))
>>> to_device(torch.arange(3), torch.device("cpu")).tolist()
[0, 1, 2]
"""

from __future__ import annotations

import torch

__all__ = ["as_device", "to_device"]


def as_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a ``torch.device`` with its index (``"cuda"`` -> ``cuda:<current>``);
    ``None`` is the CPU."""
    dev = torch.device("cpu" if device is None else device)
    if dev.type == "cuda" and dev.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return dev


def to_device(t: torch.Tensor, device: torch.device, dtype: torch.dtype | None = None
              ) -> torch.Tensor:
    """``t`` (on the host) on ``device``: for CUDA through pinned memory, non-blocking. The pinned
    block comes from torch's caching host allocator, which keeps it until the copy has run, so
    the host may go on at once."""
    if dtype is not None and t.dtype != dtype:
        t = t.to(dtype)
    if device.type != "cuda" or t.device.type != "cpu":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)
