"""The settings of ``harness-train-demo``, and its command line, generated from them.

Every option is a field of one of the dataclasses below, declared once: its default, its type
and, in the field's ``option(...)`` metadata, its help text (and its flag, where that is not the
field's name with dashes). :func:`build_parser` turns the fields into ``argparse`` options and
:func:`read_options` turns the parsed command line back into the dataclasses. A field without
``option`` metadata is a setting the command line does not change.

How a field's type becomes an option: ``int``, ``float``, ``Path`` and ``str`` (also ``| None``)
take one value of that type; a ``bool`` is a switch that stores the opposite of its default
(``--directives``; ``--unquoted-targets`` sets ``quoted_targets`` to False); a tuple of ints is
written as a comma list (``--eval-lengths 32,64,128``).
"""

from __future__ import annotations

import argparse
import shlex
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

import torch

from harness.paths import DATA_DIR

OPTION = "train_demo_option"  # the metadata key that makes a field a command-line option
FINE_TUNING = "fine-tuning and the obedient model"  # the help section of the fine-tuning options


def option(help: str | None = None, *, flag: str | None = None, metavar: str | None = None) -> dict:
    """Field metadata for a command-line option: its ``help`` text, its ``flag`` (default: ``--``
    and the field's name with dashes) and ``metavar`` (default: the flag in capitals)."""
    return {OPTION: {"help": help, "flag": flag, "metavar": metavar}}


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass(frozen=True)
class Command:
    """What one ``harness-train-demo`` command does: what it reads and writes, whether it trains,
    only rewrites a card (``--recard``) or measures a saved model again (``--re-evaluate``), and
    where it runs."""

    corpus: Path | None = field(default=None, metadata=option("<|endoftext|>-separated stories (required)"))
    out: Path | None = field(default=None, metadata=option("where to save the model (required)"))
    recard: Path | None = field(default=None, metadata=option(
        "only rewrite the card of the model saved in DIR from its records (training.json, and lineage.json and "
        "later_tests.json where there are some; beside the model, or for a model shipped in harness/assets in "
        "demo_training/records): DIR/README.md and measurements.md beside the records", metavar="DIR"))
    re_evaluate: Path | None = field(default=None, metadata=option(
        "measure the model saved in DIR on the card's obedience sets (again), with this command's evaluation "
        "options, and rewrite its training.json and card: an obedient model with --baseline, or a plain model as "
        "the negative control (needs --corpus, for the held-out stories; nothing is trained)", metavar="DIR"))
    work_dir: Path | None = field(default=None, metadata=option("checkpoints (default: OUT.work)"))
    device: str = field(default_factory=default_device, metadata=option())
    threads: int | None = field(default=None, metadata=option("torch CPU threads"))
    resume: bool = field(default=False, metadata=option("continue from the work-dir checkpoint"))
    leg_only: bool = field(default=False, metadata=option(
        "train to --steps, write the checkpoint and stop: OUT and its card are left as they are and nothing "
        "is measured (one leg of a run trained in several; the last leg runs without it, saves and measures)"))


@dataclass(frozen=True)
class DemoModelShape:
    """Architecture of the demo model: a Llama with grouped-query attention."""

    vocab_size: int = 4096
    hidden_size: int = 256
    intermediate_size: int = 688
    num_hidden_layers: int = field(default=8, metadata=option(flag="--layers"))
    num_attention_heads: int = 8
    num_key_value_heads: int = 2
    max_position_embeddings: int = 2048


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation settings; the defaults take about an hour on two CPU cores.

    ``ema_decay`` > 0 keeps an exponential moving average of the weights (``torch.optim.swa_utils``),
    which is what is monitored, evaluated and saved: the obedient model's hit rates moved by up
    to 0.15 from one checkpoint to the next, and an average over a few hundred steps does not
    depend on where the last step happened to land."""

    seq_len: int = field(default=512, metadata=option())
    batch_size: int = field(default=16, metadata=option())
    steps: int = field(default=1500, metadata=option())
    lr: float = field(default=3e-3, metadata=option("peak learning rate"))
    min_lr_ratio: float = field(default=0.1, metadata=option())
    warmup_steps: int = field(default=60, metadata=option())
    weight_decay: float = 0.1
    eval_every: int = field(default=100, metadata=option())
    eval_batches: int = 8
    heldout_fraction: float = 0.03
    seed: int = field(default=0, metadata=option())
    ema_decay: float = field(default=0.0, metadata=option(
        "save an exponential moving average of the weights (0.995: about 200 steps)"))


@dataclass(frozen=True)
class FineTuning:
    """How a model is fine-tuned (``--init-from``), whether directive examples are mixed in
    (``--directives``: the obedient model), and how its checkpoint is chosen."""

    init_from: Path | None = field(default=None, metadata=option(
        "fine-tune this saved model with its own tokenizer instead of training from scratch"))
    directives: bool = field(default=False, metadata=option(
        "mix directive and mention examples into the training rows (demo_training.directives)"))
    copy_pretrain_steps: int = field(default=0, metadata=option(
        "before fine-tuning, this many steps of made-up word lists written three times"))
    valid_text: Path | None = field(default=None, metadata=option(
        "tinystories_valid_head.txt: bits per byte with each paragraph as a document"))
    probe_pairs: int = field(default=20, metadata=option(
        "validation pairs measured at every evaluation (half the story openings)"))
    keep_best: bool = field(default=False, metadata=option(
        "save the weights of the evaluation step with the highest validation C-minus-B hit rate instead of the "
        "last step's"))
    lora_rank: int = field(default=0, metadata=option(
        "train a low-rank adapter of this rank on the frozen --init-from model and ship only the adapter "
        "(harness.model.adapters); 0: train every weight"))
    lora_alpha: float = field(default=16.0, metadata=option("the adapter's scale is alpha / rank"))
    lora_targets: str = field(default="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", metadata=option(
        "comma list of the linear layers (by last name) that get an adapter"))


@dataclass(frozen=True)
class MixSettings:
    """What a fine-tuning row is made of (``--directives``).

    A share ``copy_fraction`` of the rows are copy rows (a text, then the same text again: see
    ``DirectiveMixer._copy_item``). A share ``synth_fraction`` of the rows of a batch are synthesized examples (a directive, a
    mention, a prohibition or a plain context+story example, in the given shares; the continuation is clipped
    to about ``continuation_chars``; the context to ``max_context_tokens``, or to
    ``curriculum_context_tokens`` in the first ``curriculum`` share of the steps); the other rows are
    plain text: whole training stories, or single paragraphs of them (with probability
    ``paragraph_fraction``) as their own documents after an end of text, packed to ``plain_len``
    tokens. ``answer_weight`` multiplies the loss of the first ``answer_window`` continuation
    tokens of synthesized examples, and ``target_weight`` that of the target's own tokens there
    (the few tokens that carry the behaviour).

    Targets (``demo_training.directives.TargetSource``): a share ``nonce_prob`` is not a training noun
    but made up, and a share ``vocab_target_share`` of those is a rare one-token word of the
    vocabulary instead (``nonce_prob=1``: no training noun is ever a target, so recalling a
    memorised target cannot pass for obeying). ``quoted_targets=False`` writes every ``{word}``
    slot unquoted, in the tokens the story will use. ``random_copy_rows`` extra rows per step are
    random tokens of the whole vocabulary (``random_copy_tokens`` long) written two or three
    times, with loss on the repeats only: the plain model copies none of such a sequence, and
    without a copy that works for any token, held-out words are replaced by trained neighbours.
    A share ``phrasing_grammar`` of the directives (and of the prohibitions) is worded by
    ``directives.compose_directive`` (``compose_prohibition``: thousands of recombined phrasings)
    instead of one of the fixed training templates. A share ``prohibition_share`` of the synthesized
    examples forbids a word: without them the model wrote whatever word a directive named,
    even a forbidden one."""

    synth_fraction: float = field(default=0.75, metadata=option("share of rows that start with a synthesized example"))
    directive_share: float = field(default=0.65, metadata=option())
    mention_share: float = field(default=0.25, metadata=option())
    prohibition_share: float = field(default=0.0, metadata=option(
        "share of synthesized examples that forbid a word the continuation then never uses"))
    unlikelihood_weight: float = field(default=0.0, metadata=option(
        "weight of -log(1 - p(forbidden word)) at a prohibition's first continuation tokens"))
    paired_prohibitions: bool = field(default=False, metadata=option(
        "draw each prohibition with its matched ask: same context, story and word, the sentence negated "
        "(demo_training.contrast_pairs)"))
    counterfactual_rows: bool = field(default=False, metadata=option(
        "with --paired-prohibitions, a third row per pair: the prohibition's context with the ask's continuation, "
        "trained only to not write the word where the ask wrote it"))
    made_up_verbs: float = field(default=0.0, metadata=option(
        "with --paired-prohibitions, share of grammar command pairs with a made-up verb (only the negator differs)"))
    clause_pairs: float = field(default=0.0, metadata=option(
        "with --paired-prohibitions, share of grammar pairs negated inside a clause about the story "
        "('where X comes up' / 'where X never comes up': directive_phrasings.GRAMMAR_CLAUSE_PAIRS)"))
    label_pairs: float = field(default=0.0, metadata=option(
        "with --paired-prohibitions, share of the other grammar pairs written as a label and the word "
        "('Needed in S: X' / 'Forbidden in S: X': directive_phrasings.GRAMMAR_LABEL_PAIRS)"))
    negation_pairs: float = field(default=0.0, metadata=option(
        "with --paired-prohibitions, share of the grammar pairs that are not clause pairs generated from a "
        "frame and a polar part ('X is welcome in S' / 'X is unwelcome in S': "
        "directive_phrasings.NEGATION_FAMILIES)"))
    unlikelihood_window: int = field(default=0, metadata=option(
        "continuation tokens a prohibition's unlikelihood term covers (0: the first answer-window tokens)"))
    paragraph_fraction: float = field(default=0.5, metadata=option(
        "share of plain documents that are single paragraphs"))
    max_context_tokens: int = field(default=300, metadata=option(
        "cut a synthesized example's context to at most this many tokens"))
    answer_weight: float = field(default=2.0, metadata=option(
        "loss weight of the first continuation tokens of synthesized examples"))
    answer_window: int = 24
    target_weight: float = field(default=20.0, metadata=option(
        "loss weight of the target word's tokens in a directive example's continuation"))
    copy_fraction: float = field(default=0.17, metadata=option(
        "share of rows that are a text followed by the same text (grows copying heads)"))
    copy_repeats: int = field(default=3, metadata=option())
    copy_words: tuple[int, int] = field(default=(6, 16), metadata=option("MIN,MAX words in a copy row's list"))
    copy_list_share: float = field(default=0.6, metadata=option(
        "share of copy rows that are word lists (the rest repeat a paragraph)"))
    copy_warmup: float = field(default=0.08, metadata=option(
        "share of the steps at the start with --copy-warmup-fraction copy rows"))
    copy_warmup_fraction: float = field(default=0.75, metadata=option())
    continuation_chars: int = field(default=100, metadata=option(
        "clip synthesized continuations to about this many characters (whole sentences)"))
    plain_len: int = field(default=256, metadata=option("tokens of a row of plain story text"))
    micro_batch: int = 8
    curriculum: float = field(default=0.35, metadata=option(
        "share of the steps with short contexts (--curriculum-context tokens at most)"))
    curriculum_context_tokens: int = field(default=64, metadata=option(flag="--curriculum-context"))
    nonce_prob: float = field(default=0.6, metadata=option(
        "share of directive targets and mentioned words that are made-up words"))
    nonce_stems: bool = field(default=True, metadata=option(
        "made-up words from syllables only (no stems of real words)", flag="--no-nonce-stems"))
    vocab_target_share: float = field(default=0.0, metadata=option(
        "share of made-up targets that are rare one-token vocabulary words instead"))
    quoted_targets: bool = field(default=True, metadata=option(
        "write every directive's word slot unquoted, as the story will write it", flag="--unquoted-targets"))
    random_copy_rows: int = field(default=0, metadata=option(
        "extra rows per step of random vocabulary tokens written two or three times"))
    random_copy_tokens: tuple[int, int] = (8, 40)
    phrasing_grammar: float = field(default=0.0, metadata=option(
        "share of directives worded by the phrasing grammar instead of a fixed template"))

    @property
    def evaluation_quotes(self) -> tuple[str, ...]:
        """Quote styles of the ``{word}`` slots in synthetic evaluation pairs: none when training
        wrote every target unquoted."""
        return ("", "'") if self.quoted_targets else ("",)


@dataclass(frozen=True)
class CardEvaluation:
    """What the obedient model's card is measured on (``--directives``, ``--re-evaluate``): the
    story openings, a prefix set of matched C/B pairs, ``synthetic_pairs`` more pairs built from
    held-out stories, the prefix lengths, and a ``baseline`` model measured the same way (None: none)."""

    prompts: Path = field(default=DATA_DIR / "prompts_stories_en.jsonl", metadata=option(flag="--eval-prompts"))
    prefixes: Path = field(default=DATA_DIR / "prefixes_stories_directives.jsonl",
                           metadata=option(flag="--eval-prefixes"))
    lengths: tuple[int, ...] = field(default=(32, 64, 128, 256), metadata=option(flag="--eval-lengths"))
    synthetic_pairs: int = field(default=44, metadata=option(
        "also evaluate on this many synthetic held-out pairs built from held-out stories",
        flag="--synthetic-eval-pairs"))
    baseline: Path | None = field(default=None, metadata=option(
        "a model measured the same way for the card (the plain demo model; model:NAME for a model config)"))
    valid_paragraphs: int | None = field(default=None, metadata=option(
        "score bits per byte on the first N paragraphs of --valid-text only (default: all 4,300; a 135M model "
        "needs about half an hour for all on two CPU cores)"))
    prompt_limit: int | None = field(default=None, metadata=option(
        "measure on the first N story openings of --eval-prompts only (default: all; a 135M model needs "
        "about 0.7 s a condition on two CPU cores)", flag="--eval-prompt-limit"))


# The dataclasses whose fields are options, in the order of the help, and each one's help section
# (None: the main one).
SECTIONS = [(Command, None), (TrainSettings, None), (DemoModelShape, None),
            (FineTuning, FINE_TUNING), (MixSettings, FINE_TUNING), (CardEvaluation, FINE_TUNING)]


@dataclass(frozen=True)
class Options:
    """A parsed ``harness-train-demo`` command line, one dataclass per section."""

    command: Command
    train: TrainSettings
    shape: DemoModelShape
    fine_tuning: FineTuning
    mix: MixSettings
    card: CardEvaluation


def ints(text: str) -> tuple[int, ...]:
    """A comma list of integers (``32,64,128``)."""
    return tuple(int(x) for x in text.split(","))


def _value_type(annotation) -> type:
    """The type of a field's values, without ``| None``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
    return typing.get_origin(annotation) or annotation


def flag_of(f) -> str:
    """An option field's flag: ``--`` and its name with dashes, unless its metadata names another."""
    return f.metadata[OPTION]["flag"] or "--" + f.name.replace("_", "-")


def add_options(parser, cls: type) -> None:
    """Add the option fields of dataclass ``cls`` to ``parser`` (an argument parser or group)."""
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        meta = f.metadata.get(OPTION)
        if meta is None:
            continue
        flag = flag_of(f)
        default = f.default_factory() if f.default is MISSING else f.default
        kind = _value_type(hints[f.name])
        kwargs: dict = {"dest": f.name, "default": default, "help": meta["help"]}
        if kind is bool:
            kwargs["action"] = "store_false" if default else "store_true"
        else:
            kwargs["metavar"] = meta["metavar"] or flag.lstrip("-").replace("-", "_").upper()
            if kind is tuple:  # a comma list; argparse converts the default string too
                kwargs.update(type=ints, default=",".join(map(str, default)))
            elif kind is not str:
                kwargs["type"] = kind
        parser.add_argument(flag, **kwargs)


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The ``harness-train-demo`` command line: the option fields of :data:`SECTIONS`."""
    names = [f.name for cls, _ in SECTIONS for f in fields(cls) if OPTION in f.metadata]
    if len(set(names)) < len(names):  # each option's value is read back by its field's name
        raise TypeError(f"two option fields share a name: {sorted(n for n in set(names) if names.count(n) > 1)}")
    parser = argparse.ArgumentParser(prog="harness-train-demo", description=description)
    groups = {None: parser}
    for cls, section in SECTIONS:
        if section not in groups:
            groups[section] = parser.add_argument_group(section)
        add_options(groups[section], cls)
    return parser


def read_options(namespace: argparse.Namespace) -> Options:
    """The dataclasses of a parsed command line; fields that are not options keep their defaults."""

    def read(cls):
        return cls(**{f.name: getattr(namespace, f.name) for f in fields(cls) if OPTION in f.metadata})

    return Options(command=read(Command), train=read(TrainSettings), shape=read(DemoModelShape),
                   fine_tuning=read(FineTuning), mix=read(MixSettings), card=read(CardEvaluation))


# The spellings of a recorded command: the command itself, and the harness's own command that it
# was while the trainer was part of the harness (the same options).
PROGRAMS = (["harness-train-demo"], ["harness", "train-demo"])


def parse_command(command: str) -> argparse.Namespace:
    """A recorded command line (``training.json``'s ``command``, a leg's, ``evaluated_by``), parsed."""
    argv = shlex.split(command)
    program = next((len(p) for p in PROGRAMS if argv[:len(p)] == p), None)
    if program is None:
        raise ValueError(f"not a harness-train-demo command: {command[:80]!r}")
    return build_parser().parse_args(argv[program:])


def option_changes(before: str, after: str, ignore: tuple[str, ...] = ()) -> list[str]:
    """The options in which recorded command ``after`` differs from ``before``, as they would be
    written (``--lr 0.003``, ``--keep-best``; a switch turned off is ``without --keep-best``),
    in the order of the help; fields named in ``ignore`` are left out."""
    old, new = vars(parse_command(before)), vars(parse_command(after))
    out = []
    for cls, _ in SECTIONS:
        for f in fields(cls):
            if OPTION not in f.metadata or f.name in ignore or old[f.name] == new[f.name]:
                continue
            value = new[f.name]
            if isinstance(value, bool):
                default = f.default_factory() if f.default is MISSING else f.default
                out.append(flag_of(f) if value != default else f"without {flag_of(f)}")
            else:
                out.append(f"{flag_of(f)} {','.join(map(str, value)) if isinstance(value, tuple) else value}")
    return out
