"""Prefix KV reuse: the BOS and prefix tokens' keys and values, computed once per sweep.

Attention is causal, so the keys and values of the tokens before the task (BOS and the prefix)
depend on those tokens alone, never on the prompt that follows. Every prompt of a sweep is
paired with the same prefixes, so the harness computes each distinct head (BOS + prefix, as
token ids) once, on its own, keeps its KV cache, and starts every condition that uses it from a
copy. At the default lengths this removes most of a sweep's prefill work.

Each head is always computed the same way (alone, batch 1, without isolation or capture), so a
condition's numbers do not depend on which prompt first needed its head or on what was kept:
the memory budget changes speed only. Splitting a forward pass into head and task changes the
floating-point rounding, not the arithmetic; ``Engine.noise_floor`` measures that path too.
"""

from __future__ import annotations

from collections import Counter

import torch

from harness.model.decoding import forward
from harness.model.kv_buffers import buffered_cache, stack_caches, stackable
from harness.model.kv_size import cache_nbytes
from harness.model.probe import plain_attention


class PrefixCache:
    """KV caches of heads (the token ids before the task), kept up to ``budget_bytes``.

    Heads are kept first come, first kept: once the budget is full, a new head is computed each
    time it is needed (evicting would only trade one recomputation for another). Where the engine
    has said which heads its conditions will need (:meth:`expect`), a head is kept only while a
    later condition still needs it, and let go after its last use: a sweep of one prompt keeps
    none, and memory held for heads no prompt will read again is given back.
    """

    def __init__(self, model: torch.nn.Module, budget_bytes: int):
        self.model = model
        self.budget_bytes = budget_bytes
        self.device = next(model.parameters()).device
        self._kept: dict[tuple[int, ...], object] = {}
        self._sizes: dict[tuple[int, ...], int] = {}
        self._uses_left: Counter | None = None  # None: not told; keep within the budget
        self._stackable: bool | None = None  # known after the first head
        self.held_bytes = 0
        self.kept_bytes = 0  # the most held at once
        self.hits = 0
        self.misses = 0

    def expect(self, heads: list[tuple[int, ...]]) -> None:
        """The heads of the conditions about to be computed, one per condition (repeats counted)."""
        self._uses_left = Counter(map(tuple, heads))
        for ids in [ids for ids in self._kept if not self._uses_left[ids]]:
            self._let_go(ids)

    def _let_go(self, ids: tuple[int, ...]) -> None:
        del self._kept[ids]
        self.held_bytes -= self._sizes.pop(ids)

    @torch.no_grad()
    def _head(self, ids: tuple[int, ...]):
        needed_again = True
        if self._uses_left is not None:
            self._uses_left[ids] -= 1
            needed_again = self._uses_left[ids] > 0
        cache = self._kept.get(ids)
        if cache is not None:
            self.hits += 1
            if not needed_again:
                self._let_go(ids)
            return cache
        self.misses += 1
        with plain_attention():
            _, cache = forward(self.model, torch.tensor([ids], device=self.device),
                               buffered_cache(self.model, len(ids)), last_only=True)
        self._stackable = stackable(cache)
        size = cache_nbytes(cache)
        if needed_again and self._stackable and self.held_bytes + size <= self.budget_bytes:
            self._kept[ids], self._sizes[ids] = cache, size
            self.held_bytes += size
            self.kept_bytes = max(self.kept_bytes, self.held_bytes)
        return cache

    @torch.no_grad()
    def batch(self, heads: list[tuple[int, ...]], capacity: int):
        """A fresh cache holding ``heads`` (equal lengths) as rows ``0..len(heads)-1``, with room for
        ``capacity`` tokens, for the caller to extend in place with the task and continuation."""
        if self._stackable:  # one head at a time into the batch's buffers
            return stack_caches((self._head(tuple(h)) for h in heads), capacity, len(heads))
        if self._stackable is None:  # not known before the first head is made
            first = self._head(tuple(heads[0]))
            if self._stackable:
                return stack_caches((first if i == 0 else self._head(tuple(h)) for i, h in enumerate(heads)),
                                    capacity, len(heads))
        # A cache type with more state than keys and values (none of the shipped model families):
        # nothing is kept, and the heads run as one batch.
        with plain_attention():
            _, cache = forward(self.model, torch.tensor([list(h) for h in heads], device=self.device),
                               buffered_cache(self.model, capacity), last_only=True)
        return cache
