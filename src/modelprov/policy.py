"""Public name of :mod:`modelprov.core._policy`: the built-in merge policies and ``Policies``."""

from modelprov.core._policy import *  # noqa: F403
from modelprov.core._policy import __all__ as __all__
