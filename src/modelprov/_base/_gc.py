"""Pausing Python's cyclic garbage collector while building large structures.

Building one object per node of a 50k-node graph makes the collector walk the whole heap
again and again (a full collection each time the long-lived objects grew by a quarter);
nothing built here is garbage, so the walk is wasted. Reference counting still frees
memory while paused; the collector resumes (and runs when due) afterwards.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused(*, freeze_after: bool = False) -> Iterator[None]:
    """Disables the cyclic collector for the block, if it was enabled (re-entrant).

    With ``freeze_after`` (for a process that exits after the block), what the block built
    is moved out of the collector's reach (``gc.freeze``) before it resumes: otherwise the
    first collection after a long pause walks the whole heap at once, about a second for a
    50k-node graph, to free nothing the exit would not free anyway.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze_after:
            gc.freeze()
        if was_enabled:
            gc.enable()
