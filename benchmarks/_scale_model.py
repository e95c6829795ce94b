"""A Llama-config ONNX graph of any size (transformers LlamaConfig, tiny hidden size, random
weights, torch.onnx dynamo export without optimization), cached on disk; used by
benchmarks/bench_scale.py.

Run alone to (re)build the files: ``python -m benchmarks._scale_model --layers 260 --out DIR``.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import warnings

__all__ = ["build_scale_model"]


def _llama(layers: int) -> tuple[object, tuple[object, ...]]:
    import torch
    from transformers import LlamaConfig, LlamaModel

    class _Hidden(torch.nn.Module):  # type: ignore[misc]
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids, use_cache=False, return_dict=False)[0]  # type: ignore[no-any-return]

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=64,
        use_cache=False,
    )
    return _Hidden(LlamaModel(config)).eval(), (torch.randint(0, 128, (1, 8)),)


def build_scale_model(layers: int, folder: str) -> str:
    """Path of ``llama_<layers>.onnx`` in ``folder``, exported once and then reused."""
    path = os.path.join(folder, f"llama_{layers}.onnx")
    if os.path.exists(path):
        return path
    import torch

    os.makedirs(folder, exist_ok=True)
    logging.getLogger("torch").setLevel(logging.ERROR)
    module, args = _llama(layers)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, args, dynamo=True, optimize=False, verbose=False)
    assert program is not None
    partial = path + ".partial"
    program.save(partial)
    os.replace(partial, path)
    print(f"exported {layers} layers in {time.perf_counter() - started:.0f} s -> {path}")
    return path


def main() -> None:
    """Builds the cached file."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=260)
    parser.add_argument("--out", default=os.path.join("/tmp", "modelprov-scale"))
    args = parser.parse_args()
    build_scale_model(args.layers, args.out)


if __name__ == "__main__":
    main()
