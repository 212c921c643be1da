"""The attention masks of isolation settings: what the harness's attention function
(:mod:`harness.model.probe`) adds to a model's own mask so that queries after the inserted block
see its keys down-weighted or not at all, in every query head or in chosen ones. The settings
themselves are described in :mod:`harness.inputs.isolation`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from harness.errors import HarnessError
from harness.inputs.isolation import Isolation


@dataclass(frozen=True)
class KeyBias:
    """What the attention function applies: ``value`` on the block's keys ``[block_start,
    block_end)`` for queries after the block (sequence index ``>= block_end``), in every query
    head, or (``heads`` not None) only in the listed (layer, head) query heads, or
    (``heads_see``) in every head but those."""

    block_start: int
    block_end: int
    value: float
    heads: frozenset[tuple[int, int]] | None = None
    heads_see: bool = False

    @classmethod
    def of(cls, isolation: Isolation, block_start: int, block_end: int) -> KeyBias | None:
        """The bias an isolation setting applies to a block (None when it alters no attention)."""
        if isolation.key_bias is None:
            return None
        heads = frozenset(isolation.heads) if isolation.per_head else None
        return cls(block_start, block_end, isolation.key_bias, heads, isolation.per_head == "visible")

    def head_selection(self, layer: int | None, n_heads: int) -> torch.Tensor | None:
        """``[n_heads]`` bool: the query heads of ``layer`` the bias applies in (None: all of them)."""
        if self.heads is None:
            return None
        if layer is None:
            raise HarnessError("isolation in chosen heads needs each attention module's layer_idx, which this "
                               "model's attention does not set")
        chosen = torch.zeros(n_heads, dtype=torch.bool)
        for lay, head in self.heads:
            if lay == layer:
                chosen[head] = True
        return ~chosen if self.heads_see else chosen


def additive_mask(attention_mask: torch.Tensor | None, bias: KeyBias, tq: int, tk: int,
                  dtype: torch.dtype, device, layer: int | None = None, n_heads: int = 1) -> torch.Tensor | None:
    """A float mask ``[B or 1, 1, Tq, Tk]``: the model's mask (causal when None) plus ``bias``;
    ``[B or 1, n_heads, Tq, Tk]`` when the bias applies in some of ``layer``'s heads only. When it
    applies in none of them the model's own mask is returned untouched (the plain computation),
    and when in all of them the mask has no head axis (the same tensor ``mask`` builds)."""
    selection = bias.head_selection(layer, n_heads)
    if selection is not None and (not selection.any() or tk <= bias.block_end):
        return attention_mask  # no head, or no query after the block (the prefix's own KV): nothing to add
    if selection is not None and selection.all():
        selection = None
    q_idx = torch.arange(tk - tq, tk, device=device)[:, None]
    k_idx = torch.arange(tk, device=device)[None, :]
    neg = torch.finfo(dtype).min
    if attention_mask is None:
        base = torch.where(k_idx <= q_idx, 0.0, neg).to(dtype)[None, None]
    elif attention_mask.dtype == torch.bool:
        base = torch.where(attention_mask[..., :tk], 0.0, neg).to(dtype)
    else:
        base = attention_mask[..., :tk].to(dtype)
    hit = (q_idx >= bias.block_end) & (k_idx >= bias.block_start) & (k_idx < bias.block_end)
    value = neg if math.isinf(bias.value) else bias.value
    if selection is None:
        return base + torch.where(hit, value, 0.0).to(dtype)[None, None]
    hit = hit[None] & selection.to(device)[:, None, None]  # [H, Tq, Tk]
    return base + torch.where(hit, value, 0.0).to(dtype)[None]
