"""Public name of :mod:`modelprov.core.keys`: every metadata key, declared once there."""

from modelprov.core.keys import *  # noqa: F403
from modelprov.core.keys import __all__ as __all__
