"""A zoo of tiny random decoder models, one per transformers family, for exactness tests.

What it is for: the attention probe (``harness.model.probe``) must either reproduce, exactly, the
attention each family computes (scaling, masks, sliding windows, logit soft-capping, attention
sinks, ALiBi ...) or refuse the family with a one-line reason. These models are small enough to
run on a CPU in a second or two, yet each keeps the features of its family that change the
attention arithmetic, sized so that they *bite* on 40-token sequences:

- sliding windows are 8 tokens (``WINDOWED`` lists the families that have any);
- Gemma 2's ``attn_logit_softcapping`` is 1.0 (scores are squashed into (-1, 1));
- weights are initialised with std 0.1 (not 0.02), so attention rows are peaked, not near-uniform;
- GPT-OSS's per-head sink logits are re-drawn from N(0, 1);
- Gemma 3 has local (sliding) and global layers; Gemma 2 / GPT-OSS alternate them;
- MoE families (mixtral, qwen2_moe, gpt_oss) have 4 experts, 2 active;
- families with grouped-query attention get 4 query heads over 2 key/value heads.

All models share the project's 257-token byte-level tokenizer (``harness.model.loading.byte_level_tokenizer``)
with ``<|endoftext|>`` = 256 as BOS, EOS and PAD. ``add_bos`` mirrors what the family's real
tokenizer does (``ADDS_BOS``). Nothing is downloaded; models are built with
``AutoModelForCausalLM.from_config`` in float32, in eval mode, under a forked RNG so the global
random state is left alone.

Usage::

    from tests.zoo import FAMILIES, WINDOWED, BYPASSES_INTERFACE, NOTES, tiny_model
    model, tok = tiny_model("gemma2", seed=0)                      # default attention
    model, tok = tiny_model("gpt_oss", attn_implementation="eager")

``NOTES`` says, per family, how its attention reaches (or bypasses) the attention interface in
transformers 5.24.0 and what it computes beyond softmax(QK^T * scaling + mask).
"""

from __future__ import annotations

import torch


def _transformers_at_least(version: str) -> bool:
    from importlib.metadata import version as installed

    from packaging.version import Version

    return Version(installed("transformers")) >= Version(version)


_COMMON = dict(vocab_size=257, bos_token_id=256, eos_token_id=256, pad_token_id=256,
               # 5x the usual 0.02: scaled scores reach ~3 instead of ~0.1, so attention rows are peaked
               # rather than near-uniform, and soft-capping at 1.0 moves Gemma 2's logits by ~0.5, not ~3e-5
               initializer_range=0.1)
WINDOW = 8  # sliding window of every windowed family: bites on 40-token sequences

# Llama-style shape: 2 layers, hidden 64, 4 heads (head_dim 16) over 2 key/value heads.
_LLAMA = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=1024)

# model_type (for AutoConfig.for_model) and config kwargs, per family name.
FAMILIES: dict[str, dict] = {
    "llama": dict(model_type="llama", **_LLAMA),
    "mistral": dict(model_type="mistral", sliding_window=WINDOW, **_LLAMA),
    "mixtral": dict(model_type="mixtral", num_local_experts=4, num_experts_per_tok=2, **_LLAMA),
    "qwen2": dict(model_type="qwen2", **_LLAMA),
    "qwen2_moe": dict(model_type="qwen2_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                      shared_expert_intermediate_size=64, decoder_sparse_step=1, **_LLAMA),
    "qwen3": dict(model_type="qwen3", head_dim=16, **_LLAMA),
    "gemma": dict(model_type="gemma", head_dim=16, **_LLAMA),
    "gemma2": dict(model_type="gemma2", head_dim=16, query_pre_attn_scalar=16, sliding_window=WINDOW,
                   attn_logit_softcapping=1.0, final_logit_softcapping=30.0,
                   **{**_LLAMA, "num_hidden_layers": 3},
                   layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
    "gemma3_text": dict(model_type="gemma3_text", head_dim=16, query_pre_attn_scalar=16, sliding_window=WINDOW,
                        **{**_LLAMA, "num_hidden_layers": 3},
                        layer_types=["sliding_attention", "sliding_attention", "full_attention"]),
    "phi": dict(model_type="phi", **_LLAMA),  # partial rotary (factor 0.5), parallel attn+MLP
    "phi3": dict(model_type="phi3", sliding_window=WINDOW, **_LLAMA),
    "olmo": dict(model_type="olmo", clip_qkv=2.0, **_LLAMA),  # clamps q/k/v (changes logits by ~0.4)
    "olmo2": dict(model_type="olmo2", **_LLAMA),
    "gpt2": dict(model_type="gpt2", n_embd=64, n_layer=2, n_head=4, n_positions=1024),
    "gpt_neox": dict(model_type="gpt_neox", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=256, max_position_embeddings=1024, rotary_pct=0.25),
    "gptj": dict(model_type="gptj", n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=1024),
    # Falcon-40B/180B-style ("new decoder architecture"): rotary, grouped-query attention.
    "falcon": dict(model_type="falcon", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                   new_decoder_architecture=True, num_kv_heads=2, alibi=False, max_position_embeddings=1024),
    # Falcon-RW-style: ALiBi, no rotary, multi-head, sequential attn/MLP.
    "falcon_alibi": dict(model_type="falcon", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         new_decoder_architecture=False, multi_query=False, parallel_attn=False, bias=True,
                         alibi=True, max_position_embeddings=1024),
    "bloom": dict(model_type="bloom", hidden_size=64, n_layer=2, n_head=4),
    "opt": dict(model_type="opt", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
                word_embed_proj_dim=64, max_position_embeddings=1024, init_std=0.1),
    "starcoder2": dict(model_type="starcoder2", sliding_window=WINDOW, **_LLAMA),
    "cohere": dict(model_type="cohere", **_LLAMA),
    # Granite-3-style multipliers: attention scale 1/head_dim (not 1/sqrt(head_dim)).
    "granite": dict(model_type="granite", attention_multiplier=1 / 16, embedding_multiplier=12.0,
                    residual_multiplier=0.22, logits_scaling=8.0, **_LLAMA),
    "gpt_oss": dict(model_type="gpt_oss", head_dim=16, sliding_window=WINDOW, num_local_experts=4,
                    num_experts_per_tok=2,
                    # YaRN as in the real config; 131072 positions keep its implicit factor (131072/4096) = 32
                    **{**_LLAMA, "num_hidden_layers": 3, "intermediate_size": 64, "max_position_embeddings": 131072},
                    layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
    "stablelm": dict(model_type="stablelm", **_LLAMA),  # partial rotary (factor 0.25)
    # no_rope_layer_interval=2: layer 1 has no rotary embedding (NoPE), like every 4th layer of SmolLM3-3B.
    "smollm3": dict(model_type="smollm3", no_rope_layer_interval=2, **_LLAMA),
}

# Families with sliding-window layers in these tiny configs (window WINDOW).
WINDOWED: set[str] = {"mistral", "gemma2", "gemma3_text", "phi3", "starcoder2", "gpt_oss"}

# Whether the family's real tokenizer prepends a BOS token (the byte-level stand-in mirrors it).
# Checked from memory and public issue threads, not against the hub (offline): llama/mistral/gemma/cohere
# add one; OPT's GPT2Tokenizer prepends </s>; Qwen has no BOS token; Phi-3-mini's tokenizer_config has
# add_bos_token=false. Least certain: olmo2, granite, stablelm, smollm3 (believed not to add one).
ADDS_BOS: dict[str, bool] = {
    "llama": True, "mistral": True, "mixtral": True, "gemma": True, "gemma2": True, "gemma3_text": True,
    "cohere": True, "opt": True,
    "qwen2": False, "qwen2_moe": False, "qwen3": False, "phi3": False,
    "phi": False, "olmo": False, "olmo2": False, "gpt2": False, "gpt_neox": False, "gptj": False,
    "falcon": False, "falcon_alibi": False, "bloom": False, "starcoder2": False, "granite": False,
    "gpt_oss": False, "stablelm": False, "smollm3": False,
}

# Families whose attention never calls the function registered through AttentionInterface: a probe
# must refuse them (set_attn_implementation only logs a warning for these; falcon even raises KeyError
# when built with an unknown attn_implementation).
# FalconAttention (both variants) goes through the interface from transformers 5.25 on.
BYPASSES_INTERFACE: set[str] = {"bloom"} | (set() if _transformers_at_least("5.25") else {"falcon", "falcon_alibi"})

NOTES: dict[str, str] = {
    "llama": "Interface; default sdpa. Plain softmax(QK^T*head_dim^-0.5 + mask).",
    "mistral": "Interface; default sdpa. config.sliding_window on every layer (mask built by "
               "create_sliding_window_causal_mask); passes sliding_window= (used by flash only).",
    "mixtral": "Interface; default sdpa. Same attention as mistral (sliding_window None in real checkpoints); "
               "sparse MoE MLP.",
    "qwen2": "Interface; default sdpa. Sliding layers only with use_sliding_window=True (layer_types, "
             "max_window_layers); real checkpoints keep it off. No BOS in the real tokenizer.",
    "qwen2_moe": "Interface; default sdpa. qkv bias; sliding_window=0 when off (sliding mask built but unused).",
    "qwen3": "Interface; default sdpa. q_norm/k_norm (RMSNorm per head) before rotary.",
    "gemma": "Interface; default sdpa. Scale head_dim^-0.5; embeddings scaled by sqrt(hidden).",
    "gemma2": "Interface; default EAGER (_supports_sdpa=False: sdpa raises on softcap). Passes softcap= "
              "(tanh soft-capping of scaled scores, before the mask) and sliding_window= on sliding layers. "
              "Scale query_pre_attn_scalar^-0.5. Final-logit soft-capping in the LM head.",
    "gemma3_text": "Interface; default sdpa. Local (sliding) and global layers with separate rotary bases. "
                   "attn_logit_softcapping is in the config but never passed to attention (5.24.0).",
    "phi": "Interface; default sdpa. Partial rotary (0.5); optional qk_layernorm.",
    "phi3": "Interface; default sdpa. config.sliding_window on every layer when set (Phi-3-mini-4k: 2047). "
            "Phi-3-mini's tokenizer does not add BOS.",
    "olmo": "Interface; default sdpa. clip_qkv clamps q/k/v before attention (outside the attention function).",
    "olmo2": "Interface; default sdpa. q_norm/k_norm over all heads before rotary.",
    "gpt2": "Interface; default sdpa. Scaling 1/sqrt(d) (or 1 if scale_attn_weights=False), divided by "
            "layer_idx+1 if scale_attn_by_inverse_layer_idx. reorder_and_upcast_attn=True bypasses the "
            "interface, but only when the implementation is 'eager'. No GQA.",
    "gpt_neox": "Interface; default sdpa. Partial rotary (rotary_pct). No GQA.",
    "gptj": "Interface; default sdpa. Eager computes QK^T in float32. No GQA.",
    "falcon": "Rotary variant. Interface from transformers 5.25; before, FalconAttention called "
              "F.scaled_dot_product_attention or its own eager and set_attn_implementation() with a custom "
              "name only logged a warning.",
    "falcon_alibi": "ALiBi variant. Interface from transformers 5.25, alibi folded into the float mask the "
                    "probe reads; before, no interface, and the eager path counted alibi twice (eager != sdpa).",
    "bloom": "NO interface (own baddbmm eager: alibi + QK^T/sqrt(d) + mask); _supports_sdpa=False so the "
             "default is eager.",
    "opt": "Interface; default sdpa. Query pre-scaled by head_dim^-0.5 in the module; passes scaling=1.0. "
           "Learned positions with offset 2. No GQA.",
    "starcoder2": "Interface; default sdpa. config.sliding_window on every layer when set (real: 4096).",
    "cohere": "Interface; default sdpa. Parallel attn+MLP; interleaved rotary; logit_scale on LM logits.",
    "granite": "Interface; default sdpa. scaling=config.attention_multiplier (not head_dim^-0.5).",
    "gpt_oss": "Interface; default EAGER (_supports_sdpa=False). Passes s_aux=module.sinks (per-head sink "
               "logit, one extra softmax column that is dropped) and sliding_window= on sliding layers. "
               "sdpa_attention_forward silently ignores s_aux. Sinks re-drawn N(0, 1) here.",
    "stablelm": "Interface; default sdpa. Partial rotary (0.25); passes position_ids= (for flash).",
    "smollm3": "Interface; default sdpa. NoPE layers (no rotary) every no_rope_layer_interval-th layer.",
}


def tiny_config(family: str):
    """The transformers config of ``family``'s tiny model (a fresh object each call)."""
    from transformers import AutoConfig

    if family not in FAMILIES:
        raise KeyError(f"no tiny model family {family!r}; known: {sorted(FAMILIES)}")
    kwargs = dict(FAMILIES[family])
    model_type = kwargs.pop("model_type")
    return AutoConfig.for_model(model_type, **kwargs, **_COMMON)


def tiny_model(family: str, seed: int = 0, attn_implementation: str | None = None):
    """``(model, tokenizer)``: ``family``'s tiny random model in float32 eval mode on the CPU, and the
    byte-level tokenizer (BOS added as the family's real tokenizer does).

    ``attn_implementation=None`` keeps transformers' default (sdpa where the family supports it,
    else eager). The global RNG is not disturbed.
    """
    from transformers import AutoModelForCausalLM

    from harness.model.builtin import byte_level_tokenizer

    config = tiny_config(family)
    extra = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, **extra)
        if family == "gpt_oss":  # sink logits of order 1 (init gives N(0, initializer_range))
            with torch.no_grad():
                for module in model.modules():
                    if hasattr(module, "sinks"):
                        module.sinks.normal_(0.0, 1.0)
    return model.eval(), byte_level_tokenizer(add_bos=ADDS_BOS[family])
