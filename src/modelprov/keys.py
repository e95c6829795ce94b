"""Every metadata key, attribute name, function domain and format name modelprov writes or reads.

Declared once, here, as public constants; every other module imports them from this module
(a test checks that no other module of ``modelprov`` spells one of these strings). Pure
Python: importing it loads no torch, jax, onnx or onnxscript. What each key holds:
docs/metadata-format.md (a test checks that it mentions every constant's value).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ATEN_CALL_KEY",
    "ATEN_DOMAIN",
    "ATEN_SCHEMAS_FORMAT",
    "ATEN_SCHEMAS_KEY",
    "ATEN_SCHEMA_KEY",
    "ATEN_TARGET_KEY",
    "AUDIT_FORMAT",
    "CALIBRATION_KEY_PATTERNS",
    "CALIBRATION_PREFIX",
    "CLASS_HIERARCHY_KEY",
    "CONFIDENCE_KEY",
    "CONSTANT_OF_KEY",
    "DIFF_FORMAT",
    "FUNCTION_NAME_KEY",
    "FX_NODE_KEY",
    "HISTOGRAM_FORMAT",
    "INLINE_KEY",
    "INLINE_OUTPUTS_META",
    "KEPT_FOR_RECALL_KEY",
    "MODULE_CLASS_KEY",
    "MODULE_DOMAIN",
    "NAMESPACE_KEY",
    "NAME_SCOPES_KEY",
    "NODE_ORDER_KEY",
    "NODE_SOURCES_KEY",
    "NUMERICS_FORMAT",
    "ONNXSCRIPT_FOLDED_FROM_KEY",
    "ONNXSCRIPT_RULE_NAME_KEY",
    "OPTIMIZE_REPORT_FORMAT",
    "OUTPUT_OF_KEY",
    "POLICIES_FORMAT",
    "QUANTIZED_TENSORS_FORMAT",
    "RANGE_MAX_KEY",
    "RANGE_MIN_KEY",
    "RECOVER_REPORT_FORMAT",
    "REPORT_FORMAT",
    "RESERVED_PREFIX",
    "SOURCE_NODE_KEY",
    "STABLEHLO_ATEN_SCHEMA_KEY",
    "STABLEHLO_FRONTEND_ATTRIBUTES",
    "STABLEHLO_LOCATION_KEYS",
    "STABLEHLO_LOCATION_KEYS_FORMAT",
    "STABLEHLO_MODULE_KEY",
    "STABLEHLO_MODULE_TYPE_KEY",
    "STABLEHLO_NODE_KEY",
    "STABLEHLO_SOURCE_NODE_KEY",
    "STABLEHLO_STACK_KEY",
    "STABLEHLO_TARGET_KEY",
    "STACK_TRACE_KEY",
    "TABLE_FORMAT",
    "TABLE_KEY",
    "TORCH_EXPORT_KEY_PATTERN",
    "TORCH_PREFIX",
    "VARIANT_KEY",
]

# modelprov's own keys (ONNX node, value and model metadata_props).
RESERVED_PREFIX: Final = "modelprov."
"""Every key modelprov itself writes starts with this; users' annotation keys must not."""
NODE_SOURCES_KEY: Final = "modelprov.sources"
"""Node key: JSON array of the node's source ids."""
TABLE_KEY: Final = NODE_SOURCES_KEY
"""Model key: the sources table (the same name as the node key, on the model)."""
OUTPUT_OF_KEY: Final = "modelprov.output_of"
"""Value key: the ids of the sources whose output the tensor is."""
KEPT_FOR_RECALL_KEY: Final = "modelprov.kept_for_recall"
"""Node key: JSON array of source ids the node carries only so that they are not lost (it
does not compute them: it folded a constant shared with them, or the shape of their output)."""
CONFIDENCE_KEY: Final = "modelprov.confidence"
"""Node key written by recover: ``exact``, ``named`` or ``inferred``."""
INLINE_KEY: Final = "modelprov.inline"
"""Call-node key: the call's own body nodes, so ``inline`` restores them."""
CONSTANT_OF_KEY: Final = "modelprov.constant_of"
"""Key of a Constant copied into a function body: the value it stands for."""
NODE_ORDER_KEY: Final = "modelprov.node_order"
"""Model key (functionize): JSON array of the main graph's node names in their order before
functionize; inline sorts the graph back by it and removes it."""
INLINE_OUTPUTS_META: Final = "modelprov.outputs"
"""In-memory only (``ir.Node.meta``, never serialized): a call's inlined output values."""

# Keys torch.onnx writes on every node of an unoptimized export.
TORCH_PREFIX: Final = "pkg.torch."
"""Prefix of torch's keys; users' annotation keys must not use it."""
NAMESPACE_KEY: Final = "namespace"
FX_NODE_KEY: Final = "pkg.torch.onnx.fx_node"
STACK_TRACE_KEY: Final = "pkg.torch.onnx.stack_trace"
NAME_SCOPES_KEY: Final = "pkg.torch.onnx.name_scopes"
CLASS_HIERARCHY_KEY: Final = "pkg.torch.onnx.class_hierarchy"
TORCH_EXPORT_KEY_PATTERN: Final = "pkg.torch.export.*"
"""Glob of the keys torch.export may add."""

# Keys onnxscript writes when it rewrites or folds.
ONNXSCRIPT_RULE_NAME_KEY: Final = "pkg.onnxscript.rewriter.rule_name"
ONNXSCRIPT_FOLDED_FROM_KEY: Final = "pkg.onnxscript.optimizer.folded_from"

# ATen calls and functions (modelprov.export, modelprov.functionize).
ATEN_CALL_KEY: Final = "pkg.modelprov.aten_call"
"""Node key: the versioned JSON record of the node's ATen call."""
ATEN_SCHEMAS_KEY: Final = "pkg.modelprov.aten_schemas"
"""Model key: the schema of every ATen target the model's aten_call records name, once each."""
ATEN_SCHEMAS_FORMAT: Final = "modelprov.aten_schemas"
"""The ``format`` of the ``pkg.modelprov.aten_schemas`` document."""
ATEN_TARGET_KEY: Final = "pkg.modelprov.aten_target"
ATEN_SCHEMA_KEY: Final = "pkg.modelprov.aten_schema"
MODULE_CLASS_KEY: Final = "pkg.modelprov.module_class"
SOURCE_NODE_KEY: Final = "pkg.modelprov.source_node"
"""Node key (modelprov.export): the user's torch.export node(s) the node came from; the id
StableHLO's ``modelprov.source_node`` shares (``modelprov.join_sources``)."""
FUNCTION_NAME_KEY: Final = "pkg.modelprov.function_name"
"""Function key (every function): its base name (``aten_addmm_default``, ``GPT2Block``)."""
VARIANT_KEY: Final = "pkg.modelprov.variant"
"""Function key (every function): its variant, the leading hex digits of its structural hash."""
ATEN_DOMAIN: Final = "pkg.torch.aten"
"""Function domain of one function per ATen op."""
MODULE_DOMAIN: Final = "pkg.torch.module"
"""Function domain of one function per nn.Module class."""

# User annotations and calibration statistics.
CALIBRATION_PREFIX: Final = "custom."
"""The default prefix of the keys modelprov.calibrate writes."""
RANGE_MIN_KEY: Final = "custom.min"
"""The value-scoped lower bound of a tensor (modelprov.calibrate, read by modelprov.quantize)."""
RANGE_MAX_KEY: Final = "custom.max"
"""The value-scoped upper bound of a tensor."""
CALIBRATION_KEY_PATTERNS: Final = (
    RANGE_MIN_KEY,
    RANGE_MAX_KEY,
    "custom.mean",
    "custom.std",
    "custom.histogram",
    "custom.p[0-9]*",
    "custom.output[0-9]*",
)
"""Keys (and globs) of the value-scoped statistics modelprov.calibrate writes."""

QUANTIZED_TENSORS_FORMAT: Final = "modelprov.quantized_tensors"
"""Format name of `modelprov quantize --json`."""

# StableHLO op attributes (modelprov.export_stablehlo).
STABLEHLO_NODE_KEY: Final = "modelprov.node"
STABLEHLO_SOURCE_NODE_KEY: Final = "modelprov.source_node"
STABLEHLO_MODULE_KEY: Final = "modelprov.module"
STABLEHLO_MODULE_TYPE_KEY: Final = "modelprov.module_type"
STABLEHLO_TARGET_KEY: Final = "modelprov.target"
STABLEHLO_STACK_KEY: Final = "modelprov.stack"
STABLEHLO_ATEN_SCHEMA_KEY: Final = "modelprov.aten_schema"
"""On a composite's decomposition function: the torch schema of the ATen op it computes."""
STABLEHLO_FRONTEND_ATTRIBUTES: Final = "mhlo.frontend_attributes"
"""The op attribute XLA turns into HLO ``frontend_attributes`` (a copy of the keys above)."""
STABLEHLO_LOCATION_KEYS: Final = "modelprov.keys"
STABLEHLO_LOCATION_KEYS_FORMAT: Final = "modelprov.keys_format"
"""Fused-location metadata entries carrying an op's user keys, and their format version."""

# The "format" field of every JSON document modelprov writes.
TABLE_FORMAT: Final = NODE_SOURCES_KEY
HISTOGRAM_FORMAT: Final = "modelprov.histogram"
AUDIT_FORMAT: Final = "modelprov.audit"
DIFF_FORMAT: Final = "modelprov.diff"
OPTIMIZE_REPORT_FORMAT: Final = "modelprov.optimize-report"
NUMERICS_FORMAT: Final = "modelprov.numerics-report"
RECOVER_REPORT_FORMAT: Final = "modelprov.recover-report"
REPORT_FORMAT: Final = "modelprov.report"
POLICIES_FORMAT: Final = "modelprov.policies"
"""The ``format`` of a merge-policies file (``load_policies``, ``--policies FILE.json``)."""
