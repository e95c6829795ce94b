"""Output targets, temporary names and data-file names (see tests/bad_inputs/test_outputs.py
for the commands writing onto special files, permissions, faults mid-write and namespaces)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelprov._model_io import _output
from modelprov._model_io._output import (
    data_file_name,
    data_files_of,
    keep_metadata,
    output_target,
    remove_stale_temporaries,
    temporary_beside,
    temporary_name,
    writer_tag,
)
from modelprov.errors import OutputError


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(done.stdout)


def test_a_fifo_a_socket_a_folder_and_links_to_them_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    folder = tmp_path / "folder"
    folder.mkdir()
    for path, kind in [(fifo, "FIFO"), (sock, "socket"), (folder, "directory")]:
        link = tmp_path / f"link-to-{path.name}"
        link.symlink_to(path)
        for each in (path, link):
            with pytest.raises(OutputError, match=kind) as refused:
                output_target(each)
            assert str(refused.value).startswith(f"{each}")
    server.close()


def test_a_link_to_a_file_resolves_to_its_final_target(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "model.onnx"
    target.write_bytes(b"x")
    (tmp_path / "hop").symlink_to(target)
    (tmp_path / "link").symlink_to(tmp_path / "hop")
    assert output_target(tmp_path / "link") == str(target)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "real" / "new.onnx")
    assert output_target(dangling) == str(tmp_path / "real" / "new.onnx")
    (tmp_path / "nowhere").symlink_to(tmp_path / "missing" / "x.onnx")
    with pytest.raises(OutputError, match="does not exist"):
        output_target(tmp_path / "nowhere")
    assert output_target(tmp_path / "plain.onnx") == str(tmp_path / "plain.onnx")


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_a_device_is_refused(tmp_path: Path) -> None:
    device = tmp_path / "null"
    os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))
    with pytest.raises(OutputError, match="character device"):
        output_target(device)


@settings(max_examples=60, deadline=None)
@given(
    st.text(st.characters(codec="utf-8", exclude_characters="/\0"), min_size=1, max_size=255)
    | st.integers(1, 255).map(lambda n: "m" * n)
)
def test_temporary_names_fit_the_name_limit_and_match_their_pattern(base: str) -> None:
    folder = os.getcwd()
    limit = _output.name_max(folder)
    base = os.fsencode(base)[:limit].decode("utf-8", "ignore") or "m"
    for name in (temporary_name(folder, base), temporary_name(folder, base, ".data")):
        assert len(os.fsencode(name)) <= limit
        assert _output._TEMPORARY.match(name), name
    assert len(os.fsencode(temporary_name(folder))) <= limit


def test_a_240_character_output_gets_a_temporary_and_data_names(tmp_path: Path) -> None:
    target = str(tmp_path / ("m" * 235 + ".onnx"))
    with temporary_beside(target) as temporary:
        assert os.path.exists(temporary)
    assert data_file_name(target) == os.path.basename(target) + ".data"
    Path(target + ".data").write_bytes(b"old")
    other = data_file_name(target)
    assert len(os.fsencode(other)) <= _output.name_max(str(tmp_path))
    assert other.startswith("m" * 200) and other.endswith(".data") and other != "m.onnx.data"
    Path(tmp_path / other).write_bytes(b"new")
    assert data_files_of(target) == [target + ".data", str(tmp_path / other)]


def test_only_this_namespaces_temporaries_of_gone_writers_are_stale(tmp_path: Path) -> None:
    gone, tag = _dead_pid(), writer_tag()
    other = "0" * 8 if tag != "0" * 8 else "1" * 8
    ours = tmp_path / f".m.onnx.modelprov-{gone}-{tag}-{'a' * 16}.tmp"
    theirs = tmp_path / f".m.onnx.modelprov-{gone}-{other}-{'b' * 16}.tmp"
    their_folder = tmp_path / f".modelprov-{gone}-{other}-{'c' * 16}"
    old_format = tmp_path / f".m.onnx.modelprov-{gone}-{'d' * 16}.tmp"
    for path in (ours, theirs, old_format):
        path.write_bytes(b"partial")
    their_folder.mkdir()
    assert remove_stale_temporaries(str(tmp_path)) == [str(ours)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [theirs.name, their_folder.name, old_format.name]
    )


def test_writer_tag_changes_with_the_pid_namespace() -> None:
    code = "from modelprov._model_io._output import writer_tag; print(writer_tag())"
    here = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert here.stdout.strip() == writer_tag()
    try:
        there = subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except FileNotFoundError:
        pytest.skip("no unshare")
    if there.returncode != 0:
        pytest.skip(f"unshare refused: {there.stderr.strip()[:100]}")
    assert len(there.stdout.strip()) == 8 and there.stdout.strip() != writer_tag()


def test_keep_metadata_copies_mode_and_owner(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    old.write_bytes(b"")
    new.write_bytes(b"")
    os.chmod(old, 0o640)
    if os.geteuid() == 0:
        os.chown(old, 65534, 65534)
    keep_metadata(str(new), os.stat(old))
    assert new.stat().st_mode & 0o7777 == 0o640
    assert (new.stat().st_uid, new.stat().st_gid) == (old.stat().st_uid, old.stat().st_gid)
    keep_metadata(str(new), None)  # a new file: nothing to copy
    assert new.stat().st_mode & 0o7777 == 0o640
