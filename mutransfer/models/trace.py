"""Recording of named activations during a forward pass (for the coordinate check).

Modules call `record(name, tensor)`; it costs nothing unless a `tracing()` block is active.
While one is active (`active()`), the mixers also compute and record the SSM's latent states.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch

_TRACE: ContextVar[dict[str, torch.Tensor] | None] = ContextVar("_TRACE", default=None)


@contextmanager
def tracing() -> Iterator[dict[str, torch.Tensor]]:
    """Collect `record`-ed activations (detached) into the yielded dict."""
    store: dict[str, torch.Tensor] = {}
    token = _TRACE.set(store)
    try:
        yield store
    finally:
        _TRACE.reset(token)


def active() -> bool:
    return _TRACE.get() is not None


def record(name: str, tensor: torch.Tensor) -> None:
    store = _TRACE.get()
    if store is not None:
        store[name] = tensor.detach().float()
