"""The key-scoping rules both backends share."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from modelprov.core._policy import Policies, from_output
from modelprov.core._scoping import (
    Applied,
    KeyScoping,
    ancestors_outer_first,
    applies_to_output,
    module_scoped_keys,
    output_index,
    value_scoped_keys,
    within,
)


def test_within_counts_a_module_and_its_submodules_only() -> None:
    assert within("encoder.layer.0", "encoder")
    assert within("encoder", "encoder")
    assert within("anything", "")
    assert not within("encoder2", "encoder")
    assert not within("encoder", "encoder.layer")


def test_ancestors_run_from_the_root_to_the_module_itself() -> None:
    assert ancestors_outer_first("") == [""]
    assert ancestors_outer_first("a.b.c") == ["", "a", "a.b", "a.b.c"]


def test_a_per_output_key_applies_only_to_what_makes_that_output() -> None:
    outputs = ("getitem", "getitem_1")
    assert output_index("custom.output1.max") == 1
    assert output_index("custom.max") is None
    assert applies_to_output("custom.output1.max", outputs, {"getitem_1", "other"})
    assert not applies_to_output("custom.output1.max", outputs, {"getitem"})
    assert applies_to_output("custom.max", outputs, {"getitem"})
    assert applies_to_output("custom.output5.max", outputs, ())
    assert applies_to_output("custom.output1.max", None, ())


def test_keys_split_into_module_and_value_scoped_by_policy() -> None:
    policies = Policies({"custom.range": from_output})
    declared = {"custom.range": "[0, 1]", "custom.owner": "team-a"}
    assert value_scoped_keys(declared, policies) == {"custom.range": "[0, 1]"}
    assert module_scoped_keys({"m": declared}, policies) == {"m": {"custom.owner": "team-a"}}


def test_the_rules_load_no_torch() -> None:
    code = "import sys, modelprov.core._scoping; print('torch' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[2])}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert result.stdout.strip() == "False"


def test_the_innermost_declaring_module_wins_each_key_of_a_source() -> None:
    policies = Policies({"custom.max": from_output})
    scoping = KeyScoping(
        {
            "": {"custom.owner": "root"},
            "block": {"custom.max": "2", "custom.owner": "block"},
            "block.inner": {"custom.max": "1"},
        },
        policies,
    )
    asked: list[str] = []

    def leaves(module: str) -> bool:
        asked.append(module)
        return True

    applied = scoping.source_keys("block.inner", leaves=leaves, produces_output=False)
    assert applied == {
        "custom.owner": Applied("block", from_output=False),
        "custom.max": Applied("1", from_output=True),
    }
    assert asked == ["block", "block.inner"]  # only modules declaring value-scoped keys
    # The output leaves the inner module only: the outer module's value-scoped key is not its.
    only_inner = scoping.source_keys("block.inner", leaves=lambda module: module == "block.inner")
    assert only_inner["custom.max"] == Applied("1", from_output=True)
    inside = scoping.source_keys("block", leaves=lambda module: False)
    assert inside == {"custom.owner": Applied("block", from_output=True)}


def test_a_per_output_key_of_an_inner_module_lets_the_outer_value_through() -> None:
    policies = Policies({"custom.*": from_output})
    scoping = KeyScoping(
        {"a": {"custom.output0.max": "9"}, "a.b": {"custom.output0.max": "1"}},
        policies,
        {"a": ("x",), "a.b": ("y",)},
    )
    applied = scoping.source_keys("a.b", leaves=lambda module: True, made={"x"})
    assert applied == {"custom.output0.max": Applied("9", from_output=True)}
