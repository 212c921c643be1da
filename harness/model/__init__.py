"""Model access: where a model comes from (``sources``, ``builtin``, ``gguf``) and loading it
(``loading``, ``adapters``), the attention probe that captures rows and applies isolation masks
(``probe``, ``masks``), greedy decoding and rewindable KV caches (``decoding``, ``kv_buffers``,
``prefix_cache``), the linear layers' precision (``linear_precision``), and sizing to the machine
and its allocator (``resources``, ``kv_size``).

Public here (each imported on first use):

- ``sources``: ``SOURCES``, ``source_for``
- ``builtin``: ``build_tiny``, ``byte_level_tokenizer``
- ``gguf``: ``GgufSource``
- ``loading``: ``LoadedModel``, ``load_model``, ``load_from_config``
- ``adapters``: ``merge_adapter``, ``read_adapter``
- ``probe``: ``install_probe``, ``capture_rows``, ``key_bias``
- ``masks``: ``KeyBias``
- ``decoding``: ``Continuation``, ``greedy_decode``, ``stop_ids``
- ``kv_size``: ``kv_cache_bytes``
- ``linear_precision``: ``lower_linears``, ``exact_linears``
"""

from harness.exports import lazy_exports

_API = {
    "SOURCES": "harness.model.sources",
    "source_for": "harness.model.sources",
    "build_tiny": "harness.model.builtin",
    "byte_level_tokenizer": "harness.model.builtin",
    "GgufSource": "harness.model.gguf",
    "LoadedModel": "harness.model.loading",
    "load_model": "harness.model.loading",
    "load_from_config": "harness.model.loading",
    "merge_adapter": "harness.model.adapters",
    "read_adapter": "harness.model.adapters",
    "install_probe": "harness.model.probe",
    "capture_rows": "harness.model.probe",
    "key_bias": "harness.model.probe",
    "KeyBias": "harness.model.masks",
    "Continuation": "harness.model.decoding",
    "greedy_decode": "harness.model.decoding",
    "stop_ids": "harness.model.decoding",
    "kv_cache_bytes": "harness.model.kv_size",
    "lower_linears": "harness.model.linear_precision",
    "exact_linears": "harness.model.linear_precision",
}
__all__ = sorted(_API)
__getattr__, __dir__ = lazy_exports(__name__, _API, globals())
