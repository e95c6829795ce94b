"""Every FX node's output of a torch program, produced one by one as the program runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from modelprov._torch._compat import flatten_inputs

__all__ = ["run_fx_nodes"]


class _Recorder(torch.fx.Interpreter):  # type: ignore[misc]
    """An Interpreter that hands each wanted node's tensor output to a callback; values are
    freed after their last use as usual, so only the live set is held."""

    def __init__(
        self,
        module: torch.fx.GraphModule,
        wanted: frozenset[str],
        seen: Callable[[str, np.ndarray | tuple[np.ndarray | None, ...]], None],
    ) -> None:
        super().__init__(module, garbage_collect_values=True)
        self._wanted = wanted
        self._seen = seen

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if n.name in self._wanted:
            if isinstance(result, torch.Tensor):
                self._seen(n.name, _to_numpy(result))
            elif isinstance(result, tuple | list):
                self._seen(
                    n.name,
                    tuple(_to_numpy(r) if isinstance(r, torch.Tensor) else None for r in result),
                )
        return result


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    detached = tensor.detach()
    if detached.is_complex() or detached.dtype == torch.bfloat16:
        detached = detached.to(torch.float32)
    return np.asarray(detached.cpu().contiguous().numpy())


def run_fx_nodes(
    program: torch.export.ExportedProgram,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None,
    wanted: Iterable[str],
    seen: Callable[[str, np.ndarray | tuple[np.ndarray | None, ...]], None],
    *,
    module: torch.fx.GraphModule | None = None,
) -> None:
    """Runs ``program`` eagerly on ``args``/``kwargs`` and calls ``seen(node_name, value)``
    for each node of ``wanted`` as soon as its output exists (in the program's order); a node
    returning several tensors gives a tuple (None for elements that are not tensors).
    ``module``: ``program.module()`` with other weights, to run in its place."""
    module = program.module() if module is None else module
    flat = flatten_inputs(tuple(args), dict(kwargs or {}))
    recorder = _Recorder(module, frozenset(wanted), seen)  # type: ignore[arg-type]
    with torch.no_grad():
        recorder.run(*flat)
