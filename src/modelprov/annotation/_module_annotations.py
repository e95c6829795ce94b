"""Per-module user annotations: store, collect, validate and inherit them.

``annotate(module, {...})`` keeps validated metadata on a module (plain str, bool, int and
float values); ``annotations(model)`` collects it per module path, typed as given;
``normalize_annotations`` formats values as the strings ONNX metadata and the export
pipeline carry; ``effective_annotations`` says what reaches an op computed inside a module
(ancestors' keys, a child's own value winning).
"""

import difflib
from collections.abc import Collection, Mapping

import torch

from modelprov.annotation._values import AnnotationValue, annotation_value, check_key, format_value
from modelprov.core._scoping import ancestors_outer_first
from modelprov.errors import AnnotationError, keyword

__all__ = [
    "annotate",
    "annotations",
    "effective_annotations",
    "module_paths",
    "normalize_annotations",
]

# The instance attribute that holds a module's annotations (see ``annotate``).
_ATTRIBUTE = "_modelprov_annotations"


def annotate(module: torch.nn.Module, metadata: Mapping[str, AnnotationValue]) -> torch.nn.Module:
    """Attach ``metadata`` to ``module`` and return ``module``.

    Values are validated and stored as plain Python values (see ``annotation_value``: a numpy
    or 0-d torch scalar becomes its float or int) before anything is stored, so a bad value
    leaves the module untouched. Repeated calls merge; later keys win.

    The mapping lives in a private instance attribute set with ``object.__setattr__``, not in a
    ``WeakKeyDictionary``: it is not a parameter, buffer or submodule, so ``forward``,
    ``state_dict()`` and ``parameters()`` are unchanged, and it travels with the module through
    ``copy.deepcopy`` and ``pickle`` (which quantization and export flows use), where a side
    table keyed by object identity would silently lose it.
    """
    if not isinstance(module, torch.nn.Module):
        raise AnnotationError(
            f"annotate() needs a torch.nn.Module, got {type(module).__name__}; "
            "pass the layer object (e.g. model.fc1), not its name or output"
        )
    typed = _typed_mapping(metadata, where="annotate()")
    merged = {**_stored(module), **typed}
    object.__setattr__(module, _ATTRIBUTE, merged)
    return module


def annotations(model: torch.nn.Module) -> dict[str, dict[str, AnnotationValue]]:
    """Return every module's annotations keyed by qualified name ('' is the root).

    Values are typed as given to ``annotate`` (``4`` stays an int, ``2.5`` a float).
    A module reachable under several names (shared) is listed under each of them. Modules
    without annotations are left out.
    """
    if not isinstance(model, torch.nn.Module):
        raise AnnotationError(f"annotations() needs a torch.nn.Module, got {type(model).__name__}")
    return {
        path: dict(stored)
        for path, module in model.named_modules(remove_duplicate=False)
        if (stored := _stored(module))
    }


def module_paths(model: torch.nn.Module) -> list[str]:
    """Return the qualified names of all modules of ``model`` ('' is the root), shared ones too."""
    if not isinstance(model, torch.nn.Module):
        raise AnnotationError(f"module_paths() needs a torch.nn.Module, got {type(model).__name__}")
    return [path for path, _ in model.named_modules(remove_duplicate=False)]


def normalize_annotations(
    mapping: Mapping[str, Mapping[str, object]], known_paths: Collection[str]
) -> dict[str, dict[str, str]]:
    """Validate ``{module_path: {key: value}}`` and return it with values formatted as strings.

    Raises AnnotationError for a path not in ``known_paths`` (naming close matches), a bad key or
    an unsupported value. Paths with an empty mapping are dropped.
    """
    given = keyword("annotations", "annotations")
    if not isinstance(mapping, Mapping):
        raise AnnotationError(
            f"{given} must be a mapping {{module_path: {{key: value}}}}, "
            f"got {type(mapping).__name__}"
        )
    known = known_paths if isinstance(known_paths, set | frozenset) else set(known_paths)
    normalized: dict[str, dict[str, str]] = {}
    for path, metadata in mapping.items():
        if not isinstance(path, str) or path not in known:
            raise AnnotationError(f"{given}: {_unknown_path_message(path, known)}")
        if not isinstance(metadata, Mapping):
            raise AnnotationError(
                f"{given}, module {path!r}: must be a mapping {{key: value}}, "
                f"got {type(metadata).__name__}"
            )
        formatted = _format_mapping(metadata, where=f"{given}, module {path!r}")
        if formatted:
            normalized[path] = formatted
    return normalized


def effective_annotations(
    normalized: Mapping[str, Mapping[str, str]], module_path: str
) -> dict[str, str]:
    """Return the annotations that apply to an op computed by the module at ``module_path``.

    Keys of every ancestor apply ('' first, then 'a', 'a.b', ... up to ``module_path`` itself);
    a descendant's value for a key overrides its ancestor's.
    """
    effective: dict[str, str] = {}
    for path in ancestors_outer_first(module_path):
        effective.update(normalized.get(path, {}))
    return effective


def _format_mapping(metadata: Mapping[str, object], *, where: str) -> dict[str, str]:
    typed = _typed_mapping(metadata, where=where)
    return {key: format_value(value, key) for key, value in typed.items()}


def _typed_mapping(metadata: Mapping[str, object], *, where: str) -> dict[str, AnnotationValue]:
    if not isinstance(metadata, Mapping):
        raise AnnotationError(
            f"{where}: metadata must be a mapping {{key: value}}, got {type(metadata).__name__}"
        )
    typed: dict[str, AnnotationValue] = {}
    for key, value in metadata.items():
        try:
            checked = check_key(key)
            typed[checked] = annotation_value(value, key=checked)
            format_value(typed[checked], key=checked)  # an int too large to write fails here
        except AnnotationError as err:
            raise AnnotationError(f"{where}: {err}") from None
    return typed


def _stored(module: torch.nn.Module) -> dict[str, AnnotationValue]:
    stored: dict[str, AnnotationValue] = module.__dict__.get(_ATTRIBUTE, {})
    return stored


def _unknown_path_message(path: object, known: Collection[str]) -> str:
    candidates = [p for p in known if p]
    close = difflib.get_close_matches(str(path), candidates, n=3) if isinstance(path, str) else []
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return (
        f"no module at path {path!r} in the model ({len(known)} module paths, '' is the root)."
        f"{hint} Module paths are the names from model.named_modules()."
    )
