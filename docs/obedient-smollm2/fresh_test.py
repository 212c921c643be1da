"""A test look at the SmolLM2 adapter on a test split written after it was chosen (issue #28;
"A third test split" and "Leg 10" in README.md here): 40 matched triples of the third split
(``split_prefixes(held, "FRESH_TEST", 40, seed=3)``) or, with ``--split fourth``, of the
fourth (``"FOURTH_TEST"``, seed 4) or, with ``--split fifth``, of the fifth (``"FIFTH_TEST"``,
seed 5): words, asks, prohibitions and mentions used by nothing else, x 12 story openings,
prefix lengths 32 / 64 / 128, greedy 32 tokens. The verdict, fixed before
the first run, is on the card's 6 openings (the first 6 of ``prompts_stories_en.jsonl``, on which
the adapter was chosen): asked >= 0.7, forbidden <= 0.1, mentioned <= 0.1 and forbidden <=
mentioned at every length. Openings 7-12, which no check had used, are reported beside it.

    .venv/bin/python docs/obedient-smollm2/fresh_test.py [--split fourth|fifth] CHECKPOINT|base OUT.json [card]

CHECKPOINT as for ``validation_check.py`` (``base``: SmolLM2 without an adapter, for the rates
beside it); ``card``: the card's 6 openings only. About 22 minutes on two CPU cores (10 with
``card``). Run from the repository root. Then

    .venv/bin/python docs/obedient-smollm2/fresh_test.py entry ADAPTER.json BASE.json DIR

adds the look to ``DIR/later_tests.json`` (the adapter's directory; its card shows it after
``harness train-demo --recard DIR``)."""

import json
import shlex
import sys
from pathlib import Path

from validation_check import LENGTHS, held_out_stories, merged_model

from harness.config import DATA_DIR
from harness.demo import obedience
from harness.demo.card_tables import target_shortfalls
from harness.demo.evaluation import split_prefixes
from harness.errors import HarnessError
from harness.inputs.texts import load_prompts
from harness.io import sha256_file, write_json

N_TRIPLES = 40
# split: (lists in directive_recipe.json, seed of the triples, when it was written)
SPLITS = {
    "third": ("FRESH_TEST", 3, "after the replay's step 800 (shipped then) had been trained, chosen on the validation "
              "split and measured twice on the test sets above"),
    "fourth": ("FOURTH_TEST", 4, "after the third split had been measured on the replay's step 800 (its overall rates "
               "seen, not which phrasings failed)"),
    "fifth": ("FIFTH_TEST", 5, "after the leg-11 recipe (`--negation-pairs`) had been committed, by a writer who had "
              "not seen which phrasings failed on the earlier splits"),
}
OPENINGS = {"card": slice(0, 6), "other": slice(6, 12)}


def hits_by(rows: list[dict], key) -> dict:
    """Hits per group and ``key(row)``, over all lengths: where the hits come from."""
    table: dict = {}
    for r in rows:
        if r["group"] != "A":
            cell = table.setdefault(str(key(r)), {"C": 0, "F": 0, "B": 0, "n": 0})
            cell[r["group"]] += r["hit"]
            cell["n"] += r["group"] == "C"
    return table


def measure(model, tokenizer, prompts, triples) -> dict:
    res = obedience.evaluate_obedience(model, tokenizer, prompts, triples, LENGTHS)
    rate = {(r["group"], r["prefix_len"]): r["rate"] for r in res["summary"]}
    return {
        "openings": [p.id for p in prompts],
        "rates": {f"{g}{n}": round(r, 3) for (g, n), r in sorted(rate.items())},
        # the targets on point estimates, as the card's verdict reads them
        "passes": not target_shortfalls([{"set": "", "summary": res["summary"]}], LENGTHS),
        "summary": res["summary"], "contrasts": obedience.contrasts(res["rows"]),
        "hits_per_triple": hits_by(res["rows"], lambda r: r["pair"]),
        "hits_per_phrasing": hits_by(res["rows"], lambda r: int(r["pair"].split("-")[1]) % 12),
        "hits_per_opening": hits_by(res["rows"], lambda r: r["prompt_id"]),
        "rows": res["rows"],
    }


def main(checkpoint: Path | None, out: Path, parts: tuple[str, ...] = tuple(OPENINGS), split: str = "third") -> dict:
    if out.exists():
        raise HarnessError(f"{out} exists: a test look is written once; choose another path")
    model, tokenizer, step = merged_model(checkpoint)
    lists, seed, _ = SPLITS[split]
    triples = split_prefixes(held_out_stories(), lists, N_TRIPLES, seed=seed, quotes=("",))
    prompts = load_prompts(DATA_DIR / "prompts_stories_en.jsonl")
    record = {
        "checkpoint": str(checkpoint or "base"), "step": step,
        "sha256": sha256_file(checkpoint) if checkpoint else None,
        "triples": [{"pair": t.pair, "id": t.id, "target": t.target, "check": t.check} for t in triples],
        "verdict_on": "card", "split": split,
    }
    for name in parts:
        part = OPENINGS[name]
        record[name] = measure(model, tokenizer, prompts[part], triples)
        print(json.dumps({name: {k: record[name][k] for k in ("openings", "rates", "passes")}}), flush=True)
    write_json(record, out)
    return record


def _report(part: dict, about: str, name: str) -> dict:
    keys = ("summary", "contrasts", "openings")
    return {"set": name, "about": about, **{k: part[k] for k in keys},
            "n_prompts": len(part["openings"]), "n_prefixes": 3 * N_TRIPLES}


def set_name(split: str) -> str:
    return f"the {split} test split"


def about(split: str) -> str:
    lists, _, when = SPLITS[split]
    return (f"{N_TRIPLES} matched triples (ask, prohibition, mention of one word) written on 2026-12-02, {when}, and "
            f"before any model ran on them: words, phrasings and mentions no other list uses (`{lists}_*` in "
            "`harness/data/directive_recipe.json`), in held-out stories, on the card's 6 openings. The verdict rule "
            "was fixed before the run (docs/obedient-smollm2/README.md).")


def card_entry(adapter: dict, base: dict, command: str) -> dict:
    """The look as ``later_tests.json`` holds it (``harness.demo.cards.later_test_looks``)."""
    split = adapter.get("split", "third")  # (the third split's first looks were written without the key)
    name = set_name(split)
    look = _report(adapter["card"], about(split), name)
    look.update(adapter_sha256=adapter["sha256"], command=command, passes=adapter["card"]["passes"])
    if "other" in adapter:
        look["other_openings"] = _report(adapter["other"], "The same triples on openings 7-12 of "
                                         "`prompts_stories_en.jsonl`, which no check had used",
                                         f"{name}, openings 7-12")
    look["baseline"] = _report(base["card"], "The base model without the adapter, the card's openings",
                               f"{name}, base model")
    return look


def add_entry(adapter_json: Path, base_json: Path, directory: Path) -> None:
    adapter, base = (json.loads(p.read_text(encoding="utf-8")) for p in (adapter_json, base_json))
    split = adapter.get("split", "third")
    if base["checkpoint"] != "base" or adapter["sha256"] is None or base.get("split", "third") != split:
        raise HarnessError(f"{adapter_json} must be an adapter's look and {base_json} the base model's, on one split")
    flag = [] if split == "third" else ["--split", split]
    card_only = [] if "other" in adapter else ["card"]
    command = " && ".join(shlex.join([".venv/bin/python", "docs/obedient-smollm2/fresh_test.py", *flag, *args])
                          for args in ([adapter["checkpoint"], str(adapter_json), *card_only],
                                       ["base", str(base_json), "card"]))
    path = directory / "later_tests.json"
    tests = json.loads(path.read_text(encoding="utf-8"))["tests"] if path.is_file() else []
    tests = [t for t in tests if (t["set"], t["adapter_sha256"]) != (set_name(split), adapter["sha256"])]
    write_json({"tests": tests + [card_entry(adapter, base, command)]}, path)


if __name__ == "__main__":
    if sys.argv[1:2] == ["entry"] and len(sys.argv) == 5:
        try:
            add_entry(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
        except HarnessError as error:
            raise SystemExit(f"error: {error}") from None
        raise SystemExit(0)
    args = sys.argv[1:]
    split = "third"
    if args[:1] == ["--split"] and len(args) > 1 and args[1] in SPLITS:
        split, args = args[1], args[2:]
    if len(args) not in (2, 3) or args[2:] not in ([], ["card"]):
        raise SystemExit(__doc__)
    try:
        checkpoint = None if args[0] == "base" else Path(args[0])
        main(checkpoint, Path(args[1]), tuple(args[2:]) or tuple(OPENINGS), split)
    except HarnessError as error:
        raise SystemExit(f"error: {error}") from None
