"""Keep torch's accelerator API working after ``import torchax``.

The cause: torchax's import renames torch's PrivateUse1 backend to ``jax``
(``torch.utils.rename_privateuse1_backend``) and registers ``torchax.device_module`` as
``torch.jax``, whose ``is_available()`` says True. From then on
``torch.accelerator.is_available()`` is True, but torchax registers none of what torch needs
behind it (a device guard and PrivateUse1 hooks), so ``torch.accelerator.current_device_index()``
raises "PyTorch is not linked with support for jax devices". dynamo asks for the current
stream whenever an accelerator is available (``SymbolicStreamState``), so every dynamo trace in
the process failed afterwards: ``torch.export`` of a ``torch.cond`` model (its branches are
traced by dynamo), ``torch.export(strict=True)``, ``torch.compile``. The rename cannot be
undone (torch allows one backend name per process).

:func:`complete_jax_backend` registers, through torch's registration functions for Python
backends (``torch._C._acc.register_python_privateuseone_hook`` / ``..._device_guard``, what
``torch.utils.backend_registration._setup_privateuseone_for_python_backend`` registers), a
hook and a device guard describing what torchax's device module already declares: one
``jax`` device, index 0. It runs only when the accelerator API is broken that way, so a
backend someone else completed is left alone. Nothing is patched; no torch or torchax state is
replaced.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

__all__ = ["accelerator_api_works", "complete_jax_backend"]

_LOG = logging.getLogger(__name__)

_BACKEND = "jax"
_REGISTER = ("register_python_privateuseone_hook", "register_python_privateuseone_device_guard")
_REGISTERED: list[object] = []
"""The registered hook and guard, kept alive for the life of the process (as torch's are)."""


def accelerator_api_works() -> bool:
    """Whether ``torch.accelerator`` can answer what dynamo asks when an accelerator exists."""
    if not torch.accelerator.is_available():
        return True
    try:
        torch.accelerator.current_device_index()
    except RuntimeError:
        return False
    return True


def complete_jax_backend() -> bool:
    """Register a PrivateUse1 hook and device guard for torchax's ``jax`` backend if torch's
    accelerator API is broken by it; returns whether it registered them."""
    if torch._C._get_privateuse1_backend_name() != _BACKEND or accelerator_api_works():
        return False
    registration: Any = getattr(torch._C, "_acc", None)
    if not all(
        hasattr(registration, name) for name in ("PrivateUse1Hooks", "DeviceGuard", *_REGISTER)
    ):
        _LOG.warning(
            "torch %s has no Python PrivateUse1 registration (torch._C._acc); after importing "
            "torchax, dynamo (torch.cond export, strict export) fails in this process",
            torch.__version__,
        )
        return False

    class JaxHooks(registration.PrivateUse1Hooks):  # type: ignore[misc,name-defined]
        """torchax's device module says the backend is there; say so to torch too."""

        def is_available(self) -> bool:
            return True

        def has_primary_context(self, device_index: int) -> bool:
            return True

        def is_built(self) -> bool:
            return True

    class JaxDeviceGuard(registration.DeviceGuard):  # type: ignore[misc,name-defined]
        """One device, index 0 (torchax's ``device_module.current_device()``)."""

        def type_(self) -> object:
            return torch._C._autograd.DeviceType.PrivateUse1

    hooks, guard = JaxHooks(), JaxDeviceGuard()
    _REGISTERED.extend((hooks, guard))
    registration.register_python_privateuseone_hook(hooks)
    registration.register_python_privateuseone_device_guard(guard)
    _LOG.debug("registered a PrivateUse1 hook and device guard for torchax's jax backend")
    return True
