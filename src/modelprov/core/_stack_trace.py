"""Stack traces as torch.onnx writes them: frames, merged form, path hygiene.

torch.onnx writes ``pkg.torch.onnx.stack_trace`` as Python-traceback frames, outermost
first, joined by newlines::

    File "/src/model.py", line 30, in forward
        y = self.block(x)
      File "/src/block.py", line 12, in forward
        k = k.transpose(1, 2)

Several distinct traces merge into one value that shows the frames all of them share once
and then each trace's own frames (see docs/metadata-format.md, "merged stack traces").
The merged form parses back into the exact original traces.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import re
import sysconfig
from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "Frame",
    "TraceOptions",
    "UserCode",
    "display_location",
    "display_path",
    "format_merged_traces",
    "frames",
    "innermost_frame",
    "rewrite_paths",
    "split_chunks",
    "split_merged_traces",
    "user_frame",
]

UserCode = Sequence[str] | Callable[[str], bool]
"""Which files are the user's own code: folders (roots) or a predicate on a file path."""

_FRAME_START = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+)(?:, in (?P<func>.*))?$')
_MERGED_HEADER = re.compile(
    r"^\[modelprov: (?P<count>\d+) stack traces; (?P<shared>\d+) shared lines\]$"
)
_TRACE_HEADER = re.compile(r"^\[modelprov: trace (?P<index>\d+) of (?P<count>\d+)\]$")
_ELIDED = re.compile(r"^\[modelprov: \d+ of \d+ stack traces elided .*\]$")


@dataclasses.dataclass(frozen=True)
class Frame:
    """One frame of a stack trace."""

    file: str
    line: int
    function: str
    code: str


@dataclasses.dataclass(frozen=True)
class TraceOptions:
    """Stack-trace hygiene applied when modelprov writes metadata.

    Attributes:
        root: rewrite file paths under this folder relative to it (``model.py``
            instead of ``/home/me/proj/model.py``).
        strip_paths: keep only each file's base name (wins over ``root``).
        max_bytes: per-node budget for a merged ``stack_trace`` value; beyond it whole
            traces are elided with a visible marker. The sources table stays complete.
        user_code: which frames are the user's own code, as folders (roots) or a predicate
            on a file path; ``Source.file``/``line`` and StableHLO's ``modelprov.stack``
            name the innermost such frame. ``None``: every file outside torch, modelprov,
            the standard library and site-packages (see ``user_frame``).
    """

    root: str | None = None
    strip_paths: bool = False
    max_bytes: int | None = None
    user_code: UserCode | None = None

    def __post_init__(self) -> None:
        if self.max_bytes is not None and self.max_bytes < 256:
            raise ValueError(f"TraceOptions.max_bytes must be at least 256, got {self.max_bytes}")


def _frame_groups(lines: Sequence[str]) -> list[list[str]]:
    """Splits trace lines into groups, each starting at a ``File "..."`` line."""
    groups: list[list[str]] = []
    for line in lines:
        if _FRAME_START.match(line) or not groups:
            groups.append([line])
        else:
            groups[-1].append(line)
    return groups


def frames(trace: str) -> list[Frame]:
    """Parses a trace into frames, outermost first; text that is no frame is skipped."""
    result: list[Frame] = []
    for group in _frame_groups(trace.split("\n")):
        match = _FRAME_START.match(group[0])
        if match is None:
            continue
        code = "\n".join(line.strip() for line in group[1:]).strip()
        result.append(Frame(match["file"], int(match["line"]), (match["func"] or "").strip(), code))
    return result


@functools.lru_cache(maxsize=4096)
def innermost_frame(trace: str) -> Frame | None:
    """The frame that made the operation: the last one of the (first) trace (cached:
    the layers of a model share their traces)."""
    traces = split_merged_traces(trace)
    if not traces:
        return None
    parsed = frames(traces[0])
    return parsed[-1] if parsed else None


def _package_folder(name: str) -> str | None:
    """The folder of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.abspath(next(iter(spec.submodule_search_locations)))


@functools.cache
def _library_folders() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Absolute folders of (torch; the standard library; site-packages)."""
    paths = sysconfig.get_paths()
    stdlib = [paths.get("stdlib"), paths.get("platstdlib")]
    site = [paths.get("purelib"), paths.get("platlib")]

    def absolute(folders: Iterable[str | None]) -> tuple[str, ...]:
        return tuple(sorted({os.path.abspath(p) for p in folders if p}))

    return absolute([_package_folder("torch")]), absolute(stdlib), absolute(site)


@functools.cache
def _own_folder() -> tuple[str, ...]:
    """modelprov's own folder."""
    folder = _package_folder("modelprov")
    return (folder,) if folder else ()


def _under(path: str, folders: Iterable[str]) -> bool:
    return any(
        path == folder or path.startswith(folder.rstrip(os.sep) + os.sep) for folder in folders
    )


_SITE_PACKAGES = re.compile(r"[\\/](?:site|dist)-packages[\\/]")


@functools.lru_cache(maxsize=8192)
def _is_core_library(path: str) -> bool:
    """torch, the standard library and ``<frozen ...>``-style pseudo files."""
    if path.startswith("<"):
        return True
    if not os.path.isabs(path):
        return False
    absolute = os.path.abspath(path)
    torch_folder, stdlib, site = _library_folders()
    if _under(absolute, torch_folder):
        return True
    # A virtualenv's stdlib folder holds its site-packages: those are no standard library.
    return _under(absolute, stdlib) and not (_SITE_PACKAGES.search(path) or _under(absolute, site))


@functools.lru_cache(maxsize=8192)
def _is_library(path: str) -> bool:
    """Core libraries, modelprov and anything installed (site-packages, dist-packages)."""
    if _is_core_library(path) or _SITE_PACKAGES.search(path):
        return True
    _, _, site = _library_folders()
    return os.path.isabs(path) and _under(os.path.abspath(path), _own_folder() + site)


def _user_predicate(user_code: UserCode | None) -> Callable[[str], bool]:
    if user_code is None:
        return lambda path: not _is_library(path)
    if callable(user_code):
        return user_code
    if isinstance(user_code, str):
        raise TypeError("user_code takes a sequence of folders or a predicate, not one string")
    roots = tuple(os.path.abspath(root) for root in user_code)
    return lambda path: _under(os.path.abspath(path), roots)


def user_frame(trace: str | Sequence[Frame], user_code: UserCode | None = None) -> Frame | None:
    """The innermost frame of the user's own code: where the user's model made the operation.

    ``trace`` is a stack trace (plain or merged: its first trace counts) or parsed frames,
    outermost first. By default frames of torch, modelprov, the standard library and
    site-packages are skipped, so a ``nn.Linear`` call points at the line calling it, not
    at ``torch/nn/modules/linear.py``. ``user_code`` (folders or a predicate on the file
    path) says instead which files are the user's. When no frame is the user's, the
    innermost frame outside torch and the standard library is taken (e.g.
    ``transformers``' modelling code), and failing that the innermost frame.
    """
    if isinstance(trace, str):
        if user_code is None:
            return _default_user_frame(trace)
        return _innermost_user_frame(_first_trace_frames(trace), user_code)
    return _innermost_user_frame(list(trace), user_code)


@functools.lru_cache(maxsize=16384)
def _default_user_frame(trace: str) -> Frame | None:
    """:func:`user_frame` of a trace with the default rule; the ops of a model's repeated
    layers share their traces, so each distinct trace is parsed once."""
    return _innermost_user_frame(_first_trace_frames(trace), None)


def _first_trace_frames(trace: str) -> list[Frame]:
    traces = split_merged_traces(trace)
    return frames(traces[0]) if traces else []


def _innermost_user_frame(parsed: list[Frame], user_code: UserCode | None) -> Frame | None:
    if not parsed:
        return None
    is_user = _user_predicate(user_code)
    for frame in reversed(parsed):
        if is_user(frame.file):
            return frame
    for frame in reversed(parsed):
        if not _is_core_library(frame.file):
            return frame
    return parsed[-1]


def display_path(path: str, root: str | None = None) -> str:
    """A file path shortened for display: relative to ``root`` (default: the current
    folder) when inside it, ``<site-packages>/…`` for installed packages, else unchanged."""
    if not os.path.isabs(path):
        return path
    folder = os.path.abspath(root if root is not None else os.getcwd())
    if _under(path, [folder]) and folder != os.sep:
        return os.path.relpath(path, folder)
    match = _SITE_PACKAGES.search(path)
    if match:
        return "<site-packages>/" + path[match.end() :]
    _, _, site = _library_folders()
    for folder in site:
        if _under(path, [folder]):
            return "<site-packages>/" + os.path.relpath(path, folder)
    return path


def display_location(location: str, root: str | None = None) -> str:
    """A ``file:line`` location with its file shortened by :func:`display_path`."""
    file, colon, line = location.rpartition(":")
    if not colon or not line.isdigit():
        return display_path(location, root)
    return f"{display_path(file, root)}:{line}"


def split_chunks(trace: str) -> tuple[str, ...]:
    """Splits a value into substrings at frame starts; ``"".join`` gives it back exactly."""
    return _chunks(trace)


@functools.lru_cache(maxsize=4096)
def _chunks(trace: str) -> tuple[str, ...]:
    # Cached: the layers of a model repeat the same traces.
    lines = trace.split("\n")
    chunks: list[str] = []
    for index, group in enumerate(_frame_groups(lines)):
        text = "\n".join(group)
        chunks.append(text if index == 0 else "\n" + text)
    return tuple(chunks) if chunks else (trace,)


def split_merged_traces(value: str) -> list[str]:
    """The distinct traces a value holds: one for a plain trace, all for a merged one.

    A value is read as merged only when it has exactly the merged form (a header, its
    shared lines, then sections ``trace 1 of N`` .. ``trace N of N``, or fewer followed by
    the elision marker); anything else, e.g. a user's trace that happens to start with a
    header-like line, is one plain trace, kept whole.
    """
    lines = value.split("\n")
    header = _MERGED_HEADER.match(lines[0]) if lines else None
    if header is None:
        return [value] if value else []
    parsed = _parse_merged(lines, int(header["count"]), int(header["shared"]))
    return [value] if parsed is None else parsed


def _parse_merged(lines: list[str], count: int, shared_count: int) -> list[str] | None:
    """The traces of a merged value, or None when ``lines`` are not exactly that form."""
    if count < 1 or shared_count > len(lines) - 2:
        return None
    shared = lines[1 : 1 + shared_count]
    sections: list[list[str]] = []
    elided = False
    for line in lines[1 + shared_count :]:
        if elided:
            return None
        section = _TRACE_HEADER.match(line)
        if section is not None:
            if int(section["count"]) != count or int(section["index"]) != len(sections) + 1:
                return None
            sections.append([])
        elif _ELIDED.match(line):
            elided = True
        elif sections:
            sections[-1].append(line)
        else:
            return None
    if not sections or len(sections) > count or (len(sections) < count and not elided):
        return None
    return ["\n".join(_unescape(shared + section)) for section in sections]


_HEADER_LIKE = re.compile(r"^\\*\[modelprov:")


def _escape(lines: Iterable[str]) -> list[str]:
    """Lines of a trace as written inside the merged form: a line that could be taken for
    one of its headers gets one more leading backslash (removed again when parsed)."""
    return ["\\" + line if _HEADER_LIKE.match(line) else line for line in lines]


def _unescape(lines: Iterable[str]) -> list[str]:
    return [
        line[1:] if line.startswith("\\") and _HEADER_LIKE.match(line) else line for line in lines
    ]


def _shared_frame_lines(traces: Sequence[Sequence[Sequence[str]]]) -> int:
    """Number of leading lines made of whole frames that every trace shares."""
    count = 0
    for groups in zip(*traces, strict=False):
        if all(group == groups[0] for group in groups):
            count += 1
        else:
            break
    # Every trace keeps at least one frame of its own, so each section says where it is.
    count = min(count, *(len(groups) - 1 for groups in traces))
    return sum(len(group) for group in traces[0][:count])


def format_merged_traces(traces: Iterable[str], *, max_bytes: int | None = None) -> str:
    """Merges traces: distinct ones in first-seen order, shared outer frames shown once.

    Already-merged values are flattened first, so merging is associative and idempotent.
    """
    if max_bytes is None:
        return _format_merged_cached(tuple(traces))
    return _format_merged(traces, max_bytes)


@functools.lru_cache(maxsize=512)
def _format_merged_cached(traces: tuple[str, ...]) -> str:
    # Cached: the layers of a model fuse the same code, so their merged traces repeat.
    return _format_merged(traces, None)


def _format_merged(traces: Iterable[str], max_bytes: int | None) -> str:
    distinct: list[str] = []
    seen: set[str] = set()
    for value in traces:
        for trace in _split_merged_cached(value):
            if trace not in seen:
                seen.add(trace)
                distinct.append(trace)
    # One trace is written verbatim, unless it would read back as several (it has the
    # merged form once its escapes are removed): then as a merged value of one trace.
    if len(distinct) <= 1 and not (distinct and distinct[0] and _misread(distinct[0])):
        single = distinct[0] if distinct else ""
        if max_bytes is None or len(single.encode()) <= max_bytes:
            return single
        return _elide_frames(single, max_bytes)
    grouped = [_trace_layout(trace)[0] for trace in distinct]
    shared_lines = _shared_frame_lines(grouped)
    all_lines = [_trace_layout(trace)[1] for trace in distinct]
    out = [f"[modelprov: {len(distinct)} stack traces; {shared_lines} shared lines]"]
    out.extend(all_lines[0][:shared_lines])
    sections = [
        "\n".join([f"[modelprov: trace {i} of {len(distinct)}]", *lines[shared_lines:]])
        for i, lines in enumerate(all_lines, start=1)
    ]
    text = "\n".join([*out, *sections])
    if max_bytes is None or len(text.encode()) <= max_bytes:
        return text
    return _elide(out, sections, max_bytes)


def _misread(trace: str) -> bool:
    return list(_split_merged_cached(trace)) != [trace]


@functools.lru_cache(maxsize=4096)
def _split_merged_cached(value: str) -> tuple[str, ...]:
    """:func:`split_merged_traces`, cached: the layers of a model repeat their traces."""
    return tuple(split_merged_traces(value))


@functools.lru_cache(maxsize=4096)
def _trace_layout(trace: str) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """A trace's frame groups and its lines as written in the merged form (cached)."""
    lines = trace.split("\n")
    groups = tuple(tuple(group) for group in _frame_groups(lines))
    return groups, tuple(_escape(lines))


def _elide(head: list[str], sections: list[str], max_bytes: int) -> str:
    """Keeps whole sections in order while they fit, then says how many were elided.

    When not even the shared frames and one section fit, falls back to one line per trace
    (its innermost frame), as many as fit. The result never exceeds ``max_bytes``.
    """
    kept: list[str] = []
    size = len("\n".join(head).encode())
    marker_size = 120
    for section in sections:
        extra = len(section.encode()) + 1
        if size + extra + marker_size > max_bytes:
            break
        kept.append(section)
        size += extra
    elided = len(sections) - len(kept)
    marker = (
        f"[modelprov: {elided} of {len(sections)} stack traces elided to fit "
        f"{max_bytes} bytes; modelprov.sources() returns them all]"
    )
    if kept:
        return "\n".join([*head, *kept, marker])
    return _innermost_only(head, sections, max_bytes)


def _elide_frames(trace: str, max_bytes: int) -> str:
    """One long trace: keeps the innermost whole frames that fit, says how many went."""
    groups = _frame_groups(trace.split("\n"))
    kept: list[list[str]] = []
    size = 130
    for group in reversed(groups):
        extra = len("\n".join(group).encode()) + 1
        if size + extra > max_bytes:
            break
        kept.insert(0, group)
        size += extra
    if not kept:
        return _innermost_only(["[]"], ["[]\n" + trace], max_bytes)
    marker = (
        f"[modelprov: {len(groups) - len(kept)} outer frames elided to fit {max_bytes} bytes; "
        "modelprov.sources() returns the whole trace]"
    )
    return "\n".join([marker, *(line for group in kept for line in group)])


def _innermost_only(head: list[str], sections: list[str], max_bytes: int) -> str:
    """One ``File "...", line N`` line per trace, within the budget."""
    shared = "\n".join(head[1:])
    lines = []
    for section in sections:
        body = section.split("\n", 1)[1] if "\n" in section else ""
        frame_lines = [line.strip() for line in (shared + "\n" + body).split("\n")]
        frame = [line for line in frame_lines if _FRAME_START.match(line)]
        lines.append(frame[-1] if frame else "(no frame)")
    header = (
        f"[modelprov: {len(sections)} stack traces, innermost frames only, to fit "
        f"{max_bytes} bytes; modelprov.sources() returns them all]"
    )
    out = [header]
    size = len(header.encode())
    for index, line in enumerate(lines):
        rest = f"[modelprov: {len(lines) - index} more]"
        if size + len(line.encode()) + 1 + len(rest) + 1 > max_bytes:
            out.append(rest)
            break
        out.append(line)
        size += len(line.encode()) + 1
    return "\n".join(out)[:max_bytes]


def rewrite_paths(trace: str, options: TraceOptions) -> str:
    """Rewrites the file paths of a trace's frames by the options (root or strip)."""
    if options.root is None and not options.strip_paths:
        return trace
    root = os.path.abspath(options.root) if options.root is not None else None

    def replace(match: re.Match[str]) -> str:
        path = match["file"]
        if options.strip_paths:
            new = os.path.basename(path)
        else:
            assert root is not None
            absolute = os.path.abspath(path) if os.path.isabs(path) else path
            inside = absolute == root or absolute.startswith(root.rstrip(os.sep) + os.sep)
            new = os.path.relpath(absolute, root) if inside else path
        return match.group(0).replace(f'File "{path}"', f'File "{new}"', 1)

    return "\n".join(
        _FRAME_START.sub(replace, line) if _FRAME_START.match(line) else line
        for line in trace.split("\n")
    )
