"""X's next-token choices and output KL along A's continuation Y_A, from one batch's logits.

A B/C condition's prefill gives the logits predicting Y_A[0] (its last position); the teacher-forced
pass along Y_A gives those predicting Y_A[1], Y_A[2], ... (and the EOS, when A stopped on one). From
them: the step log-probabilities, KL(A || X) at every step (``output_kl`` is their mean), X's own
greedy choice and its top-1 minus top-2 margin at every step, and the first step at which X's choice
leaves Y_A (``tf_divergence``). Two arithmetics give these: the stepwise path's (log-softmax of the
whole ``[batch, steps, vocab]``, every earlier version bit for bit) and the read-off one's
(:func:`read_off`: no ``[batch, steps, vocab]`` temporary), one rounding apart.
"""

from __future__ import annotations

import torch

from harness.model.decoding import Continuation

__all__ = ["n_steps", "step_logp", "choices", "read_off", "divergence"]


def n_steps(y: Continuation) -> int:
    """Continuation steps compared by output_kl: each token of Y_A, and the EOS if A stopped on it."""
    return len(y.ids) + int(y.stopped_on_eos)


def step_logp(last_logits: torch.Tensor, tf_logits: torch.Tensor | None, steps: int) -> torch.Tensor:
    """Log-probs ``[batch, steps, vocab]`` predicting Y_A[0], Y_A[1], ... (and EOS)."""
    parts = [last_logits[:, None]] + ([tf_logits] if tf_logits is not None else [])
    return torch.log_softmax(torch.cat(parts, dim=1)[:, :steps].float(), dim=-1)


def read_off(ref_logp: torch.Tensor, last: torch.Tensor, tf_logits: torch.Tensor | None,
             steps: int) -> tuple[torch.Tensor | None, tuple[torch.Tensor, torch.Tensor]]:
    """What ``token_kl`` of :func:`step_logp` and :func:`choices` give along Y_A, ``[batch, steps]``
    each, read straight off the logits (the prefill's last, then the teacher-forced pass's): KL(A || X) as
    sum p_A log p_A - sum p_A z + logsumexp(z) per step, with no log-softmax, concatenation or
    product of the whole ``[batch, steps, vocab]`` ever materialized (at a 262k vocabulary each
    was most of a batch's time). Rounds differently from the stepwise path's arithmetic; a KL that
    rounding takes below zero is zero."""
    parts = [last[:, None]] + ([tf_logits[:, : steps - 1]] if tf_logits is not None and steps > 1 else [])
    if steps == 0:
        empty = torch.zeros(last.shape[0], 0)
        return None, (empty.long(), empty)
    p_a = ref_logp.exp()  # [steps, vocab]
    own = (p_a * torch.where(p_a > 0, ref_logp, torch.zeros_like(ref_logp))).sum(-1)  # sum p_A log p_A
    kl, ids, margins, t = [], [], [], 0
    for z in parts:  # [batch, s, vocab]
        z = z.float()
        s = z.shape[1]
        cross = torch.einsum("sv,bsv->bs", p_a[t:t + s], z)
        kl.append((own[t:t + s] - cross + torch.logsumexp(z, dim=-1)).clamp_min(0.0))
        top2 = z.topk(2, dim=-1).values
        ids.append(z.argmax(dim=-1))
        margins.append(top2[..., 0] - top2[..., 1])
        t += s
    return torch.cat(kl, dim=1), (torch.cat(ids, dim=1), torch.cat(margins, dim=1))


def choices(last: torch.Tensor, tf_logits: torch.Tensor | None, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """X's greedy choice ``[batch, steps]`` at each step along Y_A (the argmax of the logits
    predicting Y_A[t]: the prefill's last for t = 0, the teacher-forced pass's after), and that
    step's top-1 minus top-2 logit margin (how close it came to a tie)."""
    parts = [last[:, None]] + ([tf_logits] if tf_logits is not None else [])
    logits = torch.cat(parts, dim=1)[:, :steps].float()
    if logits.shape[1] == 0:
        empty = torch.zeros(logits.shape[0], 0)
        return empty.long(), empty
    top2 = logits.topk(2, dim=-1).values
    return logits.argmax(dim=-1), top2[..., 0] - top2[..., 1]


def divergence(choices: list[int], y_a: Continuation, stop) -> int:
    """The first step at which X's choice is not A's: another token (or a stop) where A continued,
    or a token where A stopped; ``len(choices)`` when X chooses A's path throughout."""
    for t, token in enumerate(choices):
        if t < len(y_a.ids):
            if token != y_a.ids[t]:
                return t
        elif token not in stop:  # the step A stopped at
            return t
    return len(choices)

