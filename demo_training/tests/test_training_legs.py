"""A run of ``train-demo`` resumed with a longer ``--steps`` ran two learning-rate schedules: the
checkpoint records each invocation that trained (a *leg*), and the card lists them, so the final
command is never presented as the one that made the weights."""

import torch

from demo_training.card_tables import training_legs
from demo_training.settings import DemoModelShape, TrainSettings
from demo_training.training import Trainer, build_model, cosine_lr


def _trainer(tmp_path, steps: int, command: str) -> Trainer:
    torch.manual_seed(0)
    shape = DemoModelShape(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                           num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    settings = TrainSettings(seq_len=8, batch_size=2, steps=steps, warmup_steps=1, eval_every=2)
    return Trainer(build_model(shape, 0), settings, "cpu", tmp_path, [], command)


def _train(trainer: Trainer, resume: bool) -> None:
    stream = torch.arange(200) % 64
    if resume:
        trainer.resume(keep_best=False)
    trainer.run(mixer=None, train_stream=stream, held_stream=stream, monitor=None, keep_best=False)


def test_each_invocation_that_trains_is_a_leg_in_the_checkpoint(tmp_path):
    first = _trainer(tmp_path, 2, "harness train-demo --steps 2")
    _train(first, resume=False)
    assert first.legs == [{"start_step": 0, "steps": 2, "command": "harness train-demo --steps 2"}]

    longer = _trainer(tmp_path, 4, "harness train-demo --steps 4 --resume")
    _train(longer, resume=True)
    assert longer.start_step == 2 and [r["step"] for r in longer.history] == [2, 4]
    second = {"start_step": 2, "steps": 4, "command": "harness train-demo --steps 4 --resume"}
    assert longer.legs == [first.legs[0], second]
    # the second leg's schedule is its own: step 2's rate under --steps 4 is not under --steps 2
    assert cosine_lr(2, longer.settings) != cosine_lr(2, first.settings)

    finished = _trainer(tmp_path, 4, "harness train-demo --steps 4 --resume --out x")
    _train(finished, resume=True)  # nothing left to train: saving and measuring is not a leg
    assert finished.legs == longer.legs


def test_the_card_lists_legs_and_folds_a_plain_resume_into_its_leg():
    settings = {"steps": 240}
    one = {"legs": [{"start_step": 0, "steps": 240, "command": "harness train-demo --steps 240"}], "settings": settings}
    assert training_legs(one) == "" and training_legs({"settings": settings}) == ""
    resumed = {"start_step": 50, "steps": 240, "command": "harness train-demo --steps 240 --resume"}
    interrupted = {"legs": one["legs"] + [resumed], "settings": settings}
    assert training_legs(interrupted) == ""  # killed and resumed unchanged: one schedule, one leg
    legs = {"legs": [{"start_step": 0, "steps": None, "command": None},
                     {"start_step": 120, "steps": 240, "command": "harness train-demo --steps 240 --resume"}],
            "settings": settings}
    text = training_legs(legs)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows == ["| 1-120 | not recorded | not recorded |",
                    "| 121-240 | `--steps 240` | `harness train-demo --steps 240 --resume` |"]
    assert "does not reproduce these weights" in text


def test_a_run_written_over_a_measured_one_records_that_its_test_sets_were_seen(tmp_path):
    import json

    from demo_training.train_demo import earlier_test_looks

    assert earlier_test_looks(tmp_path) == []  # a new output directory
    (tmp_path / "training.json").write_text("{damaged")
    assert earlier_test_looks(tmp_path) == []
    (tmp_path / "training.json").write_text(json.dumps({"selected_step": 40, "command": "c0"}))
    assert earlier_test_looks(tmp_path) == []  # trained, never measured on the test sets
    first = {"selected_step": 120, "command": "c1"}
    (tmp_path / "training.json").write_text(json.dumps({**first, "obedient": {"obedience": []}}))
    assert earlier_test_looks(tmp_path) == [first]
    second = {"selected_step": 200, "command": "c2"}
    (tmp_path / "training.json").write_text(json.dumps({**second, "obedience": [{}], "earlier_test_looks": [first]}))
    assert earlier_test_looks(tmp_path) == [first, second]


def test_both_obedient_cards_say_when_their_test_sets_were_seen_before():
    """The story model's card and the adapter's card carry the same sentence from the same looks."""
    import json

    from demo_training.adapter_card import adapter_card
    from demo_training.cards import obedient_card
    from demo_training.model_card import short_card
    from demo_training.tests.support import RECORDS

    looks = [{"selected_step": 120, "command": "c1"}, {"selected_step": 160, "command": "c2"}]
    for name, card in (("demo-obedient", obedient_card), ("demo-obedient-smollm2", adapter_card)):
        stats = json.loads((RECORDS / name / "training.json").read_text())
        for write in (lambda s: card(s, []), short_card):  # every measurement, and the card that ships
            assert "not a blind first look" not in write({**stats, "earlier_test_looks": []})
            text = write({**stats, "earlier_test_looks": looks})
            assert "measured before, 2 times, on weights saved here before (step 120, 160" in text, name


def test_the_adapter_card_says_when_its_recipe_saw_the_validation_split():
    """``--clause-pairs`` was written after seeing validation failures: a card of a model trained
    with it says the validation split is not blind to that wording; one trained without does not."""
    import json

    from demo_training.adapter_card import _data_text
    from demo_training.tests.support import RECORDS

    stats = json.loads((RECORDS / "demo-obedient-smollm2" / "training.json").read_text())
    stats["mix"]["clause_pairs"] = 0.0
    assert "not blind" not in _data_text(stats)
    stats["mix"]["clause_pairs"] = 0.4
    assert "40% of the grammar pairs are negated inside a clause" in _data_text(stats)
    assert "validation split is not blind" in _data_text(stats)


def test_a_later_test_look_shows_on_the_card_of_the_adapter_it_measured_and_only_that(tmp_path):
    """``later_tests.json`` (test looks taken after training): the measurements and the card show a
    look whose sha256 is the adapter's, with its own verdict against the targets; the measurements
    name, without showing, one taken on another adapter (a retrain into the directory leaves it stale)."""
    import json

    from demo_training.cards import rewrite_card
    from demo_training.tests.support import shipped_copy
    from harness.io import sha256_file

    out = shipped_copy("demo-obedient-smollm2", tmp_path / "adapter")
    (out / "later_tests.json").unlink()
    rewrite_card(out)
    assert "A later test look" not in (out / "measurements.md").read_text()
    assert "written after the adapter was chosen" not in (out / "README.md").read_text()
    report = json.loads((out / "training.json").read_text())["obedient"]["obedience"][0]
    meeting = [{**r, "rate": {"C": 0.8, "F": 0.0, "B": 0.0, "A": 0.0}[r["group"]]} for r in report["summary"]]

    def look(sha, summary):
        return {"set": "a hand-made set", "about": "About it.", "summary": summary, "contrasts": report["contrasts"],
                "adapter_sha256": sha, "command": "python look.py",
                "baseline": {"set": "b", "about": "Without the adapter", "summary": report["summary"]}}

    sha = sha256_file(out / "adapter.safetensors")
    (out / "later_tests.json").write_text(json.dumps({"tests": [look(sha, meeting), look("f" * 64, report["summary"])]}))
    rewrite_card(out)
    short = (out / "README.md").read_text()
    assert "| a hand-made set | this model |" in short and short.count("- a hand-made set: This model meets") == 1
    card = (out / "measurements.md").read_text()
    section = card.split("## A later test look: a hand-made set\nAbout it.")[1]
    assert section.count("Against the targets: This model meets them on the point estimates.") == 1
    assert "Without the adapter:" in section and "`python look.py`" in section
    assert "holds 1 test look(s) of another adapter (sha256 ffffffffffff), not this one's: not shown." in section
    falling = [{**r, "rate": 0.5} if r["group"] == "C" and r["prefix_len"] == 64 else r for r in meeting]
    (out / "later_tests.json").write_text(json.dumps({"tests": [look(sha, falling)]}))
    rewrite_card(out)
    assert "Against the targets: This model falls short: C 0.500 at 64 tokens on a hand-made set." in (
        out / "measurements.md").read_text()
    assert "- a hand-made set: This model falls short: C 0.500 at 64 tokens" in (out / "README.md").read_text()
