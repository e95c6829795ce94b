"""The zoo's cases: small PyTorch models built from configs in code, with random weights.

Every case is 2 layers or stages with tiny widths; nothing is downloaded. ``CASES`` maps a
name to a ``Case``: its builder (returning the module in eval mode and example inputs), its
family (what kind of architecture) and the features it exercises. Transformers' own vision
and CNN models stand in for torchvision and timm: the torchvision wheel that keeps torch at
2.13.0 (0.28.0, PyPI's) does not load with torch's CPU build (``operator torchvision::nms
does not exist``), and timm needs torchvision.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable
from typing import Any

import torch

Example = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]

EXPORT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "modelprov", "zoo")
"""Where the zoo benchmarks keep their exports between runs (each takes ``--cache``)."""


def builders_fingerprint() -> str:
    """A short hash of this file, part of each cached export's name: an export made by
    other builders (other configs, weights or statistics) is never read back."""
    with open(__file__, "rb") as source:
        return hashlib.sha256(source.read()).hexdigest()[:10]

SEQUENCE = 8
IMAGE = 32
VOCAB = 100


@dataclasses.dataclass(frozen=True)
class Case:
    """One zoo model: how to build it, what it is, and how to export it."""

    build: Callable[[], Example]
    family: str
    features: tuple[str, ...] = ()
    dynamic_shapes: Callable[[], Any] | None = None
    """Makes the ``dynamic_shapes`` for ``torch.onnx.export`` (and ``export_stablehlo``);
    a function, since ``torch.export.Dim`` objects are made for each export."""


class _Output(torch.nn.Module):
    """Calls a transformers model with keyword inputs and returns one tensor of its output."""

    def __init__(self, model: torch.nn.Module, keywords: tuple[str, ...], field: str) -> None:
        super().__init__()
        self.model = model
        self.keywords = keywords
        self.field = field

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        output = self.model(**dict(zip(self.keywords, inputs, strict=True)))
        return getattr(output, self.field)  # type: ignore[no-any-return]


def _text(model: torch.nn.Module) -> Example:
    return _Output(model, ("input_ids",), "last_hidden_state").eval(), (
        torch.randint(0, VOCAB, (1, SEQUENCE)),
    )


def _image(model: torch.nn.Module, size: int = IMAGE) -> Example:
    wrapped = _Output(model, ("pixel_values",), "last_hidden_state")
    _settle_batch_norms(wrapped, torch.randn(8, 3, size, size))
    return wrapped.eval(), (torch.randn(1, 3, size, size),)


def _settle_batch_norms(model: torch.nn.Module, batch: torch.Tensor) -> None:
    """Gives every BatchNorm unit scale and the statistics of what reaches it on ``batch``,
    as training would. With transformers' initialization (scales drawn around 0.02,
    statistics mean 0 and variance 1) a deep CNN's activations shrink layer by layer (to
    1e-25 in MobileNetV2, 1e-22 in EfficientNet), so its outputs, and every value a check
    compares, are all but zero."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for norm in norms:
        norm.reset_parameters()  # scale 1, shift 0, fresh statistics
        norm.momentum = None  # a cumulative average: one batch gives its own statistics
    model.train()
    with torch.no_grad():
        model(batch)
    model.eval()


def _seq2seq(model: torch.nn.Module) -> Example:
    keywords = ("input_ids", "decoder_input_ids")
    inputs = (torch.randint(0, VOCAB, (1, SEQUENCE)), torch.randint(0, VOCAB, (1, SEQUENCE // 2)))
    return _Output(model, keywords, "last_hidden_state").eval(), inputs


def _transformers() -> Any:
    import transformers

    return transformers


# Encoders ---------------------------------------------------------------------------------


def _bert_like(config_class: str, model_class: str, **extra: Any) -> Example:
    t = _transformers()
    config = getattr(t, config_class)(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        **extra,
    )
    options = {"add_pooling_layer": False} if model_class in ("BertModel", "RobertaModel") else {}
    return _text(getattr(t, model_class)(config, **options))


def bert() -> Example:
    return _bert_like("BertConfig", "BertModel")


def roberta() -> Example:
    return _bert_like("RobertaConfig", "RobertaModel")


def deberta_v2() -> Example:
    return _bert_like(
        "DebertaV2Config",
        "DebertaV2Model",
        relative_attention=True,
        pos_att_type=["p2c", "c2p"],
        position_buckets=8,
    )


def electra() -> Example:
    return _bert_like("ElectraConfig", "ElectraModel", embedding_size=16)


def albert() -> Example:
    return _bert_like("AlbertConfig", "AlbertModel", embedding_size=16)


def distilbert() -> Example:
    t = _transformers()
    config = t.DistilBertConfig(
        dim=32, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=VOCAB, max_position_embeddings=64
    )
    return _text(t.DistilBertModel(config))


def t5_encoder() -> Example:
    t = _transformers()
    # Eager attention: the SDPA path's view after a transpose does not decompose for export.
    config = t.T5Config(
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        vocab_size=VOCAB,
        attn_implementation="eager",
    )
    return _text(t.T5EncoderModel(config))


# Encoder-decoders -------------------------------------------------------------------------


def t5() -> Example:
    t = _transformers()
    config = t.T5Config(
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        vocab_size=VOCAB,
        use_cache=False,
        attn_implementation="eager",  # as for t5_encoder
    )
    return _seq2seq(t.T5Model(config))


def bart() -> Example:
    t = _transformers()
    config = t.BartConfig(
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        use_cache=False,
    )
    return _seq2seq(t.BartModel(config))


# Decoders ---------------------------------------------------------------------------------


def _decoder(config_class: str, model_class: str, **extra: Any) -> Example:
    """A 2-layer, 32-wide decoder of a Llama-like family (grouped-query attention)."""
    t = _transformers()
    config = getattr(t, config_class)(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        use_cache=False,
        **extra,
    )
    return _text(getattr(t, model_class)(config))


def llama() -> Example:
    return _decoder("LlamaConfig", "LlamaModel")


def qwen2() -> Example:
    return _decoder("Qwen2Config", "Qwen2Model")


def mistral() -> Example:
    return _decoder("MistralConfig", "MistralModel", head_dim=8)


def qwen3() -> Example:
    return _decoder("Qwen3Config", "Qwen3Model", head_dim=8)


def gemma() -> Example:
    return _decoder("GemmaConfig", "GemmaModel", head_dim=8, pad_token_id=0)


def gemma2() -> Example:
    return _decoder("Gemma2Config", "Gemma2Model", head_dim=8, pad_token_id=0, sliding_window=4)


def phi3() -> Example:
    return _decoder("Phi3Config", "Phi3Model", pad_token_id=0)


def stablelm() -> Example:
    return _decoder("StableLmConfig", "StableLmModel")


def olmo() -> Example:
    return _decoder("OlmoConfig", "OlmoModel", pad_token_id=0)


def granite() -> Example:
    return _decoder("GraniteConfig", "GraniteModel", pad_token_id=0)


def phi() -> Example:
    t = _transformers()
    config = t.PhiConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        use_cache=False,
    )
    return _text(t.PhiModel(config))


def gpt2() -> Example:
    t = _transformers()
    config = t.GPT2Config(
        n_embd=32, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=64, use_cache=False
    )
    return _text(t.GPT2Model(config))


def gpt_neox() -> Example:
    t = _transformers()
    config = t.GPTNeoXConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        use_cache=False,
    )
    return _text(t.GPTNeoXModel(config))


def falcon() -> Example:
    t = _transformers()
    config = t.FalconConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        vocab_size=VOCAB,
        use_cache=False,
    )
    return _text(t.FalconModel(config))


def opt() -> Example:
    t = _transformers()
    config = t.OPTConfig(
        hidden_size=32,
        ffn_dim=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        word_embed_proj_dim=32,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        use_cache=False,
    )
    return _text(t.OPTModel(config))


def bloom() -> Example:
    t = _transformers()
    config = t.BloomConfig(hidden_size=32, n_layer=2, n_head=4, vocab_size=VOCAB, use_cache=False)
    return _text(t.BloomModel(config))


# Vision transformers ----------------------------------------------------------------------


def _vit_like(config_class: str, model_class: str, pooling: bool = True, **extra: Any) -> Example:
    t = _transformers()
    config = getattr(t, config_class)(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=IMAGE,
        patch_size=8,
        **extra,
    )
    options = {"add_pooling_layer": False} if pooling else {}
    return _image(getattr(t, model_class)(config, **options))


def vit() -> Example:
    return _vit_like("ViTConfig", "ViTModel", intermediate_size=64)


def deit() -> Example:
    return _vit_like("DeiTConfig", "DeiTModel", intermediate_size=64)


def dinov2() -> Example:
    return _vit_like("Dinov2Config", "Dinov2Model", pooling=False, mlp_ratio=2)


def swin() -> Example:
    t = _transformers()
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


def segformer() -> Example:
    t = _transformers()
    config = t.SegformerConfig(
        num_encoder_blocks=2,
        depths=[1, 1],
        sr_ratios=[2, 1],
        hidden_sizes=[16, 32],
        patch_sizes=[7, 3],
        strides=[4, 2],
        num_attention_heads=[1, 2],
        mlp_ratios=[2, 2],
    )
    return _image(t.SegformerModel(config))


def mobilevit() -> Example:
    t = _transformers()
    config = t.MobileViTConfig(
        image_size=IMAGE,
        hidden_sizes=[16, 24, 32],
        neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
        num_attention_heads=2,
    )
    return _image(t.MobileViTModel(config, expand_output=False))


# CNNs -------------------------------------------------------------------------------------


def resnet() -> Example:
    t = _transformers()
    config = t.ResNetConfig(
        embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic"
    )
    return _image(t.ResNetModel(config))


def convnext() -> Example:
    t = _transformers()
    config = t.ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)
    return _image(t.ConvNextModel(config))


def mobilenet_v2() -> Example:
    t = _transformers()
    config = t.MobileNetV2Config(image_size=IMAGE, depth_multiplier=0.35)
    return _image(t.MobileNetV2Model(config, add_pooling_layer=False))


def efficientnet() -> Example:
    t = _transformers()
    config = t.EfficientNetConfig(
        image_size=IMAGE,
        width_coefficient=0.25,
        depth_coefficient=0.5,
        kernel_sizes=[3, 5],
        in_channels=[32, 16],
        out_channels=[16, 24],
        strides=[1, 2],
        num_block_repeats=[1, 1],
        expand_ratios=[1, 6],
        depthwise_padding=[],
        hidden_dim=320,  # the top convolution's width: round_filters(1280) at 0.25
    )
    return _image(t.EfficientNetModel(config))


def regnet() -> Example:
    t = _transformers()
    config = t.RegNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], groups_width=8)
    return _image(t.RegNetModel(config))


# Speech -----------------------------------------------------------------------------------


def whisper_encoder() -> Example:
    t = _transformers()
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
    return _Output(encoder, ("input_features",), "last_hidden_state").eval(), (
        torch.randn(1, 16, 32),
    )


def wav2vec2() -> Example:
    t = _transformers()
    config = t.Wav2Vec2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        conv_dim=(16, 16),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
    )
    return _Output(t.Wav2Vec2Model(config), ("input_values",), "last_hidden_state").eval(), (
        torch.randn(1, 400),
    )


# Multimodal -------------------------------------------------------------------------------


def clip() -> Example:
    t = _transformers()
    tower = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
    config = t.CLIPConfig(
        text_config={
            **tower,
            "num_attention_heads": 4,
            "vocab_size": VOCAB,
            "max_position_embeddings": 64,
        },
        vision_config={**tower, "num_attention_heads": 4, "image_size": IMAGE, "patch_size": 8},
        projection_dim=16,
    )
    inputs = (torch.randint(0, VOCAB, (2, SEQUENCE)), torch.randn(1, 3, IMAGE, IMAGE))
    module = _Output(t.CLIPModel(config), ("input_ids", "pixel_values"), "logits_per_image")
    return module.eval(), inputs


# Feature cases ----------------------------------------------------------------------------


class _Branches(torch.nn.Module):
    """torch.cond between two small MLPs, on the sign of the input's sum."""

    def __init__(self) -> None:
        super().__init__()
        self.positive = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU())
        self.negative = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh())
        self.head = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chosen = torch.cond(
            x.sum() > 0, lambda v: self.positive(v) * 2.0, lambda v: self.negative(v) - 1.0, (x,)
        )
        return self.head(chosen)  # type: ignore[no-any-return]


def cond() -> Example:
    return _Branches().eval(), (torch.randn(2, 16),)


class _DecoderStep(torch.nn.Module):
    """One decoder step with a KV cache: the new key and value are appended to the past."""

    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.query = torch.nn.Linear(width, width)
        self.key = torch.nn.Linear(width, width)
        self.value = torch.nn.Linear(width, width)
        self.output = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        return x.view(batch, length, self.heads, width // self.heads).transpose(1, 2)

    def forward(
        self, x: torch.Tensor, past_key: torch.Tensor, past_value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        hidden = self.norm(x)
        key = torch.cat([past_key, self._split(self.key(hidden))], dim=2)
        value = torch.cat([past_value, self._split(self.value(hidden))], dim=2)
        attended = torch.nn.functional.scaled_dot_product_attention(
            self._split(self.query(hidden)), key, value
        )
        merged = attended.transpose(1, 2).reshape(x.shape)
        return x + self.output(merged), key, value


def kv_cache() -> Example:
    past = (1, 4, 7, 8)
    return _DecoderStep().eval(), (torch.randn(1, 1, 32), torch.randn(past), torch.randn(past))


class _Recurrent(torch.nn.Module):
    """A 2-layer LSTM or GRU and a linear head on its last step."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.rnn = getattr(torch.nn, kind)(16, 32, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output, _state = self.rnn(x)
        return self.head(output[:, -1])  # type: ignore[no-any-return]


def lstm() -> Example:
    return _Recurrent("LSTM").eval(), (torch.randn(2, SEQUENCE, 16),)


def gru() -> Example:
    return _Recurrent("GRU").eval(), (torch.randn(2, SEQUENCE, 16),)


class _InPlace(torch.nn.Module):
    """In-place ops on activations and constant buffers read by the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(16, 32)
        self.second = torch.nn.Linear(32, 16)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 32))
        self.register_buffer("mask", torch.arange(16) % 3 == 0, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.first(x)
        hidden.mul_(self.scale)
        hidden.relu_()
        out = self.second(hidden)
        out.masked_fill_(self.mask, 0.0)
        out.add_(x)
        return out


def inplace() -> Example:
    return _InPlace().eval(), (torch.randn(2, 16),)


class _RunningMean(torch.nn.Module):
    """A buffer updated in place on every call (its new value is an extra graph output).

    Not named ``mean``: torch.onnx 2.13 then names the ReduceMean's output ``mean`` too, and
    its model redeclares the initializer's name (invalid; onnx_ir refuses to load it)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)
        self.register_buffer("running", torch.zeros(16))
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.linear(x)
        self.running.mul_(0.9).add_(hidden.mean(dim=0) * 0.1)
        self.calls.add_(1)
        return hidden - self.running


def buffer_mutation() -> Example:
    return _RunningMean().eval(), (torch.randn(4, 16),)


def dynamic_bert() -> Example:
    """The bert case with two in the batch (a batch of one specializes the dimension)."""
    module, _inputs = bert()
    return module, (torch.randint(0, VOCAB, (2, SEQUENCE)),)


def _bert_dynamic_shapes() -> Any:
    batch = torch.export.Dim("batch", min=2, max=64)
    sequence = torch.export.Dim("sequence", min=2, max=64)
    return (({0: batch, 1: sequence},),)  # the wrapper takes its inputs as *args


class _ConvNet(torch.nn.Module):
    """Two conv-batchnorm-relu stages, a global pool and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
        )
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(x).mean(dim=(2, 3)))  # type: ignore[no-any-return]


def dynamic_cnn() -> Example:
    torch.manual_seed(0)
    module = _ConvNet()
    for norm in (module.stages[1], module.stages[4]):  # statistics that are not identity
        norm.running_mean.uniform_(-0.5, 0.5)
        norm.running_var.uniform_(0.5, 1.5)
    return module.eval(), (torch.randn(2, 3, 24, 20),)


def _cnn_dynamic_shapes() -> Any:
    batch = torch.export.Dim("batch", min=2, max=16)
    height = torch.export.Dim("height", min=8, max=128)
    width = torch.export.Dim("width", min=8, max=128)
    return ({0: batch, 2: height, 3: width},)


CASES: dict[str, Case] = {
    # decoders
    "llama": Case(llama, "decoder"),
    "qwen2": Case(qwen2, "decoder"),
    "qwen3": Case(qwen3, "decoder"),
    "mistral": Case(mistral, "decoder"),
    "gemma": Case(gemma, "decoder"),
    "gemma2": Case(gemma2, "decoder", ("sliding-window",)),
    "phi": Case(phi, "decoder", ("partial-rotary",)),
    "phi3": Case(phi3, "decoder"),
    "gpt2": Case(gpt2, "decoder", ("conv1d",)),
    "gpt-neox": Case(gpt_neox, "decoder", ("partial-rotary",)),
    "falcon": Case(falcon, "decoder", ("multi-query",)),
    "opt": Case(opt, "decoder"),
    "bloom": Case(bloom, "decoder", ("alibi",)),
    "stablelm": Case(stablelm, "decoder", ("partial-rotary",)),
    "olmo": Case(olmo, "decoder"),
    "granite": Case(granite, "decoder"),
    # encoder-decoders
    "t5": Case(t5, "encoder-decoder"),
    "bart": Case(bart, "encoder-decoder"),
    # encoders
    "bert": Case(bert, "encoder"),
    "distilbert": Case(distilbert, "encoder"),
    "roberta": Case(roberta, "encoder"),
    "deberta-v2": Case(deberta_v2, "encoder", ("relative-attention",)),
    "electra": Case(electra, "encoder"),
    "albert": Case(albert, "encoder", ("shared-layers",)),
    "t5-encoder": Case(t5_encoder, "encoder"),
    # vision transformers
    "vit": Case(vit, "vision-transformer"),
    "deit": Case(deit, "vision-transformer"),
    "dinov2": Case(dinov2, "vision-transformer"),
    "swin": Case(swin, "vision-transformer", ("windows",)),
    "segformer": Case(segformer, "vision-transformer"),
    "mobilevit": Case(mobilevit, "vision-transformer", ("conv",)),
    # CNNs
    "resnet": Case(resnet, "cnn", ("batchnorm",)),
    "convnext": Case(convnext, "cnn"),
    "mobilenet-v2": Case(mobilenet_v2, "cnn", ("batchnorm", "depthwise")),
    "efficientnet": Case(efficientnet, "cnn", ("batchnorm", "depthwise")),
    "regnet": Case(regnet, "cnn", ("batchnorm", "grouped")),
    # speech
    "whisper-encoder": Case(whisper_encoder, "speech"),
    "wav2vec2": Case(wav2vec2, "speech", ("conv",)),
    # multimodal
    "clip": Case(clip, "multimodal"),
    # features
    "cond": Case(cond, "feature", ("torch.cond",)),
    "dynamic-bert": Case(dynamic_bert, "feature", ("dynamic-shapes",), _bert_dynamic_shapes),
    "dynamic-cnn": Case(dynamic_cnn, "feature", ("dynamic-shapes",), _cnn_dynamic_shapes),
    "kv-cache": Case(kv_cache, "feature", ("kv-cache",)),
    "lstm": Case(lstm, "feature", ("rnn",)),
    "gru": Case(gru, "feature", ("rnn",)),
    "inplace": Case(inplace, "feature", ("in-place", "buffers")),
    "buffer-mutation": Case(buffer_mutation, "feature", ("buffers", "in-place")),
}
