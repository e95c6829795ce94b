"""Import torchax 0.0.13 under torch 2.13, which removed the named-tensor overloads it names.

torchax builds module-level tables at import time that spell out overloads such as
``torch.ops.aten.prod.dim_Dimname`` or ``torch.ops.aten.index_add.dimname``. torch 2.13 dropped
those named-tensor (``Dimname``) overloads, so the attribute lookup raises ``AttributeError``
and ``import torchax`` fails.

:func:`import_torchax` imports torchax with ``OpOverloadPacket.__getattr__`` temporarily
wrapped: only while the import runs, a *failing* lookup of a named-tensor overload (its name
mentions ``Dimname``/``dimname`` or a ``names`` word, e.g. ``norm.names_ScalarOpt_dim``)
returns an inert :class:`RemovedOverload` placeholder instead of raising. The placeholder is
not an ``OpOverload``: ``torch._decomp.get_decompositions`` skips it and the amp table only
uses it as a dict key, so torchax never calls it. It is never cached on the packet, and the
original ``__getattr__`` is put back in a ``finally`` block, so afterwards the same lookups
fail exactly as before. No installed file is edited. The wrap is process-wide for the
duration of the import (a lock serializes our imports; another thread looking up a removed
named-tensor overload at that moment would get a placeholder). torchax's own import side
effects stay (it disables ``torch.backends.mha`` fast path, as it always does).

If jax or torchax is not installed, :class:`~modelprov.errors.MissingDependencyError` says which
extra to install.

After the import,
:func:`~modelprov.stablehlo.lower._jax_backend_compat.complete_jax_backend` registers what
torch needs behind the ``jax`` backend torchax's import declares, so dynamo (``torch.cond``
export, strict export) keeps working in the process.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
import sys
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from modelprov.errors import MissingDependencyError
from modelprov.stablehlo.lower._jax_backend_compat import complete_jax_backend

__all__ = [
    "INSTALL_HINT",
    "TESTED_TORCHAX",
    "RemovedOverload",
    "import_torchax",
    "removed_overloads_seen",
]

_LOG = logging.getLogger(__name__)

INSTALL_HINT = 'pip install "modelprov[stablehlo]"'
TESTED_TORCHAX = "0.0.13"
"""The torchax version whose private helpers this module uses (the ``stablehlo`` extra's pin)."""

_LOCK = threading.Lock()
_SEEN: list[str] = []


class RemovedOverload:
    """Inert stand-in for an ATen overload that the running torch no longer has."""

    __slots__ = ("qualified_name",)

    def __init__(self, qualified_name: str) -> None:
        self.qualified_name = qualified_name

    def __repr__(self) -> str:
        return f"RemovedOverload({self.qualified_name!r})"

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise RuntimeError(
            f"{self.qualified_name} does not exist in this torch build; "
            "it was only named by a table torchax builds at import time"
        )


def removed_overloads_seen() -> tuple[str, ...]:
    """Names of the overloads the shim stood in for during the last torchax import."""
    return tuple(_SEEN)


# ATen spells named-tensor overloads with "Dimname"/"dimname" or a "names" word:
# prod.dim_Dimname, index_add.dimname, norm.names_ScalarOpt_dim, std.correction_names.
_NAMED_TENSOR_OVERLOAD = re.compile(r"dimname|(?:^|_)names(?:_|$)", re.IGNORECASE)


def _is_named_tensor_overload(key: str) -> bool:
    return _NAMED_TENSOR_OVERLOAD.search(key) is not None


@contextlib.contextmanager
def _tolerate_removed_named_overloads() -> Iterator[None]:
    """Let failing ``Dimname`` overload lookups return placeholders inside the block only."""
    import torch._ops

    packet_cls = torch._ops.OpOverloadPacket
    original: Callable[[Any, str], Any] = packet_cls.__getattr__

    def tolerant_getattr(self: Any, key: str) -> Any:
        try:
            return original(self, key)
        except AttributeError:
            if not _is_named_tensor_overload(key):
                raise
            name = f"{self}.{key}"
            _SEEN.append(name)
            return RemovedOverload(name)

    packet_cls.__getattr__ = tolerant_getattr
    try:
        yield
    finally:
        packet_cls.__getattr__ = original


def import_torchax() -> ModuleType:
    """Import and return ``torchax`` (with ``torchax.export``), working around torch 2.13.

    Raises MissingDependencyError with install guidance when jax or torchax is missing.
    """
    loaded = sys.modules.get("torchax")
    if isinstance(loaded, ModuleType) and isinstance(sys.modules.get("torchax.export"), ModuleType):
        complete_jax_backend()  # also when the user imported torchax first
        return loaded
    with _LOCK:
        try:
            importlib.import_module("jax")
        except ImportError as exc:
            raise MissingDependencyError(
                f"StableHLO export needs jax and torchax; install them with {INSTALL_HINT}"
            ) from exc
        _SEEN.clear()
        try:
            with _tolerate_removed_named_overloads():
                torchax = importlib.import_module("torchax")
                importlib.import_module("torchax.export")
        except ImportError as exc:
            raise MissingDependencyError(
                f"StableHLO export needs torchax ({exc}); install it with {INSTALL_HINT}"
            ) from exc
        if _SEEN:
            _LOG.debug("torchax import: stood in for removed overloads %s", ", ".join(_SEEN))
        complete_jax_backend()
        return torchax
