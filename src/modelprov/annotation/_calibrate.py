"""Calibration: per-layer output statistics, measured with forward hooks on the leaf modules.

``calibrate(model, batches)`` runs ``model`` under ``torch.no_grad()`` on every batch and returns,
per leaf module path (a module without children), ``{prefix + stat: value}`` (floats; the
histogram a JSON text) ready for ``normalize_annotations`` and export, which write each float
in its string form (``repr``) where the format holds strings. Statistics cover the module's
floating-point output tensors (float16, bfloat16, float32, float64) over all batches; integer,
bool and complex
tensors and non-tensor outputs are ignored. Leaf modules that never produced a floating-point
element are left out. A module shared under several paths is reported under each path, with
the statistics of all its calls.

Statistics (Python floats, finite; ``-0.0`` is reported as ``0.0``):

- ``min``, ``max``: exact; the element itself as a Python float, which is (and whose string
  form reads back to) the float32 (or float16/bfloat16/float64) value bit for bit.
- ``mean``, ``std``: over all elements of all batches, accumulated in float64 with Chan's
  parallel update of (count, mean, M2); ``std`` is the population deviation (ddof=0).
- ``pQ`` (``p1``, ``p50``, ``p99.9``, any 0 <= Q <= 100): ``numpy.percentile`` (linear
  interpolation) of a uniform random sample of at most ``sample_size`` elements (default 2**18),
  drawn by giving each element a seeded random key and keeping the smallest keys. Exact (equal
  to ``numpy.percentile`` of all elements) while the module produced at most ``sample_size``
  elements in total; beyond that the rank error has standard deviation
  sqrt(q(1-q)/sample_size) (~6e-5 for p99.9 at the default size). Deterministic for a
  given ``seed``. Memory: about 16 bytes per kept element per statistic stream (4 MiB at the
  default size, up to twice that while merging), only when a percentile or histogram is asked.
- ``histogram``: JSON ``{"format": "modelprov.histogram", "version": 1, "edges": [65 floats],
  "counts": [64 ints], "total": N, "sampled": S}``: 64 equal-width bins from the exact ``min`` to
  the exact ``max`` (one bin when they are equal; the last bin includes ``max``), counting the
  same sample as the percentiles. Exact when ``sampled == total``; otherwise multiply the
  counts by ``total / sampled`` for an estimate. One pass, bounded memory, no second run.

When a module yields more than one tensor (e.g. ``nn.LSTM``'s ``output, (h, c)``), the plain
keys cover all its floating-point tensors together, and ``prefix + "output{i}." + stat`` covers
the i-th tensor, counting every tensor leaf depth first (tuple/list order, dict insertion order).

The model is never changed: calibrate refuses a model with modules in training mode (train-mode
BatchNorm would update its running statistics and Dropout would randomize the outputs, so the
ranges would not be those of the exported model) and never switches modes itself; it restores
any buffer a module changes in eval mode, and always removes its hooks.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import torch

from modelprov.annotation._random_batches import CallArguments
from modelprov.annotation._values import annotation_value, check_key
from modelprov.errors import AnnotationError, MissingDependencyError
from modelprov.keys import CALIBRATION_PREFIX, HISTOGRAM_FORMAT

__all__ = ["DEFAULT_SAMPLE_SIZE", "HISTOGRAM_BINS", "calibrate"]

_LOGGER = logging.getLogger(__name__)

DEFAULT_SAMPLE_SIZE: Final = 2**18
HISTOGRAM_BINS: Final = 64
HISTOGRAM_VERSION: Final = 1

_NAMED_STATS: Final = ("min", "max", "mean", "std", "histogram")
_PERCENTILE = re.compile(r"p(\d{1,3}(?:\.\d+)?)")
_PROGRESS_MIN_BATCHES: Final = 10
# Large outputs are summarized in slices so the float64 copy and sampling keys stay bounded.
_SLICE_ELEMENTS: Final = 1 << 22


def calibrate(
    model: torch.nn.Module,
    batches: Iterable[Any],
    *,
    stats: Sequence[str] = ("min", "max"),
    prefix: str = CALIBRATION_PREFIX,
    progress: bool | None = None,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    seed: int = 0,
) -> dict[str, dict[str, float | str]]:
    """Measure output statistics of every leaf module of ``model`` over ``batches``.

    A batch is a Tensor (one positional argument), a tuple/list (positional arguments), a
    mapping (keyword arguments) or a ``CallArguments(args, kwargs)`` (both). ``stats`` names
    the statistics (see the module docstring); the result maps leaf module path to
    ``{prefix + stat: float}`` (``histogram``: JSON text). ``progress`` shows a rich
    progress bar on stderr (None: only on a terminal and for more than 10 batches).
    """
    if not isinstance(model, torch.nn.Module):
        raise AnnotationError(f"calibrate() needs a torch.nn.Module, got {type(model).__name__}")
    wanted = _parse_stats(stats)
    if not isinstance(prefix, str):
        raise AnnotationError(f"prefix must be a str, got {type(prefix).__name__}")
    for name in wanted:
        check_key(prefix + name)
    if isinstance(batches, torch.Tensor | Mapping | str):
        raise AnnotationError(
            f"batches is a single {type(batches).__name__}; pass an iterable of batches, "
            "e.g. [x] or a DataLoader"
        )
    if not isinstance(sample_size, int) or sample_size < 1:
        raise AnnotationError(f"sample_size must be a positive int, got {sample_size!r}")
    _require_eval_mode(model)

    sampling = any(name == "histogram" or name.startswith("p") for name in wanted)
    moments = any(name in ("mean", "std") for name in wanted)
    summarizer = _Summarizer(
        moments=moments,
        sample_size=sample_size if sampling else 0,
        generator=torch.Generator().manual_seed(seed),
    )
    leaves = _leaf_modules(model)
    collected = {key: _ModuleStats(sample_size) for key in leaves}
    run = _RunState()
    saved_buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    handles = []
    try:
        for key, (module, paths) in leaves.items():
            hook = _make_hook(collected[key], paths[0], run, summarizer)
            handles.append(module.register_forward_hook(hook))
        total = len(batches) if isinstance(batches, Sized) else None
        with torch.no_grad(), _progress_bar(progress, total) as advance:
            for index, batch in enumerate(batches):
                run.batch_index = index
                _run_batch(model, batch, index)
                advance()
        if run.batch_index < 0:
            raise AnnotationError("batches is empty; calibrate() needs at least one batch")
    finally:
        for handle in handles:
            handle.remove()
        _restore_buffers(model, saved_buffers)

    result: dict[str, dict[str, float | str]] = {}
    for key, (_, paths) in leaves.items():
        entries = collected[key].entries(wanted, prefix)
        for path in paths if entries else ():
            result[path] = dict(entries)
    return result


# --------------------------------------------------------------------------- statistics


@dataclass
class _Chunk:
    """What one output tensor contributes: its extremes, moments and sampled elements."""

    count: int
    minimum: float
    maximum: float
    mean: float = 0.0
    m2: float = 0.0
    values: torch.Tensor | None = None  # float64, at most sample_size elements
    keys: torch.Tensor | None = None  # float64 uniform random keys, one per value


@dataclass
class _Summarizer:
    moments: bool
    sample_size: int
    generator: torch.Generator

    def summarize(self, flat: torch.Tensor) -> _Chunk:
        """Summarize a non-empty 1-d floating-point tensor."""
        low, high = torch.aminmax(flat)
        chunk = _Chunk(count=flat.numel(), minimum=_zero(low.item()), maximum=_zero(high.item()))
        if not (math.isfinite(chunk.minimum) and math.isfinite(chunk.maximum)):
            return chunk
        if not (self.moments or self.sample_size):
            return chunk
        wide = flat.to(device="cpu", dtype=torch.float64)
        if self.moments:
            var, mean = torch.var_mean(wide, correction=0)
            chunk.mean, chunk.m2 = float(mean.item()), float(var.item()) * chunk.count
        if self.sample_size:
            keys = torch.rand(wide.numel(), generator=self.generator, dtype=torch.float64)
            chunk.values, chunk.keys = _smallest_keys(wide, keys, self.sample_size)
        return chunk


@dataclass
class _Stream:
    """Running statistics of one stream of tensors (a module's outputs, or one of them)."""

    sample_size: int
    count: int = 0
    minimum: float = math.inf
    maximum: float = -math.inf
    mean: float = 0.0
    m2: float = 0.0
    held: int = 0
    values: list[torch.Tensor] = field(default_factory=list)
    keys: list[torch.Tensor] = field(default_factory=list)

    def add(self, chunk: _Chunk) -> None:
        total = self.count + chunk.count
        delta = chunk.mean - self.mean
        self.mean += delta * chunk.count / total
        self.m2 += chunk.m2 + delta * delta * self.count * chunk.count / total
        self.count = total
        self.minimum = min(self.minimum, chunk.minimum)
        self.maximum = max(self.maximum, chunk.maximum)
        if chunk.values is not None and chunk.keys is not None:
            self.values.append(chunk.values)
            self.keys.append(chunk.keys)
            self.held += chunk.values.numel()
            if self.held > 2 * self.sample_size:
                self._compact()

    def _compact(self) -> None:
        if not self.values:
            return
        values, keys = _smallest_keys(
            torch.cat(self.values), torch.cat(self.keys), self.sample_size
        )
        self.values, self.keys, self.held = [values], [keys], values.numel()

    def sample(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        self._compact()
        return self.values[0].numpy() if self.values else np.zeros(0)

    def value(self, name: str) -> float | str:
        """The statistic as a float (``histogram``: its JSON text); non-finite ones raise."""
        if name == "histogram":
            return self._histogram()
        if name == "min":
            number = self.minimum
        elif name == "max":
            number = self.maximum
        elif name == "mean":
            number = _zero(self.mean)
        elif name == "std":
            number = math.sqrt(max(self.m2, 0.0) / self.count)
        else:
            quantile = float(np.percentile(self.sample(), float(name[1:])))
            number = _zero(min(max(quantile, self.minimum), self.maximum))
        return float(annotation_value(number))

    def _histogram(self) -> str:
        sample = self.sample()
        if self.minimum == self.maximum:
            edges = np.array([self.minimum, self.maximum])
            counts = np.array([sample.size])
        else:
            edges = np.linspace(self.minimum, self.maximum, HISTOGRAM_BINS + 1)
            counts, _ = np.histogram(sample, bins=edges)
        document = {
            "format": HISTOGRAM_FORMAT,
            "version": HISTOGRAM_VERSION,
            "edges": [_zero(float(e)) for e in edges],
            "counts": [int(c) for c in counts],
            "total": self.count,
            "sampled": int(sample.size),
        }
        return json.dumps(document, separators=(",", ":"), allow_nan=False)


@dataclass
class _ModuleStats:
    """Statistics of one leaf module: all its tensors together, and each tensor output alone."""

    sample_size: int
    together: _Stream = field(init=False)
    per_output: list[_Stream] = field(default_factory=list)
    most_tensors: int = 0

    def __post_init__(self) -> None:
        self.together = _Stream(self.sample_size)

    def entries(self, wanted: Sequence[str], prefix: str) -> dict[str, float | str]:
        if self.together.count == 0:
            return {}
        entries = {prefix + name: self.together.value(name) for name in wanted}
        if self.most_tensors > 1:
            for index, stream in enumerate(self.per_output):
                if stream.count:
                    for name in wanted:
                        entries[f"{prefix}output{index}.{name}"] = stream.value(name)
        return entries


def _smallest_keys(
    values: torch.Tensor, keys: torch.Tensor, size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the ``size`` values with the smallest keys: a uniform sample without replacement."""
    if values.numel() <= size:
        return values, keys
    kept = torch.topk(keys, size, largest=False, sorted=False).indices
    return values[kept], keys[kept]


def _zero(value: float) -> float:
    """Map -0.0 to 0.0 (and leave every other float alone)."""
    return value + 0.0


# --------------------------------------------------------------------------- running


@dataclass
class _RunState:
    batch_index: int = -1


def _make_hook(
    stats: _ModuleStats, path: str, run: _RunState, summarizer: _Summarizer
) -> Callable[[torch.nn.Module, Any, Any], None]:
    def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
        tensors = _tensor_leaves(output)
        stats.most_tensors = max(stats.most_tensors, len(tensors))
        while len(tensors) > 1 and len(stats.per_output) < len(tensors):
            stats.per_output.append(_Stream(stats.sample_size))
        for index, tensor in enumerate(tensors):
            if not tensor.is_floating_point() or tensor.numel() == 0:
                continue
            for part in tensor.detach().reshape(-1).split(_SLICE_ELEMENTS):
                chunk = summarizer.summarize(part)
                if not (math.isfinite(chunk.minimum) and math.isfinite(chunk.maximum)):
                    which = f"output {index}" if len(tensors) > 1 else "output"
                    raise AnnotationError(
                        f"module {path!r} ({type(module).__name__}) produced NaN or infinite "
                        f"values in its {which} on batch {run.batch_index}; calibration needs "
                        "finite outputs: check the batch and the weights"
                    )
                stats.together.add(chunk)
                if len(tensors) > 1:
                    stats.per_output[index].add(chunk)

    return hook


def _tensor_leaves(output: Any) -> list[torch.Tensor]:
    """Tensors in ``output``, depth first through tuples, lists and dicts."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, tuple | list):
        return [t for item in output for t in _tensor_leaves(item)]
    if isinstance(output, Mapping):
        return [t for item in output.values() for t in _tensor_leaves(item)]
    return []


def _run_batch(model: torch.nn.Module, batch: Any, index: int) -> None:
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    if isinstance(batch, torch.Tensor):
        args = (batch,)
    elif isinstance(batch, tuple | list):
        args = tuple(batch)
    elif isinstance(batch, Mapping):
        kwargs = dict(batch)
    elif isinstance(batch, CallArguments):
        args, kwargs = tuple(batch.args), dict(batch.kwargs)
    else:
        raise AnnotationError(
            f"batch {index} is a {type(batch).__name__}; a batch is a Tensor, a tuple/list of "
            "positional arguments, a dict of keyword arguments or a CallArguments(args, kwargs)"
        )
    try:
        model(*args, **kwargs)
    except AnnotationError:
        raise
    except Exception as err:
        raise AnnotationError(
            f"batch {index}: the model failed on it: {type(err).__name__}: {err}"
        ) from err


def _leaf_modules(model: torch.nn.Module) -> dict[int, tuple[torch.nn.Module, list[str]]]:
    """Leaf modules by identity, each with every path it is reachable under."""
    leaves: dict[int, tuple[torch.nn.Module, list[str]]] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        if next(module.children(), None) is None:
            leaves.setdefault(id(module), (module, []))[1].append(path)
    return leaves


def _parse_stats(stats: Sequence[str]) -> list[str]:
    names = [stats] if isinstance(stats, str) else list(stats)
    if not names:
        raise AnnotationError(f"stats is empty; choose from {_valid_stats_text()}")
    for name in names:
        if not isinstance(name, str) or not _is_stat(name):
            raise AnnotationError(f"unknown statistic {name!r}; valid: {_valid_stats_text()}")
    return list(dict.fromkeys(names))


def _is_stat(name: str) -> bool:
    if name in _NAMED_STATS:
        return True
    match = _PERCENTILE.fullmatch(name)
    return match is not None and 0.0 <= float(match.group(1)) <= 100.0


def _valid_stats_text() -> str:
    return (
        ", ".join(repr(s) for s in _NAMED_STATS) + ", and percentiles 'p0'..'p100' (e.g. 'p99.9')"
    )


def _require_eval_mode(model: torch.nn.Module) -> None:
    training = [path or "<root>" for path, m in model.named_modules() if m.training]
    if training:
        shown = ", ".join(repr(p) for p in training[:3]) + (", ..." if len(training) > 3 else "")
        raise AnnotationError(
            f"calibrate() needs the model in eval mode, but {len(training)} module(s) are in "
            f"training mode ({shown}): train-mode BatchNorm would update its running statistics "
            "and Dropout would randomize outputs, so the ranges would not match the exported "
            "model. Call model.eval() first."
        )


def _restore_buffers(model: torch.nn.Module, saved: Mapping[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            before = saved.get(name)
            if before is not None and not torch.equal(buffer, before):
                _LOGGER.warning("buffer %r changed during calibration; restored it", name)
                buffer.copy_(before)


@contextmanager
def _progress_bar(progress: bool | None, total: int | None) -> Iterator[Callable[[], None]]:
    if progress is None:
        progress = sys.stderr.isatty() and total is not None and total > _PROGRESS_MIN_BATCHES
        if progress and not _has_rich():
            progress = False
    if not progress:
        yield lambda: None
        return
    if not _has_rich():
        raise MissingDependencyError(
            "calibrate(progress=True) needs rich; "
            "install it with: pip install 'modelprov[progress]'"
        )
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("calibrating", total=total)
        yield lambda: bar.advance(task)


def _has_rich() -> bool:
    try:
        import rich.progress  # noqa: F401
    except ImportError:
        return False
    return True
