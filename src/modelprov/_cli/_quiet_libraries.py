"""The libraries' chatter kept off the command line's stderr, for one call only.

torch.onnx, onnxscript and onnx_ir log warnings and info lines of their own (``torchvision
is not installed``, pass-manager steps) and raise deprecation warnings about each other;
interleaved with modelprov's progress they bury it. :func:`libraries_quieted` sets those
libraries' loggers to ERROR and ignores warnings of the noisy categories while its block
runs, then puts every level and filter back: nothing outlives the call, and errors (logged
at ERROR, or raised) still show. ``modelprov -v`` runs without it.

torch sets its loggers' levels when it is imported, so a block that imports torch quiets
what it logs afterwards only by entering again (``modelprov export`` does, around the export
call); the levels are restored in reverse.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator

__all__ = ["LIBRARIES", "libraries_quieted"]

LIBRARIES = ("torch", "onnxruntime", "jax", "torchax")
"""The logger namespaces quieted (their loggers and every logger below them): the exporters'
and runtimes' chatter. onnx, onnx_ir and onnxscript warn about the model itself (a shape
inference that failed): those are summarized in one line
(:mod:`modelprov._cli._library_warnings`)."""

_NOISY_WARNINGS: tuple[type[Warning], ...] = (DeprecationWarning, FutureWarning, UserWarning)


def _library_loggers() -> list[logging.Logger]:
    """The loggers of :data:`LIBRARIES` that exist now, each namespace's root included."""
    existing = [name for name in logging.root.manager.loggerDict if isinstance(name, str)]
    names = {name for name in existing if name.split(".")[0] in LIBRARIES}
    return [logging.getLogger(name) for name in sorted(names | set(LIBRARIES))]


@contextlib.contextmanager
def libraries_quieted(*, enabled: bool = True) -> Iterator[None]:
    """While the block runs, the libraries log errors only and their warnings of the noisy
    categories are ignored; ``enabled=False`` (``-v``) changes nothing."""
    if not enabled:
        yield
        return
    saved = {logger: logger.level for logger in _library_loggers()}
    try:
        for logger in saved:
            if logger.level < logging.ERROR:
                logger.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            for category in _NOISY_WARNINGS:
                warnings.simplefilter("ignore", category)
            yield
    finally:
        for logger, level in saved.items():
            logger.setLevel(level)
