"""Public name of :mod:`modelprov.core.policy`: the built-in merge policies and ``Policies``."""

from modelprov.core.policy import *  # noqa: F403
from modelprov.core.policy import __all__ as __all__
