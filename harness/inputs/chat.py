"""Placements (docs/chat.md): where the prefix sits, raw before the task or
in a chat template. Each placement is one entry of :data:`PLACEMENTS` (a new one is one
:func:`_placement` call; the run config's ``prefix.placement`` choices are read from here):

- ``raw``: ``[bos] + prefix + separator + task``, no template (:mod:`harness.inputs.assembly`);
- ``system``: the prefix is the system message (after ``chat.system_prompt`` and "\\n\\n" when one is set);
- ``turn``: an earlier user turn holding the prefix, then the assistant's ``chat.turn_reply``;
- ``document``: inside the task's user message, before the task, between ``chat.document_open``
  and ``chat.document_close`` (the RAG case);
- ``tool``: a tool-result message before the task's user turn (templates with a tool role only, or
  with ``chat.generic_tool_role`` one that renders any role by name: a "tool" turn it never trained on);
- ``direct``: not an injection but its ceiling: the user's own words, before the task in the same
  user message (joined by ``chat.direct_join``), as if the user asked for it. An instruction's obey
  rate here is how often the model does what it is asked directly, the rate the injected placements
  are read against (:func:`harness.analysis.obeying.ceiling_table`).

Whatever the placement, X's token ids are A's with ONE contiguous block inserted (the prefix and
the template text its placement adds); BOS, template tokens, the task and the generation prompt
are token-for-token identical. How: A and X are rendered with the tokenizer's own template, with
placeholders standing for the prefix and the task; the renders are aligned as strings to find
where X's block goes in A; the template pieces around it (head, block wrapper, gap, tail) are
tokenized once each with special tokens parsed (they are template text, the template's BOS
included: no BOS is added here), and the data ids given to :meth:`ChatLayout.assemble` are
spliced in as they are (``harness.inputs.assembly.encode``: data stays data). Consequences:

- Data is never trimmed, escaped or otherwise transformed: a template that ``trim``s content
  (Llama 3, Gemma) or JSON-encodes a tool result (Llama 3) gets the text as it was tokenized
  (Llama's tool result keeps the template's quotes around it, not JSON escapes inside it).
- Where a template would break the invariant (Qwen2.5 injects "You are Qwen, ..." when there is
  no system message, which a system-placed prefix replaces), A and X both get an explicit empty
  system message, unless ``chat.system_prompt`` fixes one for both anyway. If the invariant still
  cannot hold, the placement is refused with a one-line :class:`HarnessError`, never misaligned.
- The render is reproducible: ``date_string`` (Llama 3's "Today Date") is fixed to 26 Jul 2024
  unless ``chat.template_kwargs`` gives one.
- The block's wrapper is tokenized on its own, so a merge across its edge that the tokenizer would
  make on the joined string (".\\n\\n") is not made; A's template tokens are exactly what the
  tokenizer makes of A's render (checked when the layout is built).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.errors import HarnessError
from harness.plugins import load_plugins
from harness.inputs.assembly import Assembled, encode

log = logging.getLogger(__name__)

PREFIX_SLOT, TASK_SLOT = "PREFIXSLOTq7Zx", "TASKSLOTq7Zx"  # letters only: survive trim and tojson
DEFAULT_DATE = "26 Jul 2024"  # Llama 3's own fallback date


@dataclass
class ChatConfig:
    """How chat placements build A and X from the model's chat template (the run config's ``chat``)."""

    # A fixed system message in both A and X: the scaffolding that keeps a template's default system
    # prompt (or a date line) out of the comparison. null: none, unless the template needs one.
    system_prompt: str | None = None
    turn_reply: str = "OK."  # placement=turn: the assistant's reply after the earlier user turn
    document_open: str = "<document>\n"  # placement=document: delimiters around the prefix text
    document_close: str = "\n</document>\n\n"
    # placement=direct: between the user's instruction (the prefix) and the task, in one user message
    direct_join: str = "\n\n"
    # placement=tool on a template that names no tool role but renders any role it is given (plain
    # ChatML, e.g. SmolLM2's): the tool result arrives as a "tool" turn the model was never trained on.
    # Off: such templates refuse placement=tool.
    generic_tool_role: bool = False
    # Passed to apply_chat_template, e.g. {enable_thinking: false} for Qwen3, or a fixed date_string.
    template_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Placement:
    """Where a prefix goes. ``messages(chat, system, base, task)`` gives X's chat messages (with
    :data:`PREFIX_SLOT` and :data:`TASK_SLOT` standing for the data) from A's ``base`` (the system
    message, if any) and ``task`` (the user turn); None for ``raw``, which uses no template.
    ``refuses(template, chat)`` says why a template cannot take it (None: it can)."""

    name: str
    doc: str
    messages: Callable[..., list[dict]] | None
    refuses: Callable[[str, object], str | None]


PLACEMENTS: dict[str, Placement] = {}
CHAT_PLACEMENTS: tuple[str, ...] = ()  # the placements inside a chat template (all but raw)


def register_placement(name: str, doc: str, messages=None, refuses=lambda template, chat: None) -> None:
    """Add a placement (:class:`Placement`'s fields); one with ``messages`` is a chat placement."""
    global CHAT_PLACEMENTS
    PLACEMENTS[name] = Placement(name, doc, messages, refuses)
    CHAT_PLACEMENTS = tuple(n for n, p in PLACEMENTS.items() if p.messages is not None)


def _no_tool_role(template: str, chat) -> str | None:
    if re.search(r"""["'](tool|ipython)["']""", template) or chat.generic_tool_role:
        return None
    return ("the chat template has no tool role; use prefix.placement=document or turn (or "
            "chat.generic_tool_role=true, if it renders any role it is given)")


register_placement("raw", "concatenated before the task, no chat template")
register_placement("system", "the system message", lambda chat, system, base, task: [
    {"role": "system", "content": f"{system}\n\n{PREFIX_SLOT}" if system else PREFIX_SLOT}, *task])
# the chat settings one placement reads (the others ignore them)
READ_BY = {"turn_reply": "turn", "document_open": "document", "document_close": "document", "direct_join": "direct",
           "generic_tool_role": "tool"}


def unread_chat_settings(chat, placement: str, template: str | None, set_by_source: Sequence[str] = ()) -> list[str]:
    """The chat settings given away from their defaults that this run never uses: one another
    placement reads, or a template argument its chat template does not mention (said, not refused:
    an experiment may set them for all the placements it sweeps). ``set_by_source``: keys the prefix
    source's own config sets for the placements that read them (a public benchmark's tool turns),
    which the user never typed and is not told of."""
    defaults, unread = ChatConfig(), []
    for key, reader in READ_BY.items():
        if key in set_by_source:
            continue
        if getattr(chat, key) != getattr(defaults, key) and placement != reader:
            unread.append(f"chat.{key} (read by prefix.placement={reader} only; this run's is {placement})")
    for name in _plain(chat.template_kwargs) if isinstance(template, str) else ():
        if name not in template:
            unread.append(f"chat.template_kwargs.{name} (the model's chat template never mentions {name})")
    return unread


register_placement("turn", "an earlier user turn, answered by chat.turn_reply", lambda chat, system, base, task: [
    *base, {"role": "user", "content": PREFIX_SLOT}, {"role": "assistant", "content": chat.turn_reply}, *task])
register_placement("document", "a document inside the task's user message", lambda chat, system, base, task: [
    *base, {"role": "user", "content": chat.document_open + PREFIX_SLOT + chat.document_close + TASK_SLOT}])
register_placement("tool", "a tool result before the task's user turn", lambda chat, system, base, task: [
    *base, {"role": "tool", "content": PREFIX_SLOT}, *task], _no_tool_role)
register_placement("direct", "the user's own words before the task (the direct-instruction ceiling, not an injection)",
           lambda chat, system, base, task: [
               *base, {"role": "user", "content": PREFIX_SLOT + chat.direct_join + TASK_SLOT}])


class _Misfit(Exception):
    """Why one set of messages cannot satisfy the invariant (the next scaffolding may)."""


@dataclass(frozen=True)
class ChatLayout:
    """Where A's template tokens go and where X's block is inserted, computed once per sweep.

    A = ``head + gap + task + tail``; X = ``head + open + body + close + gap + task + tail``: the
    block is ``open + body + close``. ``pieces`` are the same five parts as text (for previews).
    """

    placement: str
    head: tuple[int, ...]  # template tokens before the block (BOS, system message, ...)
    open: tuple[int, ...]  # the block's wrapper before the prefix text (role header, delimiter)
    close: tuple[int, ...]  # the block's wrapper after it
    gap: tuple[int, ...]  # template tokens between the block and the task (the task's turn header)
    tail: tuple[int, ...]  # after the task: end of its message, the generation prompt
    scaffold: str  # what was added to both A and X for the invariant to hold ("" if nothing)
    pieces: tuple[str, ...]  # head, open, close, gap, tail as rendered text

    def assemble(self, task, body=(), text_span: tuple[int, int] | None = None) -> Assembled:
        """A (empty ``body``) or X (``body``: the prefix's tokens as cut, ``text_span`` locating the
        prefix's own tokens in it), with spans; X is checked against A every time."""
        task, body = list(task), list(body)
        if not task:
            raise HarnessError("a task prompt tokenized to zero tokens")
        b0 = len(self.head)
        if not body:
            t0 = b0 + len(self.gap)
            return Assembled((*self.head, *self.gap, *task, *self.tail), b0, b0, t0, t0 + len(task), b0, b0)
        s0, s1 = text_span or (0, len(body))
        block = (*self.open, *body, *self.close)
        t0 = b0 + len(block) + len(self.gap)
        p0 = b0 + len(self.open)
        x = Assembled((*self.head, *block, *self.gap, *task, *self.tail), p0 + s0, p0 + s1, t0, t0 + len(task),
                      b0, b0 + len(block))
        self._check(x, self.assemble(task), body[s0:s1])
        return x

    def _check(self, x: Assembled, a: Assembled, text: list[int]) -> None:
        """The invariant: X is A with the block inserted, the block holds the prefix tokens, the task
        lies outside it and is the same tokens in both."""
        ids, (b0, b1) = x.input_ids, x.block
        ok = (ids[:b0] + ids[b1:] == a.input_ids and a.block_start == b0
              and b0 <= x.prefix_start <= x.prefix_end <= b1 and list(ids[x.prefix_start:x.prefix_end]) == text
              and x.task_start >= b1 and x.task_start - a.task_start == b1 - b0
              and ids[x.task_start:x.task_end] == a.input_ids[a.task_start:a.task_end])
        if not ok:
            raise HarnessError(f"prefix.placement={self.placement}: X is not A with one block inserted "
                               f"(block {b0}:{b1}, prefix {x.prefix_start}:{x.prefix_end}, task "
                               f"{x.task_start}:{x.task_end}); this is a bug, please report it")

    def preview(self, prefix: str = "⟦prefix⟧", task: str = "⟦task⟧", block: tuple[str, str] = ("", "")) -> str:
        """X's render with ``prefix`` and ``task`` standing for the data (``block`` marks the block)."""
        head, open_, close, gap, tail = self.pieces
        return head + block[0] + open_ + prefix + close + block[1] + gap + task + tail


def chat_layout(tokenizer, placement: str, chat=None, parse_special: bool = False) -> ChatLayout:
    """The layout of ``placement`` in the tokenizer's chat template under ``chat`` settings
    (:class:`ChatConfig`), or a one-line :class:`HarnessError` saying why not."""
    chat = chat if chat is not None else ChatConfig()
    placement = getattr(placement, "value", placement)
    where = f"prefix.placement={placement}"
    if placement not in CHAT_PLACEMENTS:
        raise HarnessError(f"{where}: not a chat placement (use one of {', '.join(CHAT_PLACEMENTS)}, or raw)")
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise HarnessError(f"{where}: the tokenizer has no chat template; use prefix.placement=raw")
    if not isinstance(template, str):
        raise HarnessError(f"{where}: the tokenizer has several named chat templates; this harness uses a single one")
    refusal = PLACEMENTS[placement].refuses(template, chat)
    if refusal:
        raise HarnessError(f"{where}: {refusal}")
    if "strftime_now" in template and "date_string" not in template:
        log.warning("%s: the chat template reads today's date; renders change from day to day", where)
    kwargs = {"date_string": DEFAULT_DATE, **_plain(chat.template_kwargs)}
    for key in ("system_prompt", "turn_reply", "document_open", "document_close", "direct_join"):
        text = getattr(chat, key)
        if text and not parse_special and encode(tokenizer, text, True) != encode(tokenizer, text, False):
            raise HarnessError(f"chat.{key} contains a special-token string; remove it or set special_tokens=control")
    # Scaffolding, tried in turn: none (or chat.system_prompt, when set), then an empty system message.
    attempts = [("" if chat.system_prompt is None else "the system message chat.system_prompt", chat.system_prompt)]
    if chat.system_prompt is None:
        attempts.append(("an empty system message", ""))
    reasons = []
    for scaffold, system in attempts:
        try:
            layout = _layout(tokenizer, placement, chat, system, kwargs, scaffold)
        except _Misfit as exc:
            reasons.append(str(exc))
            continue
        log.info("%s: block = %r + prefix + %r%s", where, layout.pieces[1], layout.pieces[2],
                 f" (A and X both get {layout.scaffold})" if layout.scaffold else "")
        return layout
    also = "; an empty system message in A and X does not help" if len(reasons) > 1 else ""
    drop = ", or set chat.system_prompt=null" if chat.system_prompt is not None else ""
    raise HarnessError(f"{where}: {reasons[0]}{also}; use another prefix.placement (document works with most "
                       f"templates) or raw{drop}")


def _plain(value) -> dict:
    from omegaconf import DictConfig, OmegaConf

    return dict(OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value or {})


def _messages(placement: str, chat, system: str | None) -> tuple[list[dict], list[dict]]:
    """A's and X's messages, with the placeholders standing for the prefix and the task."""
    base = [] if system is None else [{"role": "system", "content": system}]
    task = [{"role": "user", "content": TASK_SLOT}]
    return base + task, PLACEMENTS[placement].messages(chat, system, base, task)


def _render(tokenizer, messages, kwargs, generation_prompt: bool = True) -> str:
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt,
                                             **kwargs)
    except Exception as exc:  # jinja's TemplateError ("System role not supported"), a template bug, ...
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise _Misfit(f"the chat template refuses these messages ({first})") from None


def _split(text: str, slot: str, what: str) -> tuple[str, str]:
    if text.count(slot) != 1:
        raise _Misfit(f"the chat template renders the {what} {text.count(slot)} times, not once")
    before, after = text.split(slot)
    return before, after


def _common(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _layout(tokenizer, placement: str, chat, system: str | None, kwargs: dict, scaffold: str) -> ChatLayout:
    """The layout for one choice of system message, or :class:`_Misfit` saying why it fails."""
    def tok(piece: str) -> list[int]:  # template text: special tokens parsed
        return list(tokenizer(piece, add_special_tokens=False)["input_ids"]) if piece else []

    a_msgs, x_msgs = _messages(placement, chat, system)
    a_text, x_text = _render(tokenizer, a_msgs, kwargs), _render(tokenizer, x_msgs, kwargs)
    a_pre, tail = _split(a_text, TASK_SLOT, "task")
    x_pre, x_tail = _split(x_text, TASK_SLOT, "task")
    if PREFIX_SLOT not in x_pre:
        raise _Misfit("the chat template drops the prefix or puts it after the task")
    x0, x1 = _split(x_pre, PREFIX_SLOT, "prefix")
    if x_tail != tail:
        raise _Misfit(f"the text after the task differs with the prefix present ({tail[:40]!r} vs {x_tail[:40]!r})")
    # X's pre-task text must be A's with one piece inserted at some i, the piece holding the prefix:
    # x_pre = a_pre[:i] + W + a_pre[i:]. Every i in [lo, hi] does; the ambiguity is a rotation of W.
    n, w = len(a_pre), len(x_pre) - len(a_pre)
    cp, cs = _common(a_pre, x_pre), _common(a_pre[::-1], x_pre[::-1])
    lo, hi = max(n - cs, len(x0) + len(PREFIX_SLOT) - w, 0), min(cp, len(x0), n)
    if lo > hi:
        shown = x_pre.replace(PREFIX_SLOT, "<prefix>")[cp:cp + 48]
        raise _Misfit(f"X's template text is not A's with one block inserted: A has {a_pre[cp:cp + 48]!r} where "
                      f"X has {shown!r} (e.g. a default system prompt that the prefix replaces)")
    # Prefer the block to start with the token that opens a turn (the generation prompt's first token),
    # so whole messages are inserted and A's turn header before the task maps onto X's; else as late
    # as possible (document: right after the user header).
    no_gp = _render(tokenizer, a_msgs, kwargs, generation_prompt=False)
    gp = tok(a_text[len(no_gp):]) if a_text.startswith(no_gp) else []
    opener = tokenizer.decode(gp[:1]) if gp else None
    order = sorted(range(lo, hi + 1), key=lambda i: (not (opener and x_pre[i:].startswith(opener)), -i))
    natural = tok(a_pre)
    for i in order:
        head, gap = tok(a_pre[:i]), tok(a_pre[i:])
        if head + gap == natural:
            break
    else:
        raise _Misfit("the template text around the block merges into other tokens when the block is absent")
    bos = getattr(tokenizer, "bos_token", None)
    if bos and a_text.startswith(bos) and natural[:1] != [tokenizer.bos_token_id]:
        raise _Misfit(f"the template's BOS text {bos!r} does not tokenize to the BOS id")
    open_, close = x0[i:], x1[: len(x1) - (n - i)]
    return ChatLayout(placement, tuple(head), tuple(tok(open_)), tuple(tok(close)), tuple(gap), tuple(tok(tail)),
                      scaffold, (a_pre[:i], open_, close, a_pre[i:], tail))


load_plugins("placements")  # entries registered from outside the package (harness.plugins)
