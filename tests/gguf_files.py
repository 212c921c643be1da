"""Writing tiny random models to GGUF files, the way llama.cpp's converter lays them out, so that
tests can load a GGUF source without the hub or the real models' packages.

What it is for: ``harness.model.gguf`` reads GGUF through transformers; this module writes one from
an in-memory transformers model with the ``gguf`` package's own writer (tensor names from its name
map, Llama's rotary permutation of q/k, Gemma's norm offset, a byte-level "gpt2" vocabulary), so a
test can compare the loaded model's logits with the original's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


def tiny_gemma3(seed: int = 0, window: int = 8, layers: int = 6):
    """A tiny random Gemma 3 text model (5 sliding-window layers to 1 global, window ``window``)
    and the byte-level tokenizer; every setting GGUF does not carry is left at its default, so the
    model read back from GGUF is the same model."""
    from transformers import AutoModelForCausalLM, Gemma3TextConfig

    from harness.model.builtin import byte_level_tokenizer

    config = Gemma3TextConfig(vocab_size=257, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                              num_attention_heads=4, num_key_value_heads=1, head_dim=16, sliding_window=window,
                              max_position_embeddings=1024, bos_token_id=256, eos_token_id=256, pad_token_id=256)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
        for name, p in model.named_parameters():  # Gemma's norms start at 0 (scale 1); make them count
            if "norm" in name:
                p.data.normal_(0.0, 0.1)
    return model.eval(), byte_level_tokenizer(add_bos=True)


def _llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's rotary layout for q/k rows (transformers undoes it when reading)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(model, tokenizer, path: Path, name: str = "tiny test model") -> Path:
    """Write ``model`` (a tiny llama or gemma3_text) and its byte-level vocabulary to ``path`` as
    float32 GGUF; returns ``path``."""
    import gguf

    cfg = model.config
    arch = {"llama": "llama", "gemma3_text": "gemma3"}[cfg.model_type]
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(name)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    rope = getattr(cfg, "rope_parameters", None) or {}
    theta = (rope.get("full_attention") or rope).get("rope_theta", 10000.0)
    writer.add_rope_freq_base(float(theta))
    if arch == "llama":
        writer.add_rope_dimension_count(head_dim)
    else:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
        writer.add_sliding_window(cfg.sliding_window)
    vocab = tokenizer.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    special = set(tokenizer.all_special_tokens)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in special else 1 for t in tokens])
    writer.add_token_scores([0.0] * len(tokens))  # no merges: transformers derives none from single bytes
    writer.add_bos_token_id(tokenizer.bos_token_id)
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_add_bos_token(True)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA if arch == "llama" else gguf.MODEL_ARCH.GEMMA3,
                                     cfg.num_hidden_layers)
    for hf_name, tensor in model.state_dict().items():
        if hf_name == "lm_head.weight" and getattr(cfg, "tie_word_embeddings", False):
            continue
        gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise KeyError(f"no GGUF name for {hf_name}")
        data = tensor.detach().to(torch.float32).numpy().copy()
        if arch == "llama" and gguf_name.endswith("attn_q.weight"):
            data = _llama_permute(data, cfg.num_attention_heads)
        elif arch == "llama" and gguf_name.endswith("attn_k.weight"):
            data = _llama_permute(data, cfg.num_key_value_heads)
        if arch == "gemma3" and gguf_name.endswith("norm.weight"):
            data = data + 1.0  # GGUF stores Gemma's (1 + w) scale; transformers subtracts the 1
        writer.add_tensor(gguf_name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)
