"""Reading and writing model files safely.

Reads fail with errors that name the file and say what is wrong; external data is checked
before anything is read (its files must lie inside the model's folder, exist and be long
enough) and loaded only when asked. Writes are atomic (a temporary file in the destination
folder, then a rename), external data included, so a failure never leaves a half-written
model behind; where outputs may go, how temporaries are named and cleaned up, and how a
model and its data file are replaced as a pair is :mod:`modelprov._model_io._output`'s job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from modelprov._base._input_files import open_regular
from modelprov._model_io._external_tensors import embedded_external_tensors, set_base_dir
from modelprov._model_io._output import (
    check_replaceable,
    data_file_name,
    data_files_of,
    folder_lock,
    keep_metadata,
    output_target,
    remove_stale_temporaries,
    stat_of,
    temporary_beside,
    temporary_name,
)
from modelprov._model_io._proto_walk import attribute_graphs
from modelprov._model_io._proto_write import write_message
from modelprov.errors import InvalidModelError, OutputError, UsageError

__all__ = [
    "PROTOBUF_LIMIT",
    "ExternalData",
    "atomic_write_bytes",
    "check_output",
    "external_data_of",
    "load_model",
    "load_model_proto",
    "model_from_proto",
    "remove_stale_temporaries",
    "save_model",
    "set_base_dir",
]

PROTOBUF_LIMIT = 2**31 - 1
"""Largest serialized protobuf; bigger models are written with external data."""


@dataclasses.dataclass(frozen=True)
class ExternalData:
    """One tensor stored outside the model file: where its bytes are."""

    tensor: str
    location: str
    path: str
    """The data file, resolved against the model's folder (symlinks followed)."""
    offset: int
    length: int | None


def _check_path(path: str | os.PathLike[str]) -> str:
    name = os.fspath(path)
    if not os.path.exists(name):
        raise InvalidModelError(f"{name}: no such file; check the path")
    if os.path.isdir(name):
        raise InvalidModelError(f"{name}: is a directory, not an ONNX model file")
    if not os.path.isfile(name):
        raise InvalidModelError(f"{name}: is a FIFO, device or socket, not an ONNX model file")
    if os.path.getsize(name) == 0:
        raise InvalidModelError(f"{name}: the file is empty, not an ONNX model")
    return name


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        yield from _node_tensors(node)


def _node_tensors(node: onnx.NodeProto) -> Iterator[onnx.TensorProto]:
    for attribute in node.attribute:
        if attribute.HasField("t"):
            yield attribute.t
        yield from attribute.tensors
        for sparse in [attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []:
            yield sparse.values
            yield sparse.indices
        for sparse in attribute.sparse_tensors:
            yield sparse.values
            yield sparse.indices
        for subgraph in attribute_graphs(attribute):
            yield from _graph_tensors(subgraph)


def _all_tensors(proto: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    yield from _graph_tensors(proto.graph)
    for function in proto.functions:
        for node in function.node:
            yield from _node_tensors(node)


def _inside(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


def external_data_of(proto: onnx.ModelProto, model_path: str) -> list[ExternalData]:
    """Every tensor of the model (graph, subgraphs, functions) stored as external data.

    Raises InvalidModelError naming the tensor and its location when the location is
    absolute or leads outside the model's folder (``..``, symlinks), when its file is
    missing, or when the file is shorter than offset + length. Reads no tensor data.
    """
    folder = os.path.realpath(os.path.dirname(os.path.abspath(model_path)))
    result: list[ExternalData] = []
    sizes: dict[str, int] = {}
    for tensor in _all_tensors(proto):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        entries = {entry.key: entry.value for entry in tensor.external_data}
        location = entries.get("location", "")
        where = f"{model_path}: tensor {tensor.name!r} stores its data in {location!r}"
        if not location:
            raise InvalidModelError(f"{where}, which names no file; the model is corrupt")
        if not isinstance(location, str) or "\0" in location:
            raise InvalidModelError(
                f"{where}, which is no file name (a NUL byte or invalid UTF-8); the model is "
                "corrupt: fix the tensor's location"
            )
        if os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location[:3]:
            raise InvalidModelError(
                f"{where}, an absolute path; external data must lie inside the model's "
                f"folder {folder} (refused for safety)"
            )
        resolved = os.path.realpath(os.path.join(folder, location))
        if not _inside(resolved, folder):
            raise InvalidModelError(
                f"{where}, which leads outside the model's folder {folder} (to {resolved}); "
                "refused for safety: move the data file beside the model"
            )
        try:
            offset = int(entries.get("offset", "0"))
            length = int(entries["length"]) if "length" in entries else None
        except ValueError:
            raise InvalidModelError(
                f"{where} with a non-integer offset or length; the model is corrupt"
            ) from None
        if offset < 0 or (length is not None and length < 0):
            raise InvalidModelError(f"{where} with a negative offset or length")
        if resolved not in sizes:
            if not os.path.isfile(resolved):
                raise InvalidModelError(
                    f"{where}, which does not exist ({resolved}); keep the data files "
                    "beside the model"
                )
            sizes[resolved] = os.path.getsize(resolved)
        end = offset + (length or 0)
        if end > sizes[resolved]:
            raise InvalidModelError(
                f"{where} at bytes {offset}..{end}, but the file holds only "
                f"{sizes[resolved]} bytes; the data file is truncated or belongs to "
                "another model"
            )
        result.append(ExternalData(tensor.name, location, resolved, offset, length))
    return result


def load_model_proto(path: str | os.PathLike[str], *, load_weights: bool = True) -> onnx.ModelProto:
    """Loads an ONNX file, with external weights only when ``load_weights``.

    Raises InvalidModelError naming the file when it is missing, empty, not ONNX,
    truncated, or when its external data is unsafe or cannot be found (checked before
    any weight is read, also when ``load_weights`` is false).
    """
    name = _check_path(path)
    try:
        with open(name, "rb") as stream:
            data = stream.read()
        proto = onnx.ModelProto()
        proto.ParseFromString(data)
    except DecodeError as error:
        raise InvalidModelError(
            f"{name}: not a readable ONNX model (protobuf parse failed: {error}); the file "
            "may be truncated or of another format"
        ) from None
    except OSError as error:
        raise InvalidModelError(f"{name}: cannot be read: {error.strerror or error}") from None
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise InvalidModelError(
            f"{name}: parses as protobuf but is no ONNX model (no graph or ir_version); "
            "the file may be truncated or of another format"
        )
    external = external_data_of(proto, name)
    if load_weights and external:
        try:
            onnx.load_external_data_for_model(proto, os.path.dirname(os.path.abspath(name)))
        except (OSError, ValueError) as error:
            raise InvalidModelError(
                f"{name}: its external data cannot be loaded: {error}; keep the data files "
                "beside the model"
            ) from None
    return proto


def load_model(path: str | os.PathLike[str], *, load_weights: bool = False) -> ir.Model:
    """Loads an ONNX file as an onnx_ir.Model, checked like :func:`load_model_proto`.

    Without ``load_weights`` external tensors stay on disk (``ir.ExternalTensor``,
    memory-mapped only when read), so graph-only work never reads the weights.
    """
    name = os.fspath(path)
    return model_from_proto(load_model_proto(name, load_weights=load_weights), name)


def model_from_proto(proto: onnx.ModelProto, path: str | os.PathLike[str]) -> ir.Model:
    """``proto`` as an onnx_ir.Model whose external tensors are read beside ``path``."""
    from modelprov._model_io._proto_check import is_plain_and_valid, read_proto

    base_dir = os.path.dirname(os.path.abspath(path))
    if is_plain_and_valid(proto):
        # Checked in one walk: no repeated key to merge, no subgraph, and only
        # initializers can be external tensors.
        model = read_proto(proto, os.fspath(path), check=False)
        for value in model.graph.initializers.values():
            if isinstance(value.const_value, ir.ExternalTensor):
                value.const_value.base_dir = base_dir
        return model
    from modelprov._model_io._duplicate_keys import has_duplicate_keys, merge_duplicate_keys

    if has_duplicate_keys(proto):  # the proto is the caller's: merge in a copy
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)
        merge_duplicate_keys(copy)
        proto = copy
    model = read_proto(proto, os.fspath(path))
    set_base_dir(model, base_dir)
    return model


def check_output(
    output: str | os.PathLike[str],
    inputs: Sequence[str | os.PathLike[str]],
    *,
    in_place: bool = False,
    allow_with: str | None = None,
) -> str:
    """Checks, before any work, that ``output`` can be written and overwrites no input.

    The output (a regular file or a missing path, symlinks followed, see
    :mod:`modelprov._model_io._output`) and its ``.data`` file must not be an input or one of the
    inputs' external data files unless ``in_place``; the output folder must exist and be
    writable. ``allow_with`` names the caller's flag that allows overwriting an input (the
    error advises it), None when there is none. Returns the output path.
    """
    name = os.fspath(output)
    target = output_target(name)
    written = [target, target + ".data"]
    read: list[str] = []
    for each in inputs:
        read.append(os.fspath(each))
        with contextlib.suppress(InvalidModelError):
            read.extend(item.path for item in external_data_of(_quick_proto(each), os.fspath(each)))
    for path in written:
        for source in read:
            if (
                not in_place
                and os.path.exists(path)
                and os.path.exists(source)
                and os.path.samefile(path, source)
            ):
                allow = f"pass {allow_with} to allow it, or " if allow_with else ""
                raise UsageError(
                    f"{name}: the output would overwrite the input {source}; {allow}"
                    "choose another output"
                )
    with temporary_beside(target):
        pass
    return name


def _quick_proto(path: str | os.PathLike[str]) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    with contextlib.suppress(OSError, DecodeError), open_regular(path) as stream:
        proto.ParseFromString(stream.read())
    return proto


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Writes ``data`` to ``path`` atomically (a regular file or a missing path; a symlink's
    target is written; the replaced file's mode and owner are kept)."""
    _atomic_write(path, lambda stream: stream.write(data))


def _atomic_write(
    path: str | os.PathLike[str],
    write: Callable[[BinaryIO], object],
    *,
    after_commit: Callable[[str], None] | None = None,
) -> None:
    """Writes to ``path`` atomically what ``write`` writes to the stream it is given;
    ``after_commit(target)`` runs once the new file is in place, under the folder's lock."""
    name = os.fspath(path)
    target = output_target(name)
    old = stat_of(target)
    with temporary_beside(target) as temporary:
        try:
            with open(temporary, "wb") as stream:
                write(stream)
                stream.flush()
                os.fsync(stream.fileno())
            keep_metadata(temporary, old)
            with folder_lock(os.path.dirname(os.path.abspath(target))):
                check_replaceable(target)
                os.replace(temporary, target)
                if after_commit is not None:
                    after_commit(target)
        except OSError as error:
            if isinstance(error, OutputError):
                raise
            raise OutputError(f"{name}: cannot be written: {error.strerror or error}") from None


def _tensors_of(model: ir.Model) -> Iterable[ir.TensorProtocol]:
    for graph in (model.graph, *model.graph.subgraphs()):
        for value in graph.initializers.values():
            if value.const_value is not None:
                yield value.const_value


def _remove_data_files(target: str, keep: str | None = None) -> None:
    """Removes the data files of ``target`` the model just committed there does not read
    (``keep``, a base name, is the one it reads)."""
    for path in data_files_of(target):
        if os.path.basename(path) != keep:
            with contextlib.suppress(OSError):
                os.unlink(path)


def save_model(
    model: ir.Model, path: str | os.PathLike[str], *, external_data: bool | None = None
) -> list[str]:
    """Saves atomically; weights go to ``<name>.data`` when asked or when over 2 GB.
    Returns the files written: the model, then its data file when there is one.

    Weights still on disk (``ir.ExternalTensor``, e.g. from :func:`load_model`) are always
    copied into ``<name>.data`` (attribute tensors, a Constant's value, are embedded): a
    reference to the input's data file would break when the output lives elsewhere, and
    would tie the output to the input. While ``<name>.data`` exists (the model being
    replaced reads it, e.g. ``--in-place``), the new data goes to ``<name>.<token>.data``:
    the model file's rename commits both, and the old data file is removed after it.
    """
    name = os.fspath(path)
    tensors = list(_tensors_of(model))
    size = sum(tensor.nbytes for tensor in tensors)
    on_disk = any(isinstance(tensor, ir.ExternalTensor) for tensor in tensors)
    if external_data is None:
        external_data = on_disk or size >= PROTOBUF_LIMIT // 2
    with embedded_external_tensors(model, limit=PROTOBUF_LIMIT // 2):
        if not external_data:
            proto = ir.to_proto(model)
            # Written in pieces: the whole serialized model never sits beside the proto.
            _atomic_write(
                name, lambda stream: write_message(proto, stream), after_commit=_remove_data_files
            )
            return [name]
        return _save_with_data_file(model, name)


def _save_with_data_file(model: ir.Model, name: str) -> list[str]:
    """The model and its new data file, written and then committed as a pair."""
    target = output_target(name)
    folder = os.path.dirname(os.path.abspath(target))
    old_data = data_files_of(target)
    old_model = stat_of(target)
    data_name = data_file_name(target)
    data_path = os.path.join(folder, data_name)
    remove_stale_temporaries(folder)
    staging = os.path.join(folder, temporary_name(folder))
    try:
        os.mkdir(staging)
        try:
            staged = os.path.join(staging, os.path.basename(target))
            ir.save(model, staged, external_data=data_name)
            staged_data = os.path.join(staging, data_name)
            has_data = os.path.exists(staged_data)
            for each in [staged, staged_data] if has_data else [staged]:
                with open(each, "rb") as stream:
                    os.fsync(stream.fileno())
            keep_metadata(staged, old_model)
            if has_data:
                keep_metadata(staged_data, stat_of(old_data[0]) if old_data else old_model)
            with folder_lock(folder):
                _commit(staged, target, staged_data if has_data else None, data_path)
                _remove_data_files(target, keep=data_name if has_data else None)
            written = [name]
            if has_data:
                written.append(os.path.join(os.path.dirname(name), data_name))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as error:
        if isinstance(error, OutputError):
            raise
        raise OutputError(f"{name}: cannot write in {folder}: {error.strerror or error}") from None
    return written


def _commit(staged: str, target: str, staged_data: str | None, data_path: str) -> None:
    """Moves the new data file in (under a name no model reads yet), then the model: its
    rename is the one step that switches to the new pair."""
    check_replaceable(target)
    if staged_data is None:
        os.replace(staged, target)
        return
    if os.path.lexists(data_path):
        raise OutputError(
            f"{target}: another write made {data_path} meanwhile; nothing was replaced, write again"
        )
    os.replace(staged_data, data_path)
    try:
        os.replace(staged, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(data_path)
        raise
