"""Model loading: local directories, built-ins, the shipped hub configs, and clear errors offline."""

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from harness.config import ModelConfig
from harness.errors import HarnessError
from harness.models import build_tiny, load_model

CONF = Path(__file__).resolve().parent.parent / "harness" / "conf" / "model"


def test_local_directory_roundtrip(tmp_path):
    model, tok = build_tiny("llama")
    model.save_pretrained(tmp_path, safe_serialization=True)
    tok.save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path), device="cpu")
    ids = torch.tensor([[256, 72, 105]])
    with torch.no_grad():
        assert torch.equal(loaded.model(ids).logits, model(ids).logits)
    assert loaded.tokenizer("Hi")["input_ids"] == tok("Hi")["input_ids"]
    assert len(loaded.resolved_revision) == 64  # content hash of the local files
    assert loaded.max_positions == 1024


def test_pickle_weights_are_refused(tmp_path):
    model, tok = build_tiny("gpt2")
    model.config.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")  # pickle: could run code on load
    with pytest.raises(HarnessError, match="not available"):
        load_model(str(tmp_path), device="cpu")


def test_unavailable_model_is_one_clear_line():
    with pytest.raises(HarnessError) as info:
        load_model("no-such-org/no-such-model", device="cpu")
    msg = str(info.value)
    assert "no-such-org/no-such-model" in msg and "not available" in msg and "\n" not in msg


def test_bad_dtype_and_device():
    with pytest.raises(HarnessError, match="dtype"):
        load_model("builtin:tiny-llama", dtype="float8")
    if not torch.cuda.is_available():
        with pytest.raises(HarnessError, match="CUDA is not available"):
            load_model("builtin:tiny-llama", device="cuda")


@pytest.mark.parametrize("name", ["gpt2", "pythia-160m", "pythia-1b", "qwen2.5-1.5b", "llama-3.2-1b"])
def test_hub_model_configs_reach_the_loader_safely(name, monkeypatch):
    """Each shipped hub config validates against the schema and is passed to transformers with
    safetensors on and remote code off (the download itself is mocked: no hub here)."""
    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig), OmegaConf.load(CONF / f"{name}.yaml"))
    assert "/" in cfg.name_or_path and cfg.revision
    calls = {}
    model, tok = build_tiny("llama")

    def fake_model(source, **kw):
        calls["model"] = (source, kw)
        model.config._commit_hash = "0123abcd" * 5
        return model

    def fake_tok(source, **kw):
        calls["tok"] = (source, kw)
        return tok

    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained", fake_model)
    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", fake_tok)
    loaded = load_model(cfg.name_or_path, revision=cfg.revision, dtype="float32", device="cpu")
    source, kw = calls["model"]
    assert source == cfg.name_or_path and kw["revision"] == cfg.revision
    assert kw["use_safetensors"] is True and kw["trust_remote_code"] is False
    assert calls["tok"][1]["trust_remote_code"] is False
    assert loaded.resolved_revision == "0123abcd" * 5


def test_shipped_demo_model_loads_offline_and_writes_english(monkeypatch):
    """The demo model goes through the same loading code as a hub model, with the hub off."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from harness.models import DEMO_MODEL_DIR

    files = {p.name for p in DEMO_MODEL_DIR.iterdir()}
    assert "model.safetensors" in files and not any(f.endswith((".bin", ".pt", ".pth")) for f in files)
    assert sum(p.stat().st_size for p in DEMO_MODEL_DIR.iterdir()) <= 16 * 2**20
    loaded = load_model("demo", device="cpu")
    cfg = loaded.model.config
    assert cfg.num_hidden_layers >= 6 and cfg.num_attention_heads >= 6
    assert cfg.num_key_value_heads < cfg.num_attention_heads and cfg.max_position_embeddings >= 2048
    assert sum(p.numel() for p in loaded.model.parameters()) <= 8_000_000
    tok = loaded.tokenizer
    ids = tok("Once upon a time, there was a little girl named", return_tensors="pt")["input_ids"]
    assert ids[0, 0] == tok.bos_token_id  # the tokenizer adds BOS, like Llama's
    from harness.decoding import greedy_decode

    (y,) = greedy_decode(loaded.model, ids, 20, tok.eos_token_id)
    text = tok.decode(list(y.ids))
    words = text.split()
    assert len(words) >= 5 and sum(w.strip(".,!\"'").isalpha() for w in words) / len(words) > 0.8, text
