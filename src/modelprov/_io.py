"""Reading and writing model files safely.

Reads fail with errors that name the file and say what is wrong; writes are atomic (a
temporary file in the destination folder, then a rename), so a failure never leaves a
half-written model behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from modelprov.errors import InvalidModelError

__all__ = ["PROTOBUF_LIMIT", "atomic_write_bytes", "load_model_proto", "save_model"]

PROTOBUF_LIMIT = 2**31 - 1
"""Largest serialized protobuf; bigger models are written with external data."""


def _check_path(path: str | os.PathLike[str]) -> str:
    name = os.fspath(path)
    if not os.path.exists(name):
        raise InvalidModelError(f"{name}: no such file; check the path")
    if os.path.isdir(name):
        raise InvalidModelError(f"{name}: is a directory, not an ONNX model file")
    if os.path.getsize(name) == 0:
        raise InvalidModelError(f"{name}: the file is empty, not an ONNX model")
    return name


def load_model_proto(path: str | os.PathLike[str], *, load_weights: bool = True) -> onnx.ModelProto:
    """Loads an ONNX file, with external weights only when ``load_weights``.

    Raises InvalidModelError naming the file when it is missing, empty, not ONNX,
    truncated, or when its external data cannot be found.
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
    if load_weights:
        try:
            onnx.load_external_data_for_model(proto, os.path.dirname(os.path.abspath(name)))
        except (OSError, ValueError) as error:
            raise InvalidModelError(
                f"{name}: its external data cannot be loaded: {error}; keep the data files "
                "beside the model"
            ) from None
    return proto


@contextlib.contextmanager
def _temporary_beside(path: str, suffix: str = "") -> Iterator[str]:
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(folder):
        raise InvalidModelError(f"{path}: the output folder {folder} does not exist")
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=f".{os.path.basename(path)}.", suffix=suffix + ".tmp", dir=folder
        )
    except OSError as error:
        raise InvalidModelError(
            f"{path}: cannot write in {folder}: {error.strerror or error}"
        ) from None
    os.close(handle)
    try:
        yield temporary
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Writes ``data`` to ``path`` atomically."""
    name = os.fspath(path)
    with _temporary_beside(name) as temporary:
        with open(temporary, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, name)


def save_model(
    model: ir.Model, path: str | os.PathLike[str], *, external_data: bool | None = None
) -> None:
    """Saves atomically; weights go to ``<name>.data`` when asked or when over 2 GB."""
    name = os.fspath(path)
    size = sum(
        tensor.const_value.nbytes
        for tensor in model.graph.initializers.values()
        if tensor.const_value is not None
    )
    if not external_data and size < PROTOBUF_LIMIT // 2:
        atomic_write_bytes(name, ir.to_proto(model).SerializeToString())
        return
    data_name = os.path.basename(name) + ".data"
    folder = os.path.dirname(os.path.abspath(name))
    with tempfile.TemporaryDirectory(prefix=".modelprov-", dir=folder) as staging:
        staged = os.path.join(staging, os.path.basename(name))
        ir.save(model, staged, external_data=data_name)
        os.replace(os.path.join(staging, data_name), os.path.join(folder, data_name))
        os.replace(staged, name)
