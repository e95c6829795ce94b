"""Pins the public API of modelprov and of every subpackage: additions are deliberate,
removals are breaking. Like onnx-ir's public API test, each public module's ``__all__`` is
pinned, every listed name exists, and no class or function defined in a public module is
left out of its ``__all__``."""

from __future__ import annotations

import importlib
import inspect
import pathlib
import types

import pytest

import modelprov
import modelprov.policy

PUBLIC_API: dict[str, list[str]] = {
    "modelprov": [
        "AuditReport",
        "DEFAULT_POLICIES",
        "DiffReport",
        "FunctionizePass",
        "FunctionizeResult",
        "InlineProvenancePass",
        "MergeContext",
        "OptimizeProvenancePass",
        "OptimizeResult",
        "Policies",
        "NumericsReport",
        "Recall",
        "RecoveryReport",
        "Source",
        "SourceIndex",
        "StableHLOProgram",
        "StepRecord",
        "TraceOptions",
        "annotate",
        "annotations",
        "audit",
        "calibrate",
        "compare",
        "diff",
        "errors",
        "export",
        "export_stablehlo",
        "find_calls",
        "functionize",
        "inline",
        "join_sources",
        "optimize",
        "optimize_with",
        "overlay",
        "policy",
        "quantize",
        "recover",
        "recover_with_report",
        "report",
        "sources",
        "structural_hash",
        "write_overlay",
        "write_report",
    ],
    "modelprov.annotation": [
        "annotate",
        "annotations",
        "calibrate",
        "effective_annotations",
        "format_value",
        "module_paths",
        "normalize_annotations",
    ],
    "modelprov.audit": [
        "AuditReport",
        "DiffReport",
        "FunctionUse",
        "InvalidMetadata",
        "KeyCoverage",
        "LargeValue",
        "OptimizeReport",
        "Recall",
        "audit",
        "diff",
        "optimize_report",
    ],
    "modelprov.errors": [
        "AnnotationError",
        "CorrespondenceError",
        "ExitCode",
        "ExportError",
        "InvalidModelError",
        "LoweringError",
        "MetadataError",
        "MissingDependencyError",
        "ModelprovError",
        "OutputError",
        "PolicyError",
        "QuantizationError",
        "StableHLOError",
        "UsageError",
        "VerificationError",
        "keyword",
    ],
    "modelprov.keys": [
        "ATEN_CALL_KEY",
        "ATEN_SCHEMAS_FORMAT",
        "ATEN_SCHEMAS_KEY",
        "ATEN_DOMAIN",
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
        "ONNXSCRIPT_FOLDED_FROM_KEY",
        "ONNXSCRIPT_RULE_NAME_KEY",
        "NUMERICS_FORMAT",
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
    ],
    "modelprov.core": [
        "DEFAULT_POLICIES",
        "Change",
        "Frame",
        "MergeContext",
        "Policies",
        "Policy",
        "Provenance",
        "Snapshot",
        "Source",
        "SourceTable",
        "TraceOptions",
        "correspond",
        "dump_ids",
        "node_label",
        "parse_ids",
    ],
    "modelprov.onnx": [],
    "modelprov.onnx.export": [],
    "modelprov.onnx.functions": [],
    "modelprov.onnx.optimize": [],
    "modelprov.onnx.quantize": [],
    "modelprov.onnx.recover": [],
    "modelprov.stablehlo.attach": [],
    "modelprov.stablehlo.lower": [],
    "modelprov.stablehlo.read": [],
    "modelprov.stablehlo.untrusted": [],
    "modelprov.policy": [
        "DEFAULT_POLICIES",
        "MergeContext",
        "Policies",
        "Policy",
        "common_prefix",
        "drop",
        "dump_policies",
        "error_on_conflict",
        "first",
        "follow_output",
        "from_output",
        "join",
        "load_policies",
        "max",
        "min",
        "parse_policies",
        "scope_lists",
        "stack_traces",
        "union",
        "value_scoped",
    ],
    "modelprov.report": [
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
    ],
    "modelprov.numerics": [
        "DEFAULT_ATOL",
        "DEFAULT_RTOL",
        "ModuleNumerics",
        "NumericsReport",
        "NumericsRow",
        "compare",
    ],
    "modelprov.stablehlo": [
        "FxNodeInfo",
        "HloOp",
        "MlirOp",
        "OpRecord",
        "StableHLOExportOptions",
        "StableHLOGraphModule",
        "StableHLOProgram",
        "export_stablehlo",
        "exported_program_to_stablehlo",
        "load_exported",
        "read_hlo_sources",
        "read_mlir_sources",
        "restore_attributes",
    ],
}


@pytest.mark.parametrize("module_name", sorted(PUBLIC_API))
def test_public_names_are_pinned(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert sorted(getattr(module, "__all__", [])) == sorted(PUBLIC_API[module_name])
    for name in PUBLIC_API[module_name]:
        assert getattr(module, name, None) is not None, f"{module_name}.{name}"


@pytest.mark.parametrize("module_name", sorted(PUBLIC_API))
def test_no_public_class_or_function_is_left_out_of_all(module_name: str) -> None:
    module = importlib.import_module(module_name)
    listed = set(getattr(module, "__all__", []))
    defined_here = [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__ == module_name
    ]
    assert set(defined_here) <= listed, f"{module_name} defines {set(defined_here) - listed}"


@pytest.mark.parametrize("module_name", sorted(PUBLIC_API))
def test_public_names_name_their_public_module(module_name: str) -> None:
    """``__module__`` of every public class and function is a public module that hands it
    out under its name (as onnx-ir's faces set it), never the private module defining it;
    an alias (``FxNodeInfo`` for ``Source``) names the home of the class it stands for."""
    module = importlib.import_module(module_name)
    for name in PUBLIC_API[module_name]:
        value = getattr(module, name)
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        home = value.__module__
        assert not any(part.startswith("_") for part in home.split(".")), (
            f"{module_name}.{name}.__module__ is {home!r}"
        )
        assert getattr(importlib.import_module(home), value.__name__) is value, (
            f"{module_name}.{name}: {home} does not hand it out"
        )


def test_pinned_repr_names_the_public_module() -> None:
    assert repr(modelprov.policy.union) == "modelprov.policy.union"
    assert modelprov.Policies.__module__ == "modelprov.policy"
    assert modelprov.optimize.__module__ == "modelprov"
    assert modelprov.Source.__module__ == "modelprov.core"


def test_every_public_module_is_pinned() -> None:
    root = pathlib.Path(modelprov.__path__[0])
    public = {"modelprov"}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and not any(part.startswith("_") or part.endswith("_test") for part in parts):
            public.add(".".join(("modelprov", *parts)))
    assert public - {"modelprov.cli"} == set(PUBLIC_API)


def test_policy_module_names() -> None:
    assert set(modelprov.policy.__all__) >= {"union", "join", "value_scoped", "Policies"}


def test_stablehlo_fx_node_info_is_the_source_record() -> None:
    """One record type for a source: StableHLO's per-FX-node records are ``Source``s."""
    stablehlo = importlib.import_module("modelprov.stablehlo")
    assert stablehlo.FxNodeInfo is modelprov.Source
