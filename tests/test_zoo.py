"""The zoo's acceptance (issue 24): recall 1.00 and no source out of its node's region, for
modelprov.optimize and for recover after onnxsim, onnxslim, onnxoptimizer and onnxruntime
basic / extended / all, on every case of benchmarks/_zoo_cases.py (slow tier); the default
suite samples a few small cases of different families."""

from __future__ import annotations

import collections

import pytest

from benchmarks._zoo_cases import CASES
from benchmarks.bench_zoo import acceptance_failures

SAMPLE = ("convnext", "bloom", "gru")
"""Small cases of three families (a CNN, an ALiBi decoder, a GRU) that hold today."""


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("zoo"))


def test_the_zoo_holds_forty_cases_of_every_kind():
    families = collections.Counter(case.family for case in CASES.values())
    features = {feature for case in CASES.values() for feature in case.features}
    assert len(CASES) >= 40
    assert families["decoder"] >= 10
    for family in ("encoder-decoder", "encoder", "vision-transformer", "cnn", "speech"):
        assert families[family] >= 2, family
    assert families["multimodal"] >= 1
    for feature in ("torch.cond", "dynamic-shapes", "kv-cache", "rnn", "buffers", "in-place"):
        assert feature in features, feature
    assert len({case.family for name, case in CASES.items() if name in SAMPLE}) == len(SAMPLE)


@pytest.mark.parametrize("name", SAMPLE)
def test_sampled_case_keeps_recall_and_regions(name, cache):
    found = acceptance_failures(name, cache)
    assert not found, "\n".join(found)


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in CASES if name not in SAMPLE])
def test_zoo_case_keeps_recall_and_regions(name, cache):
    found = acceptance_failures(name, cache)
    assert not found, "\n".join(found)
