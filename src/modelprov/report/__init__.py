"""See provenance: a self-contained HTML report and Model Explorer node-data overlays."""

from modelprov._base._public_names import pin_module
from modelprov.report._html import report, write_report
from modelprov.report._overlay import numerics_overlay, overlay, write_overlay
from modelprov.report._states import CONFIDENCE_KEY, STATE_COLORS, STATES, State, node_state

__all__ = [
    "CONFIDENCE_KEY",
    "STATES",
    "STATE_COLORS",
    "State",
    "node_state",
    "numerics_overlay",
    "overlay",
    "report",
    "write_overlay",
    "write_report",
]

pin_module(globals(), __all__, __name__)
