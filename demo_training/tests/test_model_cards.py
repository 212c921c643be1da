"""The cards of the shipped models: each is what ``--recard`` writes from the model's records, and
the commands it prints give the settings the records hold."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from demo_training.cards import records_of, rewrite_card
from demo_training.model_card import NOT_TRAINING, settings_command, typed_now
from demo_training.settings import option_changes, parse_command, read_options
from demo_training.tests.support import RECORDS, shipped_copy
from harness.paths import ASSETS_DIR

SHIPPED = ["demo-model", "demo-obedient", "demo-obedient-smollm2"]


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_card_is_what_recard_writes_from_the_records(tmp_path, name):
    """The short card in harness/assets and every measurement in demo_training/records, rebuilt
    byte for byte from the records alone; the card names the command as it is typed now, and no
    module or test set by a name it no longer has."""
    model = shipped_copy(name, tmp_path / name)
    (model / "README.md").write_text("stale")
    assert rewrite_card(model) == model / "measurements.md"
    card = (model / "README.md").read_text()
    assert card == (ASSETS_DIR / name / "README.md").read_text()
    assert (model / "measurements.md").read_text() == (RECORDS / name / "measurements.md").read_text()
    assert not any(old in card for old in ("harness train-demo", "harness/demo", "TEST_SPLIT", "FRESH_TEST"))
    assert len(card) < 12_000  # a card, not a lab notebook (those are the measurements)


def test_a_shipped_models_records_are_in_the_trainer_and_a_trained_models_beside_it(tmp_path):
    for name in SHIPPED:
        assert records_of(ASSETS_DIR / name) == RECORDS / name
        assert not (ASSETS_DIR / name / "training.json").exists()
    copy = shipped_copy("demo-model", tmp_path / "demo-model")
    assert records_of(copy) == copy  # not the shipped directory, though of the same name
    assert records_of(tmp_path / "new") == tmp_path / "new"


def test_the_plain_cards_command_gives_the_recorded_settings():
    """demo-model was trained before commands were recorded: the card's command is the one whose
    options give the settings and shape its training.json holds (not the defaults of today)."""
    stats = json.loads((RECORDS / "demo-model" / "training.json").read_text())
    opts = read_options(parse_command(settings_command(stats)))
    for parsed, recorded in ((asdict(opts.train), stats["settings"]), (asdict(opts.shape), stats["shape"])):
        assert {k: parsed[k] for k in recorded} == recorded  # (settings added since keep their defaults)
    assert "--steps 1200" in settings_command(stats)


def test_the_adapters_legs_rebuilt_from_the_first_and_the_changed_options():
    """The adapter card prints the first leg's command and, leg by leg, the options that changed:
    the first command with each leg's changes appended parses to that leg's own settings."""
    stats = json.loads((RECORDS / "demo-obedient-smollm2" / "training.json").read_text())
    legs = stats["legs"]
    assert len(legs) == 9
    command = legs[0]["command"]
    for before, leg in zip(legs, legs[1:]):
        changes = option_changes(before["command"], leg["command"], ignore=NOT_TRAINING)
        assert changes and not any(c.startswith("without") for c in changes)
        command += " " + " ".join(changes)
        rebuilt, recorded = (vars(parse_command(c)) for c in (command, leg["command"]))
        assert {k: v for k, v in rebuilt.items() if k not in NOT_TRAINING} == {
            k: v for k, v in recorded.items() if k not in NOT_TRAINING}
    assert typed_now(legs[0]["command"]).startswith("harness-train-demo --corpus")
