"""A zoo of small transformers architectures: is every claimed source one the node computes?

Usage: python -m benchmarks.bench_zoo [--models bert,llama] [--tools onnxsim,ort-fusions]
                                      [--cache DIR]

Each model (2 layers or stages, tiny widths, random weights, built from a transformers
config) is exported once with torch.onnx (dynamo, optimize=False; cached under --cache),
then optimized with modelprov.optimize, and recovered after onnxsim, onnxslim,
onnxoptimizer and onnxruntime (basic, extended) run on the optimized model. For each
step it prints recall (FX nodes, source lines, module paths), the number of sources that lie
outside their node's value region (tests/_regions.py: values, not names), the number of
wrong claims, the number of nodes claiming an operation only through a constant shared with
it, the number of nodes marked as keeping a source for recall only, and the time of the
modelprov step, then totals per step.

More steps on the optimized model (what modelprov.export gives):
- ``functionize/aten`` and ``functionize/module``: every call's sources in its region, and
  equal to the union of the sources its inlined body gets, for the call and for each
  ``find_calls`` result (tests/_call_checks.py; wrong = calls or find_calls results naming
  other sources than they compute);
- ``inline/aten`` and ``inline/module`` (inline of that output): every node matched by
  values to an original node carries exactly that node's sources (wrong = nodes that do not);
- ``recover/ort-fusions`` (``--tools ort-fusions``): onnxscript's
  ``rewriter.ort_fusions.optimize_for_ort`` (clear_metadata=True; com.microsoft fusions such
  as SkipLayerNormalization, MultiHeadAttention, RotaryEmbedding, BiasGelu), then recover.
  Its output runs in onnxruntime's CPU provider at every optimization level (no special
  session options). It renames initializer tensors of the model it is given, and the tensors
  of ``onnx_ir.from_proto(proto)`` are views of ``proto``'s TensorProtos, so running it on
  ``from_proto(original)`` renames ``original``'s initializers too (Llama: ``val_128`` becomes
  ``val_0_2``, and a Slice reads a value nothing produces). It therefore gets its own
  deserialized copy, and recover reads another. One model family does not run after it:
  GPT-2 (its Conv1D is an addmm on a 2-D view). onnxscript 0.7.2's ``mha2`` fusion replaces
  the attention up to the Reshape to [batch*seq, hidden] by a MultiHeadAttention, whose
  output is 3-D, and the following Gemm keeps reading it; onnxruntime refuses that Gemm at
  every optimization level (rank 3 where 2 is expected: at session creation when graph
  optimizations are on, at run time when they are off). That is onnxscript's
  rewrite, not an opset or provider setting, so GPT-2 is not in this zoo's fusion step.
Acceptance: out-of-region 0 and wrong claims 0 everywhere, recall 1.00.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import torch

import modelprov
from modelprov.onnx import _tools
from tests._call_checks import check_calls, inline_mismatches
from tests._regions import check_regions

Builder = Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]

SEQUENCE = 8
IMAGE = 32


class _Hidden(torch.nn.Module):
    """Calls a transformers model and returns one tensor (the last hidden state)."""

    def __init__(self, model: torch.nn.Module, keyword: str) -> None:
        super().__init__()
        self.model = model
        self.keyword = keyword

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output = self.model(**{self.keyword: x})
        return output.last_hidden_state  # type: ignore[no-any-return]


def _text(model: torch.nn.Module) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return _Hidden(model, "input_ids").eval(), (torch.randint(0, 100, (1, SEQUENCE)),)


def _image(model: torch.nn.Module) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return _Hidden(model, "pixel_values").eval(), (torch.randn(1, 3, IMAGE, IMAGE),)


def bert() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import transformers as t

    config = t.BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        vocab_size=100,
        max_position_embeddings=64,
    )
    return _text(t.BertModel(config, add_pooling_layer=False))


def distilbert() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import transformers as t

    config = t.DistilBertConfig(
        dim=32, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=100, max_position_embeddings=64
    )
    return _text(t.DistilBertModel(config))


def vit() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import transformers as t

    config = t.ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=IMAGE,
        patch_size=8,
    )
    return _image(t.ViTModel(config, add_pooling_layer=False))


def _decoder(
    config_class: str, model_class: str
) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A 2-layer, 32-wide decoder of a Llama-like family (grouped-query attention)."""
    import transformers as t

    config = getattr(t, config_class)(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=100,
        max_position_embeddings=64,
        use_cache=False,
    )
    return _text(getattr(t, model_class)(config))


def llama() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return _decoder("LlamaConfig", "LlamaModel")


def qwen2() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return _decoder("Qwen2Config", "Qwen2Model")


def t5_encoder() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import transformers as t

    # Eager attention: the SDPA path's view after a transpose does not decompose for export.
    config = t.T5Config(
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        vocab_size=100,
        attn_implementation="eager",
    )
    return _text(t.T5EncoderModel(config))


def whisper_encoder() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import transformers as t

    config = t.WhisperConfig(
        d_model=32,
        encoder_layers=2,
        encoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_layers=1,
        decoder_attention_heads=4,
        decoder_ffn_dim=64,
        num_mel_bins=16,
        max_source_positions=16,
    )
    encoder = t.WhisperModel(config).get_encoder()
    return _Hidden(encoder, "input_features").eval(), (torch.randn(1, 16, 32),)


def resnet() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import transformers as t

    config = t.ResNetConfig(
        embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic"
    )
    return _image(t.ResNetModel(config))


def convnext() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import transformers as t

    config = t.ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)
    return _image(t.ConvNextModel(config))


def swin() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import transformers as t

    config = t.SwinConfig(
        image_size=IMAGE,
        patch_size=4,
        embed_dim=16,
        depths=[1, 1],
        num_heads=[2, 4],
        window_size=4,
        attn_implementation="eager",  # as for T5
    )
    return _image(t.SwinModel(config, add_pooling_layer=False))


def mobilenet_v2() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    import transformers as t

    config = t.MobileNetV2Config(image_size=IMAGE, depth_multiplier=0.35)
    return _image(t.MobileNetV2Model(config, add_pooling_layer=False))


MODELS: dict[str, Builder] = {
    "bert": bert,
    "distilbert": distilbert,
    "vit": vit,
    "llama": llama,
    "qwen2": qwen2,
    "t5-encoder": t5_encoder,
    "whisper-encoder": whisper_encoder,
    "resnet": resnet,
    "convnext": convnext,
    "swin": swin,
    "mobilenet-v2": mobilenet_v2,
}

TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    s.label: (s.tool, dict(s.options)) for s in _tools.TOOLS.settings(portable_only=True)
}


def _cached_export(name: str, cache: str) -> tuple[ir.Model, list[np.ndarray]]:
    """The model's plain export and its inputs, from the cache when present."""
    import transformers

    tag = f"{name}-torch{torch.__version__}-tf{transformers.__version__}".replace("+", "_")
    path = os.path.join(cache, f"{tag}.onnx")
    torch.manual_seed(0)
    module, args = MODELS[name]()
    inputs = [arg.numpy() for arg in args]
    if os.path.exists(path):
        return ir.load(path), inputs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, args, dynamo=True, optimize=False, verbose=False)
    os.makedirs(cache, exist_ok=True)
    partial = f"{path}.partial"
    ir.save(program.model, partial)
    os.replace(partial, path)
    return program.model, inputs


def _row(
    model: str,
    step: str,
    export: ir.Model,
    before: ir.Model,
    after: ir.Model,
    inputs: list[np.ndarray],
    seconds: float,
) -> dict[str, Any]:
    """Recall against the plain export; regions against the step's input."""
    report = modelprov.diff(export, after)
    regions = check_regions(before, after, inputs)
    return {
        "model": model,
        "step": step,
        "nodes": len(after.graph),
        "fx": report.fx_nodes.value,
        "lines": report.source_lines.value,
        "modules": report.module_paths.value,
        "out_of_region": len(regions.violations),
        "shared": len(regions.shared_constants),
        "recall_only": len(regions.kept_for_recall),
        "seconds": seconds,
        "wrong": 0,
        "examples": [f"{node}: {source}" for node, source in regions.violations[:3]],
    }


def _functionize_rows(
    name: str, base: ir.Model, optimized: ir.Model, inputs: list[np.ndarray]
) -> list[dict[str, Any]]:
    """functionize at both levels (calls checked against their inlined bodies and
    find_calls), then inline of each, node by node against the optimized model."""
    rows = []
    for level in ("aten", "module"):
        started = time.perf_counter()
        functionized = modelprov.functionize(optimized, level=level)  # type: ignore[call-overload]
        seconds = time.perf_counter() - started
        calls = check_calls(optimized, functionized, inputs)
        wrong = [f"{label}: {sorted(c)} vs {sorted(d)}" for label, c, d in calls.wrong_claims]
        row = _row(name, f"functionize/{level}", base, optimized, functionized, inputs, seconds)
        row["wrong"] = len(wrong) + len(calls.wrong_find_calls)
        row["examples"] += (wrong + calls.wrong_find_calls)[:3]
        rows.append(row)
        _print(row)
        started = time.perf_counter()
        inlined = modelprov.inline(functionized)
        seconds = time.perf_counter() - started
        row = _row(name, f"inline/{level}", base, optimized, inlined, inputs, seconds)
        mismatches = inline_mismatches(optimized, inlined, inputs)
        row["wrong"] = len(mismatches)
        row["examples"] += mismatches[:3]
        rows.append(row)
        _print(row)
    return rows


def _ort_fusions_row(
    name: str, base: ir.Model, optimized: ir.Model, inputs: list[np.ndarray]
) -> dict[str, Any]:
    """recover after onnxscript's optimize_for_ort (metadata cleared) on the optimized model.

    optimize_for_ort renames the tensors of the model it is given (and so of a proto that
    model was read from), so it gets its own deserialized copy and recover reads another."""
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    data = ir.to_proto(optimized).SerializeToString()
    fused, _counts = optimize_for_ort(
        ir.from_proto(onnx.load_from_string(data)), clear_metadata=True
    )
    started = time.perf_counter()
    recovered = modelprov.recover(onnx.load_from_string(data), ir.to_proto(fused))
    seconds = time.perf_counter() - started
    return _row(
        name, "recover/ort-fusions", base, optimized, ir.from_proto(recovered), inputs, seconds
    )


def sweep(models: list[str], tools: list[str], cache: str) -> list[dict[str, Any]]:
    """Optimizes and recovers every model; one row per model and step."""
    rows: list[dict[str, Any]] = []
    for name in models:
        try:
            base, inputs = _cached_export(name, cache)
        except Exception as error:  # an export failure is reported, the sweep goes on
            print(f"{name:<16}export failed: {type(error).__name__}: {str(error)[-160:]}")
            continue
        started = time.perf_counter()
        optimized = modelprov.optimize(base.clone())
        rows.append(
            _row(name, "optimize", base, base, optimized, inputs, time.perf_counter() - started)
        )
        _print(rows[-1])
        rows.extend(_functionize_rows(name, base, optimized, inputs))
        original = ir.to_proto(optimized)
        if "ort-fusions" in tools:
            rows.append(_ort_fusions_row(name, base, optimized, inputs))
            _print(rows[-1])
        for tool in (t for t in tools if t in TOOLS):
            runner, options = TOOLS[tool]
            output: onnx.ModelProto = _tools.TOOLS[runner].run(original, **options)
            started = time.perf_counter()
            recovered = modelprov.recover(original, output)
            seconds = time.perf_counter() - started
            rows.append(
                _row(
                    name,
                    f"recover/{tool}",
                    base,
                    optimized,
                    ir.from_proto(recovered),
                    inputs,
                    seconds,
                )
            )
            _print(rows[-1])
    return rows


_HEADER = (
    f"{'model':<16}{'step':<22}{'nodes':>6}{'fx':>6}{'lines':>6}{'mods':>6}"
    f"{'out':>5}{'wrong':>6}{'shared':>7}{'recall':>7}{'sec':>7}"
)


def _print(row: dict[str, Any]) -> None:
    print(
        f"{row['model']:<16}{row['step']:<22}{row['nodes']:>6}{row['fx']:>6.2f}"
        f"{row['lines']:>6.2f}{row['modules']:>6.2f}{row['out_of_region']:>5}{row['wrong']:>6}"
        f"{row['shared']:>7}{row['recall_only']:>7}{row['seconds']:>7.2f}",
        flush=True,
    )
    if row["examples"]:
        print(f"{'':<16}out of region or wrong, e.g. {row['examples']}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--tools", default=",".join([*TOOLS, "ort-fusions"]))
    parser.add_argument(
        "--cache",
        default=os.path.join(os.path.expanduser("~"), ".cache", "modelprov", "zoo"),
        help="where exports are kept between runs",
    )
    args = parser.parse_args(argv)
    logging.getLogger("torch").setLevel(logging.ERROR)
    models = [m for m in args.models.split(",") if m]
    tools = [t for t in args.tools.split(",") if t]
    unknown = [m for m in models if m not in MODELS] + [
        t for t in tools if t not in TOOLS and t != "ort-fusions"
    ]
    if unknown:
        parser.error(f"unknown model or tool: {', '.join(unknown)}")
    print(_HEADER)
    rows = sweep(models, tools, args.cache)
    for step in dict.fromkeys(row["step"] for row in rows):
        _print_total(f"{step}:", [row for row in rows if row["step"] == step])
    total_out, total_wrong, worst = _print_total("total:", rows)
    return 0 if total_out == 0 and total_wrong == 0 and worst == 1.0 else 1


def _print_total(title: str, rows: list[dict[str, Any]]) -> tuple[int, int, float]:
    """Prints and returns out-of-region and wrong-claim counts and the lowest recall."""
    out = sum(row["out_of_region"] for row in rows)
    wrong = sum(row["wrong"] for row in rows)
    worst = min(min(row["fx"], row["lines"], row["modules"]) for row in rows)
    print(
        f"{title:<22} out-of-region {out}, wrong claims {wrong}, nodes claiming through "
        f"shared constants {sum(row['shared'] for row in rows)}, lowest recall {worst:.2f}"
    )
    return out, wrong, worst


if __name__ == "__main__":
    sys.exit(main())
