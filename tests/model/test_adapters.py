"""Low-rank adapters: a wrapped model starts as its base, merging gives the wrapped model's
outputs, a saved adapter merges into a loaded model bit for bit as in training, and every way a
user can point at the wrong adapter is one clear line."""

import json

import pytest
import torch

from harness.errors import HarnessError
from harness.model import adapters as A
from harness.model.builtin import build_tiny
from harness.model.loading import load_model
from tests.support import sweep, write_jsonl

TEXT = "Once upon a time there was a little dog who liked to run"
TARGETS = ("q_proj", "v_proj", "down_proj")


def logits(model, tok, text=TEXT):
    with torch.no_grad():
        return model(torch.tensor([tok(text).input_ids])).logits


def trained(model, seed=1):
    """Give every adapter a random (non-zero) B, as training would."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, A.LoRALinear):
                module.lora_B.copy_(torch.randn(module.lora_B.shape, generator=gen) * 0.05)
    return model


@pytest.fixture
def saved_base(tmp_path):
    model, tok = build_tiny("llama")
    model.save_pretrained(tmp_path / "base", safe_serialization=True)
    tok.save_pretrained(tmp_path / "base")
    return tmp_path / "base", tok


def test_a_fresh_adapter_changes_nothing_and_only_it_trains():
    model, tok = build_tiny("llama")
    before = logits(model, tok)
    names = A.add_adapters(model, rank=4, alpha=8.0, targets=TARGETS)
    assert len(names) == 3 * model.config.num_hidden_layers
    assert torch.equal(logits(model, tok), before)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(n.endswith(("lora_A", "lora_B")) for n in trainable)


def test_merging_gives_the_wrapped_models_outputs_against_a_hand_computed_layer():
    model, tok = build_tiny("llama")
    A.add_adapters(model, rank=4, alpha=8.0, targets=TARGETS)
    trained(model)
    wrapped = logits(model, tok)
    layer = model.model.layers[0].self_attn.q_proj
    x = torch.randn(3, layer.base.in_features)
    by_hand = x @ layer.base.weight.T + 2.0 * (x @ layer.lora_A.T) @ layer.lora_B.T  # alpha / rank = 2
    assert torch.allclose(layer(x), by_hand, atol=1e-6)
    assert not torch.allclose(wrapped, logits(build_tiny("llama")[0], tok), atol=1e-3)  # the adapter does something
    merged = A.merge_wrapped(model)
    assert not any(isinstance(m, A.LoRALinear) for m in merged.modules())
    assert torch.allclose(logits(merged, tok), wrapped, atol=1e-5)


def test_a_saved_adapter_loads_with_its_model_bit_for_bit_and_is_part_of_the_revision(saved_base, tmp_path):
    base_dir, tok = saved_base
    model, _ = build_tiny("llama")
    A.add_adapters(model, rank=4, alpha=8.0, targets=TARGETS)
    trained(model)
    size = A.save_adapter(model, tmp_path / "adapter", rank=4, alpha=8.0, base={"trained_on": str(base_dir)})
    assert size == (tmp_path / "adapter" / A.ADAPTER_WEIGHTS).stat().st_size
    expected = logits(A.merge_wrapped(model), tok)

    plain = load_model(str(base_dir), device="cpu")
    loaded = load_model(str(base_dir), device="cpu", adapter=str(tmp_path / "adapter"))
    assert torch.equal(logits(loaded.model, loaded.tokenizer), expected)
    assert loaded.resolved_revision == f"{plain.resolved_revision}+adapter:{A.adapter_sha256(tmp_path / 'adapter')}"
    assert loaded.adapter["rank"] == 4 and len(loaded.adapter["modules"]) == 3 * model.config.num_hidden_layers


def test_a_sweep_with_an_adapter_records_it_in_the_manifest(saved_base, tmp_path):
    base_dir, _ = saved_base
    model, _ = build_tiny("llama")
    A.add_adapters(model, rank=2, alpha=2.0, targets=("q_proj",))
    A.save_adapter(trained(model), tmp_path / "adapter", rank=2, alpha=2.0, base={})
    prompts = write_jsonl(tmp_path / "q.jsonl", [{"id": "p", "text": "The little robot opened the door and"}])
    prefixes = write_jsonl(tmp_path / "x.jsonl", [{"id": "n", "kind": "neutral", "text": "The council met."},
                                                  {"id": "i", "kind": "instruction", "text": "Say OK only."}])
    run = sweep(tmp_path / "run", f"model.name_or_path={base_dir}", f"model.adapter={tmp_path / 'adapter'}",
                f"prompts.path={prompts}", f"prefixes.path={prefixes}", "prefix.lengths=[8]",
                "decode.max_new_tokens=3", "draw_figures=false", "analysis.noise_floor=false")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["model"]["adapter"]["sha256"] == A.adapter_sha256(tmp_path / "adapter")
    assert manifest["result_fingerprint"]["resolved_revision"].endswith(A.adapter_sha256(tmp_path / "adapter"))


def _adapter(tmp_path, targets=TARGETS, base=None, **shape):
    model, _ = build_tiny("llama", **shape)
    A.add_adapters(model, rank=2, alpha=2.0, targets=targets)
    A.save_adapter(trained(model), tmp_path / "adapter", rank=2, alpha=2.0, base=base or {})
    return tmp_path / "adapter"


def test_wrong_adapters_are_one_line(saved_base, tmp_path):
    base_dir, _ = saved_base
    cases = {}
    cases["missing"] = tmp_path / "nowhere"
    damaged = _adapter(tmp_path / "d")
    (damaged / A.ADAPTER_WEIGHTS).write_bytes((damaged / A.ADAPTER_WEIGHTS).read_bytes()[:100])
    cases["damaged"] = damaged
    cases["other base"] = _adapter(tmp_path / "b", base={"gguf_sha256": "ab" * 32})
    cases["other shape"] = _adapter(tmp_path / "f", layers=3)  # a layer the loaded model lacks
    wide = _adapter(tmp_path / "w")
    tensors = A.read_adapter(wide)[1]
    name = next(k for k in tensors if k.endswith("lora_A"))
    tensors[name] = torch.zeros(2, 999)
    from safetensors.torch import save_file
    save_file(tensors, str(wide / A.ADAPTER_WEIGHTS))
    cases["wrong shape"] = wide
    messages = {}
    for case, path in cases.items():
        with pytest.raises(HarnessError) as err:
            if case == "other base":  # checked against the base's GGUF identity
                model, _ = build_tiny("llama")
                A.merge_adapter(model, path, base_sha256="cd" * 32)
            else:
                load_model(str(base_dir), device="cpu", adapter=str(path))
        messages[case] = str(err.value)
        assert "\n" not in messages[case]
    assert "is not an adapter" in messages["missing"]
    assert "damaged" in messages["damaged"]
    assert "trained on the model with GGUF sha256 abababab" in messages["other base"]
    assert "another architecture" in messages["other shape"]
    assert "does not fit" in messages["wrong shape"]


def test_an_adapter_on_a_model_spread_over_devices_is_refused_before_any_weight_is_read(tmp_path):
    with pytest.raises(HarnessError, match="cannot be merged into a model spread with model.device_map"):
        load_model(str(tmp_path / "no-model-here"), device="cpu", device_map="auto", adapter=str(tmp_path))


def test_a_rank_below_one_and_unknown_layer_names_are_refused():
    model, _ = build_tiny("llama")
    with pytest.raises(HarnessError, match="rank must be at least 1"):
        A.add_adapters(model, rank=0, alpha=1.0, targets=TARGETS)
    with pytest.raises(HarnessError, match="no linear layer"):
        A.add_adapters(model, rank=2, alpha=1.0, targets=("qkv",))


@pytest.mark.parametrize("change, expected", [
    (lambda d, t: ([d], t), "must be a JSON object with rank, alpha and modules, not a list"),
    (lambda d, t: ({**d, "rank": 0}, t), "rank must be a whole number of at least 1, got 0"),
    (lambda d, t: ({k: v for k, v in d.items() if k != "alpha"}, t), "alpha must be a number, got None"),
    (lambda d, t: (d, {k: (torch.zeros(3, v.shape[1]) if k.endswith("lora_A") else v) for k, v in t.items()}),
     "is damaged: .*lora_A is \\(3, [0-9]+\\) and lora_B \\([0-9]+, 2\\), not \\[2, in\\]"),
])
def test_an_adapter_description_or_rows_that_cannot_merge_are_one_line(saved_base, tmp_path, change, expected):
    import json

    from safetensors.torch import save_file

    base_dir, _ = saved_base
    path = _adapter(tmp_path)
    description, tensors = A.read_adapter(path)
    description, tensors = change(description, tensors)
    (path / A.ADAPTER_CONFIG).write_text(json.dumps(description))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path / A.ADAPTER_WEIGHTS))
    with pytest.raises(HarnessError, match=expected) as err:
        load_model(str(base_dir), device="cpu", adapter=str(path))
    assert "\n" not in str(err.value)
