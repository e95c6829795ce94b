"""Pins the public API: additions are deliberate, removals are breaking."""

import modelprov
import modelprov.policy


def test_public_names() -> None:
    assert sorted(modelprov.__all__) == sorted(
        [
            "AuditReport",
            "DEFAULT_POLICIES",
            "DiffReport",
            "FunctionizePass",
            "InlinePass",
            "MergeContext",
            "OptimizeProvenancePass",
            "Policies",
            "Recall",
            "Source",
            "SourceIndex",
            "StableHLOProgram",
            "StepRecord",
            "TraceOptions",
            "annotate",
            "annotations",
            "audit",
            "calibrate",
            "diff",
            "errors",
            "export",
            "export_stablehlo",
            "find_calls",
            "functionize",
            "inline",
            "optimize",
            "optimize_with",
            "overlay",
            "policy",
            "recover",
            "report",
            "sources",
            "structural_hash",
            "write_overlay",
            "write_report",
        ]
    )
    for name in modelprov.__all__:
        assert hasattr(modelprov, name), name


def test_policy_module_names() -> None:
    for name in [
        "union",
        "join",
        "common_prefix",
        "stack_traces",
        "min",
        "max",
        "from_output",
        "first",
        "drop",
        "error_on_conflict",
        "value_scoped",
        "Policies",
        "DEFAULT_POLICIES",
        "MergeContext",
    ]:
        assert name in modelprov.policy.__all__, name
