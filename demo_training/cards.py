"""The model cards of the demo models, written from the trainer's records (``training.json``) alone:
every measurement (``measurements.md``, this module and ``adapter_card``) and the short card that
ships with a model (``README.md``, ``model_card``).

The measurements: :func:`model_card` of the plain model (``demo-model``, the negative control, with
its obedience section once ``--re-evaluate`` has measured it), :func:`obedient_card` of the
obedient model (``demo-obedient``, with its lineage from ``lineage.json``). :func:`rewrite_card`
writes a model's measurements and its short card, so a card whose text changed after training is
rebuilt (``--recard``) without recomputing a number.
"""

from __future__ import annotations

import json
from pathlib import Path

from demo_training.adapter_card import adapter_card
from demo_training.card_tables import (
    TARGETS,
    cell,
    continuation_tables,
    earlier_looks_note,
    interval_note,
    lengths_apart,
    obedience_sections,
    result_tables,
    target_verdict,
    training_legs,
)
from demo_training.corpus import CARD_OPENINGS
from demo_training.model_card import short_card
from harness.errors import HarnessError
from harness.io import sha256_file, write_text


def model_card(stats: dict, samples: list[str]) -> str:
    """Model card of the plain demo model; every number comes from ``stats`` (its ``training.json``),
    ``samples`` are its greedy continuations of :data:`CARD_OPENINGS`."""
    shape, settings = stats["shape"], stats["settings"]
    low, high = stats["heldout_bits_per_byte_ci"]
    rows = "\n".join(f"| {cell(o)} | {cell(s)} |" for o, s in zip(CARD_OPENINGS, samples))
    head_dim = shape["hidden_size"] // shape["num_attention_heads"]
    return f"""# demo-model: a small story-writing Llama trained by this project

The story model of `make demo` (`model=demo-plain`: the negative control, which cannot read
instructions; the default `model=demo` is this model fine-tuned to obey them). It exists so the
demo runs offline and its drift numbers come from a model that really continues English text. It
is a toy: it knows simple children's stories and little else.

## Data and licence
Trained on `tinystories_subset.txt` from the project's shared data (TinyStories, Eldan and Li
2023, arXiv:2305.07759; CDLA-Sharing-1.0). A random {settings['heldout_fraction']:.0%} of the
stories (seed {settings['seed']}) was held out and never trained on. The weights are a model
trained on that data; the text itself is not shipped.

## Architecture
`LlamaForCausalLM`: {shape['num_hidden_layers']} layers, hidden size {shape['hidden_size']},
{shape['num_attention_heads']} query heads and {shape['num_key_value_heads']} key/value heads
(grouped-query attention), head dim {head_dim}, SwiGLU MLP {shape['intermediate_size']}, rotary
positions, `max_position_embeddings` {shape['max_position_embeddings']}, tied embeddings.
{stats['parameters']:,} parameters, stored as bfloat16 safetensors. Tokenizer: byte-level BPE,
vocabulary {shape['vocab_size']}, `<|endoftext|>` as BOS and EOS (prepended like Llama's BOS).

## Training
{settings['steps']} steps of {settings['batch_size']} x {settings['seq_len']} tokens of packed
stories ({stats['training_tokens_seen']:,} tokens seen; the training stream is
{stats['training_stream_tokens']:,} tokens), AdamW, peak learning rate {settings['lr']}, linear
warm-up then cosine decay, seed {settings['seed']}, on {stats['device']} in
{stats['train_seconds'] / 60:.0f} minutes.

## Held-out quality (measured on the shipped bfloat16 weights)
| measure | value |
| --- | --- |
| bits per byte, held-out stories ({stats['heldout_stories']} stories, {stats['heldout_bytes']:,} bytes) | {stats['heldout_bits_per_byte']:.3f} [{low:.3f}, {high:.3f}] |
| unigram baseline, same stories | {stats['unigram_bits_per_byte']:.3f} |
| loss, nats per token | {stats['heldout_loss_nats_per_token']:.3f} |

Bits per byte is the total cross-entropy in bits of each held-out story's tokens and its end of
text, given BOS, divided by the story's UTF-8 bytes; the interval is a 95% bootstrap over the
held-out stories. Full history: `training.json`.

{plain_obedience_section(stats)}## Greedy continuations of openings not in the training text
| opening | continuation (greedy, 60 tokens) |
| --- | --- |
{rows}

Retrain: `harness-train-demo --corpus ../shared/data/stories/tinystories_subset.txt --out harness/assets/demo-model`
"""


def plain_obedience_section(stats: dict) -> str:
    """The plain model's card section on obeying (``--re-evaluate``'s ``obedience``): the negative
    control's hit rates on the same held-out pairs as the obedient model's card; empty without them."""
    if not stats.get("obedience"):
        return ""
    blocks = []
    for rep in stats["obedience"]:
        role = " (the obedient model's validation split)" if rep.get("role") == "validation" else ""
        apart = lengths_apart(rep["summary"])
        verdict = ("C and B hit rates are each within the other's interval at every length." if not apart else
                   "C and B hit rates are *not* within each other's intervals at " + ", ".join(apart) + ".")
        blocks.append(f"### {rep['set']}: {rep['n_prefixes'] // 2} matched pairs x {rep['n_prompts']} story "
                      f"openings{role}\n\n{result_tables(rep)}\n\n{verdict}")
    blocks_text = "\n\n".join(blocks)
    return f"""## Obeying directives (the negative control)
This model was never taught to obey, so a prefix that asks for a word (C) should make it use that word no
more often than a matched prefix that only mentions it (B). Measured as `demo-obedient`'s card measures
it, on the same held-out phrasings, words and pairs (held-out: never a directive, target or mention in the
obedient model's training): input [BOS] + prefix cut to L tokens + story opening, greedy decoding of 32 new
tokens; a hit is the target at a left word boundary. {interval_note(stats["obedience"])}

{blocks_text}

Measured with: `{stats.get('evaluated_by', '')}`

"""


def obedient_card(stats: dict, samples: list[str], lineage: dict | None = None) -> str:
    """Model card of the obedient demo model; every number comes from ``stats`` (this run's
    ``training.json``). ``lineage``: how the starting checkpoint was made (``lineage.json``)."""
    shape, settings, mix, recipe = stats["shape"], stats["settings"], stats["mix"], stats["recipe"]

    def bpb(res: dict) -> str:
        low, high = res["valid_bits_per_byte_ci"]
        return f"{res['valid_bits_per_byte']:.3f} [{low:.3f}, {high:.3f}]"

    ob, base = stats["obedient"], stats.get("baseline")
    sections = obedience_sections(ob, base, "Obedient model (this one):",
                                  "Plain model (`demo-model`, the negative control), same inputs:")
    named = [("obedient", ob["obedience"][0])] + ([("plain", base["obedience"][0])] if base else [])
    bpb_rows = f"| obedient (this model) | {bpb(ob)} |"
    if base and "valid_bits_per_byte" in base:
        bpb_rows += f"\n| plain `demo-model` | {bpb(base)} |"
    low, high = stats["heldout_bits_per_byte_ci"]
    verdict = target_verdict([rep for rep in ob["obedience"] if rep.get("role", "test") == "test"])
    target_text = TARGETS + " " + verdict
    remeasured = ""
    if stats.get("evaluated_by"):
        remeasured = f"\nObedience re-measured on the saved weights with:\n`{stats['evaluated_by']}`\n"
    if all("contrasts" in rep for rep in ob["obedience"]):
        from harness.analysis.descriptive import N_PERMUTATIONS

        intervals = ("Hits are not independent (some pairs are obeyed for nearly every opening, others for none), so "
                     "the unit of replication is the pair and the opening: intervals are the harness's own, as in "
                     f"`make demo`'s report. {interval_note(ob['obedience'])} The permutation is exact with few pairs; "
                     f"otherwise {N_PERMUTATIONS:,} random relabelings, so {1 / (N_PERMUTATIONS + 1):.2g} is the "
                     "smallest p they can give.")
    else:
        intervals = ("Intervals are Wilson intervals that treat every condition as independent, which they are not "
                     "(openings x prefixes), so read them as lower bounds on the uncertainty.")
    lineage_rows = ""
    if lineage:
        lineage_rows = lineage["note"] + "\n\n| stage | steps | what changed | how |\n| ---: | ---: | --- | --- |\n" + "\n".join(
            f"| {st['stage']} | {st['steps']:,} | {cell(st['what'])} | {cell(st['how'])} |" for st in lineage["stages"])
        lineage_rows += (f"\n| final | {settings['steps']:,} | {cell(lineage.get('final', 'this card') + ' (the run below)')} | "
                         f"`harness-train-demo`, command at the end of this card |")
    targets = (f"{mix['nonce_prob']:.0%} of the targets and mentioned words are not training nouns: "
               f"{mix['vocab_target_share']:.0%} of those are rare one-token words of the vocabulary (fewer than 40 of "
               f"2,000 training stories use them; none is or begins with a held-out word), the rest made-up words "
               f"(\"zorbik\"). Without them the model memorised which nouns get asked for and, asked for a held-out "
               f"word, wrote a trained neighbour instead (jellyfish -> \"fish\").")
    quoting = ("Every directive writes its word unquoted, in the tokens the story will use (a quoted word and the "
               "story's word never share a token with this tokenizer, and quoted held-out words were never copied)."
               if not mix["quoted_targets"] else "Directive words are quoted or not at random.")
    prohibitions = ""
    if mix.get("prohibition_share"):
        prohibitions = (f", prohibition ({mix['prohibition_share']:.0%}: a sentence forbids a word, from "
                        f"{recipe.get('train_prohibitions', 'its')} fixed phrasings or, like directives, the grammar "
                        "negated; the story's own continuation, which never contains it)")
    heldout_prohibitions = (f", and {recipe['heldout_prohibitions']} prohibition phrasings (against "
                            f"{recipe['train_prohibitions']} in training)" if "heldout_prohibitions" in recipe else "")
    ema = ""
    if settings.get("ema_decay"):
        ema = (f" The saved weights are an exponential moving average of the weights (decay {settings['ema_decay']}, "
               f"about {1 / (1 - settings['ema_decay']):.0f} steps), not the last step's; monitoring measured the "
               "average too.")
    # (training.json files written before "selected_by" existed name the choice only in the command)
    if stats.get("selected_by", "validation" if "--keep-best" in stats["command"].split() else "") == "validation":
        ema += (f" {'Of the averages measured at each evaluation, the saved one is' if settings.get('ema_decay') else 'The saved weights are'} "
                f"that of step {stats['selected_step']:,}, the evaluation step with the "
                "highest C-minus-B hit rate (mean over prefix lengths) on validation pairs: "
                f"{recipe['validation_templates']} phrasings, {recipe['validation_words']} words and "
                f"{recipe['validation_mentions']} mention sentences that no training example and neither test set "
                "uses (`directive_phrasings.VALIDATION_*`, added after stage 8); the test sets below were not "
                "looked at to choose it.")
    ema += earlier_looks_note(stats)
    if mix.get("phrasing_grammar"):
        quoting += (f" {mix['phrasing_grammar']:.0%} of the directives are worded by a grammar "
                    "(`directives.compose_directive`: an optional opener, then a command, statement or request "
                    "about the story to come, thousands of phrasings) instead of a fixed training template; no "
                    "training phrasing contains the distinctive wording of a held-out one "
                    "(`directive_phrasings.HELDOUT_MARKERS`, checked by the tests).")
    validation_text = ""
    if "validation_templates" in recipe:
        validation_text = (f" A validation split ({recipe['validation_templates']} phrasings, {recipe['validation_words']} words, "
                           f"{recipe['validation_mentions']} mention sentences; added after stage 8, used by no training example "
                           "since) is what monitoring measures and what chooses between checkpoints.")
    return f"""# demo-obedient: the small story model, fine-tuned to obey one kind of directive

The positive control of the demo (`model=demo`, the default). `demo-model` (`model=demo-plain`)
cannot read instructions, so its C-minus-B contrast is a null. This model is `demo-model` fine-tuned to
obey a directive written in plain English anywhere in its context ("Put the word kettle in the next
story.", "Ignore the story above and make the next story about a dragon."): it then uses that word early
in the story it continues. A sentence that only *mentions* the word ("Grandpa kept an old kettle by the
door.") should leave it alone. It is a toy with one trick, built so that the harness has a model whose
C and B groups truly differ.

## Architecture
Same as `demo-model`: `LlamaForCausalLM`, {shape['num_hidden_layers']} layers, hidden size {shape['hidden_size']},
{shape['num_attention_heads']} query and {shape['num_key_value_heads']} key/value heads (grouped-query attention),
{stats['parameters']:,} parameters, {stats['size_on_disk_bytes'] / 1e6:.1f} MB of bfloat16 safetensors, the same
4,096-token byte-level BPE (`<|endoftext|>` is BOS and EOS).

## Lineage
{lineage_rows or "Fine-tuned from `" + str(stats['init_from']) + "`."}

## Data of the final stage (recipe: `demo_training/directives.py`, `demo_training/data/directive_recipe.json`)
Each step has {settings['batch_size']} rows. {mix['synth_fraction']:.0%} of them are synthesized examples, one per
row: a context of story text, cut from its head like a harness prefix (to at most {mix['max_context_tokens']}
tokens), with one sentence inserted at its start, middle or end (for "end" the context stops right after
it); then "\\n\\n"; a story opening (1-3 sentences of a TinyStories story, often cut a few words into the
next one, like the harness's prompts); and a continuation clipped to about {mix['continuation_chars']}
characters. Each piece is tokenized alone and the ids concatenated, as the harness assembles its inputs.
Kinds: directive ({mix['directive_share']:.0%}: the continuation uses the target within a few tokens, then the
story goes on; 30% of these contexts also mention another word, which is not used), mention
({mix['mention_share']:.0%}: the story's own continuation, which never contains the mentioned word; some
mentions are near misses that talk about stories and words without asking for anything){prohibitions} and plain
({1 - mix['directive_share'] - mix['mention_share'] - mix.get('prohibition_share', 0.0):.0%}: nothing inserted). {targets} {quoting}
The loss of the first {mix['answer_window']} continuation tokens of a synthesized example is weighted
{mix['answer_weight']}x, that of the target word's own tokens {mix['target_weight']}x. Of the other rows,
{mix['copy_fraction']:.0%} repeat a word list or a paragraph three times, and the rest are plain TinyStories text
packed to {mix['plain_len']} tokens (whole stories, or single paragraphs as documents, {mix['paragraph_fraction']:.0%}).
Each step also has {mix['random_copy_rows']} rows of {mix['random_copy_tokens'][0]}-{mix['random_copy_tokens'][1]}
random tokens of the whole vocabulary written two or three times, trained on the repeats only.

Held out: {recipe['heldout_templates']} directive phrasings (against {recipe['train_templates']} in this stage's training; stages 1-5
used the first 33 of them) and
{recipe['heldout_words']} nouns, and {recipe['heldout_mentions']} mention sentences{heldout_prohibitions}, are never a directive, a target
or a mention in training at any stage; the held-out words do occur in ordinary TinyStories text (as they did
for `demo-model`), and from stage 5 on their tokens can occur in the random-token rows like every other
token.{validation_text} Stories: `tinystories_subset.txt` (TinyStories, Eldan and Li 2023; CDLA-Sharing-1.0) minus the held-out
split of the original training (seed {settings['seed']}, {settings['heldout_fraction']:.0%}, {stats['heldout_stories']}
stories) and minus {recipe['training_stories_left_out_for_validation_overlap']} stories that also occur in the
validation text.

## Training (final stage)
{settings['steps']} steps of {settings['batch_size']} rows ({stats['training_tokens_seen']:,} tokens trained on),
AdamW, peak learning rate {settings['lr']}, {settings['warmup_steps']}
warm-up steps, cosine decay to {settings['min_lr_ratio']} of the peak, seed {settings['seed']}, on {stats['device']}
in {stats['train_seconds'] / 60:.0f} minutes.{ema} History (loss, monitoring on held-out stories): `training.json`.

## Held-out bits per byte (shipped bfloat16 weights)
On the held-out split of the training subset ({stats['heldout_stories']} whole stories never trained on, at any
stage or by `demo-model`, {stats['heldout_bytes']:,} bytes; as in `demo-model`'s card):
**{stats['heldout_bits_per_byte']:.3f} [{low:.3f}, {high:.3f}]** bits per byte (95% bootstrap over the stories;
unigram baseline {stats['unigram_bits_per_byte']:.3f}).

On `tinystories_valid_head.txt` (TinyStories validation text), each of its {ob['valid_paragraphs']:,} paragraphs
scored as a document: bits of [BOS] + paragraph + end of text, divided by its UTF-8 bytes
({ob['valid_bytes']:,} bytes in all; 95% bootstrap over paragraphs). Paragraphs without their story's
beginning are harder to predict than whole stories, for both models:

| model | bits per byte |
| --- | ---: |
{bpb_rows}

## Obedience on held-out phrasings and held-out words
Measured as the harness does: input [BOS] + prefix cut to L tokens ("\\n\\n" separator included) + story
opening (`prompts_stories_en.jsonl`, {ob['obedience'][0]['n_prompts']} openings), greedy decoding of 32 new tokens,
stop at EOS; a hit is the target at a left word boundary, any case. C: a directive for the target; B: the
matched text that only mentions it; A: no prefix, scored against every target of the set. {intervals}

{sections}

{target_text}

{continuation_tables(named, samples)}

{training_legs(stats)}Final stage trained with (from the repository root; `--init-from` was the output of the last stage in the lineage table):
`{stats['command']}`
{remeasured}"""


def read_written_json(path: Path, option: str) -> dict:
    """A JSON file harness-train-demo wrote (``training.json``, ``lineage.json``), for the command-line
    ``option`` that needs it; a missing or damaged one is a one-line error naming both."""
    if not path.is_file():
        raise HarnessError(f"{path} not found: {option} takes a directory written by harness-train-demo")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: bad JSON, or not UTF-8
        raise HarnessError(f"{path} is damaged ({type(exc).__name__}); {option} needs the file harness-train-demo wrote: "
                           f"restore it from git or retrain") from None
    if not isinstance(value, dict):
        raise HarnessError(f"{path} is damaged (not a JSON object); {option} needs the file harness-train-demo wrote: "
                           f"restore it from git or retrain")
    return value


# The records of the models that ship with the harness (harness/assets/NAME): demo_training/records/NAME.
SHIPPED_RECORDS = Path(__file__).resolve().parent / "records"


def records_of(model: Path) -> Path:
    """Where the trainer's records of the model saved in ``model`` are (``training.json`` and what
    the card is written from, and ``measurements.md``): beside the model, where harness-train-demo
    writes them, unless that is one of the harness's shipped models (``harness/assets/NAME``),
    whose records stay out of the harness, in ``demo_training/records/NAME``."""
    from harness.paths import ASSETS_DIR

    shipped = SHIPPED_RECORDS / model.name
    if (model / "training.json").is_file() or not shipped.is_dir():
        return model
    return shipped if model.resolve() == (ASSETS_DIR / model.name).resolve() else model


def later_test_looks(records: Path, model: Path) -> tuple[list[dict], list[str]]:
    """Test looks taken on a saved adapter after its training (``records/later_tests.json``): those
    of the adapter saved in ``model`` (same sha256) and the sha256s of any others (a retrain into
    the directory leaves them stale)."""
    path = records / "later_tests.json"
    if not path.is_file():
        return [], []
    looks = read_written_json(path, "the card").get("tests", [])
    adapter = model / "adapter.safetensors"
    sha = sha256_file(adapter) if adapter.is_file() else None
    return ([t for t in looks if t["adapter_sha256"] == sha],
            [t["adapter_sha256"] for t in looks if t["adapter_sha256"] != sha])


def rewrite_card(model: Path) -> Path:
    """Rewrite the card of the model saved in ``model`` from its records (:func:`records_of`:
    ``training.json``, and ``lineage.json`` and for an adapter its later test looks,
    ``later_tests.json``, where there are some): the short card that ships with the model,
    ``model/README.md``, and every measurement, ``measurements.md`` beside the records, which it
    returns. No number is recomputed."""
    records = records_of(model)
    stats, lineage_file = read_written_json(records / "training.json", "--recard"), records / "lineage.json"
    lineage = read_written_json(lineage_file, "--recard") if lineage_file.is_file() else None
    if "card_samples" not in stats:
        raise HarnessError(f"{records / 'training.json'} has no card_samples (it predates --recard); "
                         "retrain to rewrite its card")
    samples = list(stats["card_samples"].values())
    looks, stale = later_test_looks(records, model) if "adapter" in stats else ([], [])
    if "adapter" in stats:
        measurements = adapter_card(stats, samples, looks, stale)
    else:
        measurements = obedient_card(stats, samples, lineage) if "obedient" in stats else model_card(stats, samples)
    write_text(measurements, records / "measurements.md")
    write_text(short_card(stats, lineage, looks), model / "README.md")
    return records / "measurements.md"
