"""Lowered linear products (``model.linear_dtype``): what changes, what stays exact."""

from __future__ import annotations

import pytest
import torch

from harness.model.linear_precision import exact_linears, lower_linears
from harness.model.probe import capture_rows, install_probe
from tests.zoo import tiny_model

IDS = torch.tensor([[1, 17, 33, 65, 90, 12, 7, 101, 44, 3, 58, 29]])


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS).logits


@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma3_text"])
def test_lowered_products_round_the_logits_and_exact_linears_gives_back_the_weights_own(family):
    model, _ = tiny_model(family, seed=0)
    before = logits(model)
    dtype, lowered = lower_linears(model, "bfloat16")
    assert dtype == "bfloat16" and lowered == sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    after = logits(model)
    # a rounding change: the logits move, by about bfloat16's relative precision, not more
    assert not torch.equal(after, before)
    assert float((after - before).abs().max()) < 0.05 * float(before.abs().max())
    with exact_linears():
        assert torch.equal(logits(model), before)  # bit for bit the float32 products
    assert torch.equal(logits(model), after)


def test_lowering_is_idempotent_and_says_when_it_changed_nothing():
    model, _ = tiny_model("llama", seed=0)
    assert lower_linears(model, None) == (None, 0)
    assert lower_linears(model, "float32") == (None, 0)  # the weights' own precision
    first = lower_linears(model, "bfloat16")
    once = logits(model)
    assert lower_linears(model, "bfloat16") == first
    assert torch.equal(logits(model), once)
    gpt2, _ = tiny_model("gpt2", seed=0)  # its blocks are Conv1D: only the LM head is an nn.Linear
    assert lower_linears(gpt2, "bfloat16") == ("bfloat16", 1)


@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_the_probe_still_captures_the_attention_the_lowered_model_computes(family):
    """The probe recomputes attention from the query and key the layer was given: with lowered
    products those are the lowered model's, and the rows equal the model's own eager
    probabilities of the same pass."""
    model, _ = tiny_model(family, seed=0, attn_implementation="eager")
    install_probe(model)
    lower_linears(model, "bfloat16")
    rows = slice(3, 9)
    seen = {}
    with torch.no_grad(), capture_rows(rows, lambda layer, lp, s, sink: seen.__setitem__(layer, lp)):
        eager = model(input_ids=IDS, output_attentions=True).attentions
    assert len(seen) == len(eager) > 0
    for layer, probs in enumerate(eager):
        torch.testing.assert_close(seen[layer].exp(), probs[:, :, rows].float(), atol=1e-6, rtol=0)


@pytest.mark.parametrize("supported", [True, False])
def test_a_run_says_when_its_lowered_products_are_emulated_on_this_cpu(supported, monkeypatch, caplog):
    """bfloat16 products on a CPU without AVX-512 BF16 or AMX ran at 0.33x float32's speed: the run
    says so, and how to compute at full precision, exactly where oneDNN reports no native support."""
    from harness.config import compose
    from harness.model.linear_precision import emulated_on
    from harness.runs.experiment import Experiment

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: supported)
    assert emulated_on("cpu", "bfloat16") is not supported
    assert not emulated_on("cpu", "float16") and not emulated_on("cuda:0", "bfloat16") and not emulated_on("cpu", None)
    with caplog.at_level("WARNING", logger="harness.runs.experiment"):
        Experiment.build(compose(["model=tiny", "model.linear_dtype=bfloat16", "prompts.limit=2"]), attention=False)
    said = [r.getMessage() for r in caplog.records if "emulated" in r.getMessage()]
    assert bool(said) is not supported
    assert all("model.linear_dtype=null" in m for m in said)
