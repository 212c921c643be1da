"""Built-in tiny models: random weights and a byte-level tokenizer, made in memory (tests, notebooks,
``model.name_or_path=builtin:tiny-llama``). Nothing is downloaded or read from disk."""

from __future__ import annotations

from harness.errors import HarnessError

TINY_FAMILIES = ("llama", "gpt2", "qwen2", "mistral", "gpt_neox")


def byte_level_tokenizer(add_bos: bool):
    """A 257-token byte-level tokenizer (256 bytes + ``<|endoftext|>``), built locally.

    ``add_bos`` makes it prepend ``<|endoftext|>`` like Llama's tokenizer prepends BOS.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    eot = "<|endoftext|>"
    vocab[eot] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.add_special_tokens([eot])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(single=f"{eot} $A", special_tokens=[(eot, vocab[eot])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=eot, eos_token=eot, pad_token=eot, model_max_length=1024
    )


def tiny_config(family: str, *, layers: int = 2, hidden: int = 64, heads: int = 4, kv_heads: int = 2,
                max_positions: int = 1024):
    """A transformers config for a tiny random model of ``family``: llama, gpt2, qwen2, mistral or
    gpt_neox. Llama-style families get grouped-query attention (``kv_heads`` < ``heads``)."""
    from transformers import AutoConfig

    common = dict(vocab_size=257, bos_token_id=256, eos_token_id=256, pad_token_id=256)
    if family == "gpt2":
        return AutoConfig.for_model(
            "gpt2", n_embd=hidden, n_layer=layers, n_head=heads, n_positions=max_positions, **common
        )
    if family == "gpt_neox":
        return AutoConfig.for_model(
            "gpt_neox", hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=4 * hidden, max_position_embeddings=max_positions, rotary_pct=0.25, **common
        )
    if family in ("llama", "qwen2", "mistral"):
        return AutoConfig.for_model(
            family, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=max_positions,
            **common
        )
    raise HarnessError(f"no tiny model family {family!r}; use {', '.join(TINY_FAMILIES)}")


def build_tiny(family: str, seed: int = 0, **shape):
    """A tiny random model and a matching byte-level tokenizer, both made in memory."""
    import torch
    from transformers import AutoModelForCausalLM

    config = tiny_config(family, **shape)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    # GPT-2's tokenizer does not add BOS; Llama-family tokenizers do. Mirror that.
    return model.eval(), byte_level_tokenizer(add_bos=family != "gpt2")
