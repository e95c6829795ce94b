"""The torchax import shim: placeholders only during the import, everything restored after."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from modelprov.errors import MissingDependencyError
from modelprov.stablehlo.lower import _torchax_compat
from modelprov.stablehlo.lower._torchax_compat import (
    RemovedOverload,
    _tolerate_removed_named_overloads,
    import_torchax,
)

pytest.importorskip("jax")


def _lookup(packet: str, overload: str) -> object:
    return getattr(getattr(torch.ops.aten, packet), overload)


def test_named_overloads_resolve_to_placeholders_only_inside_the_block() -> None:
    original = torch._ops.OpOverloadPacket.__getattr__
    with pytest.raises(AttributeError):
        _lookup("prod", "dim_Dimname")
    with _tolerate_removed_named_overloads():
        placeholder = _lookup("prod", "dim_Dimname")
        assert isinstance(placeholder, RemovedOverload)
        assert isinstance(_lookup("norm", "names_ScalarOpt_dim"), RemovedOverload)
        assert _lookup("prod", "dim_int") is torch.ops.aten.prod.dim_int  # real ones unchanged
        with pytest.raises(AttributeError):
            _lookup("prod", "no_such_overload")  # only named-tensor names are tolerated
        with pytest.raises(RuntimeError, match="does not exist"):
            placeholder()
    assert torch._ops.OpOverloadPacket.__getattr__ is original
    assert "dim_Dimname" not in vars(torch.ops.aten.prod)  # never cached on the packet
    with pytest.raises(AttributeError):
        _lookup("prod", "dim_Dimname")


def test_restores_getattr_when_the_block_raises() -> None:
    original = torch._ops.OpOverloadPacket.__getattr__
    with pytest.raises(ValueError), _tolerate_removed_named_overloads():
        raise ValueError("boom")
    assert torch._ops.OpOverloadPacket.__getattr__ is original


def test_real_import_in_a_fresh_interpreter() -> None:
    # A fresh interpreter: the plain import fails on torch 2.13, the shim's import works,
    # and afterwards the lookups that failed before fail again.
    script = textwrap.dedent(
        """
        import sys, torch
        from modelprov.stablehlo.lower._torchax_compat import import_torchax, removed_overloads_seen
        original = torch._ops.OpOverloadPacket.__getattr__
        try:
            import torchax
            print("PLAIN_IMPORT_OK")
        except AttributeError as exc:
            print("PLAIN_IMPORT_FAILED", "Dimname" in str(exc))
        for name in [m for m in sys.modules if m == "torchax" or m.startswith("torchax.")]:
            del sys.modules[name]
        torchax = import_torchax()
        assert torchax.export.exported_program_to_stablehlo
        assert torch._ops.OpOverloadPacket.__getattr__ is original
        try:
            torch.ops.aten.prod.dim_Dimname
            print("LOOKUP_AFTER_OK")
        except AttributeError:
            print("LOOKUP_AFTER_FAILS")
        print("SEEN", len(removed_overloads_seen()))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.split("\n")
    if "PLAIN_IMPORT_OK" not in lines:  # torchax fixed upstream: the shim is then a no-op
        assert "PLAIN_IMPORT_FAILED True" in lines
        assert any(line.startswith("SEEN ") and line != "SEEN 0" for line in lines)
    assert "LOOKUP_AFTER_FAILS" in lines


@pytest.mark.parametrize("missing", ["torchax", "jax"])
def test_missing_dependency_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    # None in sys.modules makes ``import`` raise ImportError; torchax goes too (it needs jax).
    for root in {missing, "torchax"}:
        for name in [m for m in sys.modules if m == root or m.startswith(root + ".")]:
            monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.setitem(sys.modules, root, None)
    with pytest.raises(MissingDependencyError, match=r'pip install "modelprov\[stablehlo\]"'):
        import_torchax()
    assert _torchax_compat.INSTALL_HINT == 'pip install "modelprov[stablehlo]"'


def test_installed_torchax_is_the_tested_version() -> None:
    torchax = import_torchax()
    assert torchax.__version__ == _torchax_compat.TESTED_TORCHAX
