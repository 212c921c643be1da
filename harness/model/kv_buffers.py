"""KV caches that are allocated once and rewound instead of copied.

transformers' ``DynamicLayer`` grows by concatenation: every decoding step allocates a new
``[batch, kv_heads, seq, head_dim]`` tensor per layer and copies the whole cache into it.
``torch.profiler`` put two thirds of a batch-10 decode on a CPU in that copying (GPT-2-small-sized
model, ~300-token inputs); without the profiler, ``benchmarks/kv_cache.py`` measures 32 steps at
2.8 s with it and 2.1-2.2 s without (1.29-1.32x over two runs; 1.00-1.09x at batch 1).
``BufferedLayer`` instead writes new keys and values into a buffer sized for the whole condition
(input plus continuation) and hands out views of its filled part; the attention arithmetic is
unchanged.

Because ``update`` only ever appends, a cache can also be forked for free: :func:`rewound`
records each layer's state and restores it afterwards, so the teacher-forced branch and the
greedy branch both start from the same prefill without a deep copy of the cache.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Iterator

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer


class BufferedLayer(DynamicLayer):
    """A full-attention cache layer whose keys and values live in preallocated buffers
    ``[batch, kv_heads, capacity, head_dim]``; it grows (doubling) only if ``capacity`` was short."""

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity = capacity
        self.length = 0

    @classmethod
    def from_rows(cls, keys: list[torch.Tensor], values: list[torch.Tensor], capacity: int) -> BufferedLayer:
        """A layer whose batch row ``b`` holds ``keys[b]`` and ``values[b]`` (each ``[1, kv_heads, n,
        head_dim]``, one ``n`` for all), copied straight into the buffers (no stacked temporary)."""
        layer = cls.empty_rows(keys[0], values[0], len(keys), capacity)
        for b, (k, v) in enumerate(zip(keys, values)):
            layer.fill_row(b, k, v)
        return layer

    @classmethod
    def empty_rows(cls, k0: torch.Tensor, v0: torch.Tensor, rows: int, capacity: int) -> BufferedLayer:
        """A layer of ``rows`` batch rows shaped like ``k0`` and ``v0`` (``[1, kv_heads, n, head_dim]``),
        their ``n`` tokens still to be filled in by :meth:`fill_row`."""
        capacity = max(capacity, k0.shape[-2])
        layer = cls(capacity)
        layer.device = k0.device
        layer._keys = k0.new_empty(rows, k0.shape[1], capacity, k0.shape[3])
        layer._values = v0.new_empty(rows, v0.shape[1], capacity, v0.shape[3])
        layer.length = k0.shape[-2]
        layer.is_initialized = True
        layer._expose()
        return layer

    def fill_row(self, b: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Copy one cache's keys and values (``[1, kv_heads, n, head_dim]``) into batch row ``b``."""
        self._keys[b, :, : self.length] = k[0]
        self._values[b, :, : self.length] = v[0]

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self._allocate(key_states, value_states, self.capacity)
        self.is_initialized = True

    def _allocate(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
        b, h, _, dk = keys.shape
        new_k = keys.new_empty(b, h, capacity, dk)
        new_v = values.new_empty(b, h, capacity, values.shape[-1])
        if self.length:
            new_k[..., : self.length, :] = self._keys[..., : self.length, :]
            new_v[..., : self.length, :] = self._values[..., : self.length, :]
        self._keys, self._values, self.capacity = new_k, new_v, capacity
        self._expose()

    def _expose(self) -> None:
        self.keys = self._keys[..., : self.length, :]
        self.values = self._values[..., : self.length, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self.capacity:
            self._allocate(key_states, value_states, max(end, 2 * self.capacity))
        self._keys[..., self.length: end, :] = key_states
        self._values[..., self.length: end, :] = value_states
        self.length = end
        self._expose()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("crop takes a negative number of tokens to remove")
        self.length = max(0, self.length + tokens_to_remove)
        if self.is_initialized:
            self._expose()

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise NotImplementedError("BufferedLayer holds fixed batches")

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        raise NotImplementedError("BufferedLayer holds fixed batches")


def buffered_cache(model: torch.nn.Module, capacity: int) -> DynamicCache:
    """An empty cache for ``model`` whose attention layers hold ``capacity`` tokens without
    reallocating.

    Sliding-window layers get a full buffer too: the model builds each layer's window into its
    attention mask from its config, so the arithmetic is the same, but every layer's keys are then
    the whole sequence in order, which is what aligns A's keys with X's for the attention
    metrics (a sliding cache keeps only the last window, at shifting positions)."""
    cache = DynamicCache(config=model.config)
    if not cache.layers:  # a config transformers cannot read layer types from: one layer per update
        return cache
    cache.layers = [BufferedLayer(capacity) if type(layer) in (DynamicLayer, DynamicSlidingWindowLayer) else layer
                    for layer in cache.layers]
    return cache


# Cache layers whose whole state is keys, values and lengths equal across rows: safe to stack.
STACKABLE = (DynamicLayer, BufferedLayer)


def stackable(cache) -> bool:
    return bool(cache.layers) and all(type(layer) in STACKABLE for layer in cache.layers)


def stack_caches(caches: Iterable, capacity: int, rows: int | None = None) -> DynamicCache:
    """One cache ``[rows, ...]`` whose row ``i`` holds the ``i``-th of ``caches``' tokens, with room
    for ``capacity`` tokens in its full-attention layers; the inputs are not modified.

    All caches must cover the same number of tokens (the heads of one batch always do). ``caches``
    may be a generator (``rows`` then says how many it gives): each is copied in and let go before
    the next is made, so a batch of long heads never holds them all at once beside its own buffers."""
    rows = len(caches) if rows is None else rows
    given = iter(caches)
    cache = next(given)
    out = copy.copy(cache)
    out.layers = [BufferedLayer.empty_rows(layer.keys, layer.values, rows, capacity) for layer in cache.layers]
    for b in range(rows):
        if b:
            cache = next(given)
        for layer, src in zip(out.layers, cache.layers):
            layer.fill_row(b, src.keys, src.values)
        del cache  # before the next is computed
    return out


def select_rows(cache, rows: list[int], length: int, capacity: int) -> DynamicCache | None:
    """A new cache holding batch ``rows`` of ``cache`` with their first ``length`` tokens, and room
    for ``capacity``; the input is not modified. ``length`` may reach past the recorded length of a
    cache :func:`rewound` after a pass: its buffers keep what that pass wrote. None for caches with
    layers other than :class:`BufferedLayer` (whose rewinding keeps no such tokens)."""
    if not cache.layers or not all(type(layer) is BufferedLayer and layer.is_initialized for layer in cache.layers):
        return None
    out = copy.copy(cache)
    out.layers = [BufferedLayer.from_rows([layer._keys[r:r + 1, :, :length] for r in rows],
                                          [layer._values[r:r + 1, :, :length] for r in rows], capacity)
                  for layer in cache.layers]
    return out


@contextlib.contextmanager
def rewound(cache) -> Iterator[None]:
    """Run the enclosed passes on ``cache``, then put it back as it was before them.

    Exact for the layer types here: their updates append beyond the recorded length (buffered
    layers) or rebind new tensors (transformers' dynamic layers), never alter what was recorded;
    any other layer type is deep-copied instead."""
    if not stackable(cache):  # other layer types may write in place: keep a deep copy instead
        layers = copy.deepcopy(cache.layers)
        try:
            yield
        finally:
            cache.layers = layers
        return
    saved = [dict(vars(layer)) for layer in cache.layers]
    try:
        yield
    finally:
        for layer, state in zip(cache.layers, saved):
            layer.__dict__.clear()
            layer.__dict__.update(state)
