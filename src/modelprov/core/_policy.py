"""Merge policies: how the values of one metadata key combine when sources meet.

A policy is any callable ``policy(values, ctx) -> str | None``. ``values`` are the
non-empty values of one key on the sources of a node, in source order (the order the
sources first appear in the unoptimized export); ``ctx`` says which of them come from
sources whose outputs the node produces. Returning ``None`` drops the key.

Policies are values: pass a :class:`Policies` to every function that merges. There is no
module-level switch. Built-in policies can also be declared in a JSON file
(:func:`load_policies`, :func:`dump_policies`; the command line's ``--policies``).

This module is a face: the built-ins are defined and registered once in
``core/_builtin_policies.py``, ``Policies`` lives in ``core/_policies.py`` and the file
format in ``core/_policy_file.py``.
"""

from __future__ import annotations

from modelprov._base._public_names import pin_module
from modelprov.core import _builtin_policies
from modelprov.core._builtin_policies import *  # noqa: F403
from modelprov.core._policies import DEFAULT_POLICIES, Policies
from modelprov.core._policy_file import dump_policies, load_policies, parse_policies
from modelprov.core._policy_registry import MergeContext, Policy

__all__ = [
    "DEFAULT_POLICIES",
    "MergeContext",
    "Policies",
    "Policy",
    "dump_policies",
    "load_policies",
    "parse_policies",
    *_builtin_policies.__all__,
]

pin_module(globals(), __all__, "modelprov.policy")
