"""``harness-train-demo --lora-rank``: an adapter trained on a model config's model (``model:NAME``)
ships alone (no weights of the base), the harness loads base + adapter exactly as training
evaluated it, ``--re-evaluate`` measures the saved adapter again, and its card is rebuilt by
``--recard`` byte for byte."""

import json

import pytest
import torch

from demo_training.tests.support import PREFIXES, write_jsonl
from demo_training.tests.test_directives import STORIES
from demo_training.train_demo import main as train_main
from harness.model import adapters as A
from harness.model.loading import load_model


def test_train_demo_with_an_adapter_end_to_end(tmp_path, capsys):
    corpus = "\n<|endoftext|>\n".join(f"{name} had a {thing}. {' '.join(STORIES)} {name} smiled at the {thing}."
                                       for name in ["Lily", "Tom", "Mia", "Ben", "Sara", "Max", "Anna", "Sam"]
                                       for thing in ["ball", "boat", "kite", "drum", "hat", "book"])
    (tmp_path / "corpus.txt").write_text(corpus, encoding="utf-8")
    (tmp_path / "valid.txt").write_text("A cat sat on a mat.\n\nThe sun came up and the birds sang.", encoding="utf-8")
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"id": f"s{i}", "text": STORIES[i][:60]} for i in range(2)])
    prefixes = write_jsonl(tmp_path / "prefixes.jsonl", PREFIXES.read_text(encoding="utf-8").splitlines()[:6])
    out = tmp_path / "adapter"
    card_args = ["--eval-prompts", str(prompts), "--eval-prefixes", str(prefixes), "--eval-lengths", "32",
                 "--synthetic-eval-pairs", "1", "--baseline", "model:demo-plain", "--threads", "1"]
    train = ["--corpus", str(tmp_path / "corpus.txt"), "--init-from", "model:demo-plain",
             "--lora-rank", "2", "--lora-targets", "q_proj,v_proj", "--lr", "1e-2", "--directives",
             "--prohibition-share", "0.4", "--paired-prohibitions", "--unquoted-targets",
             "--batch-size", "4", "--seq-len", "128", "--max-context-tokens", "64", "--eval-every", "1",
             "--probe-pairs", "0", "--warmup-steps", "1", "--valid-text", str(tmp_path / "valid.txt"),
             "--out", str(out), *card_args]
    # a first leg that only trains: a checkpoint of the adapter's tensors, nothing saved or measured
    assert train_main(train + ["--steps", "1", "--leg-only"]) in (0, None)
    assert not out.exists() and "stopped at step 1 (--leg-only)" in capsys.readouterr().out
    leg = torch.load(tmp_path / "adapter.work" / "checkpoint.pt", weights_only=True)
    assert leg["step"] == 1 and leg["frozen_base"]["model_config"] == "demo-plain"
    assert leg["model"] and all(".lora_" in name for name in leg["model"])
    rc = train_main(train + ["--steps", "2", "--resume"])
    assert rc in (0, None)
    assert sorted(p.name for p in out.iterdir()) == ["README.md", A.ADAPTER_CONFIG, A.ADAPTER_WEIGHTS, "measurements.md",
                                                     "training.json"]
    stats = json.loads((out / "training.json").read_text())
    description, tensors = A.read_adapter(out)
    assert description["base"]["model_config"] == "demo-plain" and description["rank"] == 2
    n_layers = stats["shape"]["num_hidden_layers"]
    assert len(description["modules"]) == 2 * n_layers
    assert stats["parameters"] == sum(t.numel() for t in tensors.values())
    assert any(t.abs().sum() > 0 for name, t in tensors.items() if name.endswith("lora_B"))  # it trained
    assert [(leg["start_step"], leg["steps"]) for leg in stats["legs"]] == [(0, 1), (1, 2)]

    # what the harness loads (model config's base + the adapter) is what training measured
    plain = load_model("demo-plain", device="cpu")
    adapted = load_model("demo-plain", device="cpu", adapter=str(out))
    ids = torch.tensor([adapted.tokenizer(STORIES[0]).input_ids])
    with torch.no_grad():
        assert not torch.equal(plain.model(ids).logits, adapted.model(ids).logits)
    first = stats["obedient"]["obedience"]
    assert [r["role"] for r in first] == ["test", "test", "validation"]
    assert stats["baseline"]["obedience"][0]["n_prompts"] == 2  # the base, measured with its own tokenizer

    card, short = (out / "measurements.md").read_text(), (out / "README.md").read_text()
    assert "rank 2 and alpha 16" in card and "model config `demo-plain`" in card
    assert f"{stats['parameters']:,} trained" in card and "The targets, on held-out phrasings" in card
    assert "Rank 2, alpha 16" in short and "model config `demo-plain`" in short and "Trained in 2 legs" in short
    for name in ("README.md", "measurements.md"):
        (out / name).write_text("stale")
    assert train_main(["--recard", str(out)]) in (0, None)
    assert (out / "measurements.md").read_text() == card and (out / "README.md").read_text() == short

    weights = (out / A.ADAPTER_WEIGHTS).read_bytes()
    re_evaluate = ["--re-evaluate", str(out), "--corpus", str(tmp_path / "corpus.txt"), *card_args]
    assert train_main(re_evaluate) in (0, None)
    again = json.loads((out / "training.json").read_text())
    assert (out / A.ADAPTER_WEIGHTS).read_bytes() == weights
    assert again["obedient"]["obedience"][0]["summary"] == first[0]["summary"]  # same adapter, same pairs, same rates


def test_an_adapter_needs_a_model_to_adapt(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n<|endoftext|>\n".join(f"Story {i}. {' '.join(STORIES)}" for i in range(60)), encoding="utf-8")
    common = ["--corpus", str(corpus), "--out", str(tmp_path / "o"), "--lora-rank", "4"]
    with pytest.raises(SystemExit) as stop:  # a wrong combination of options: argparse's usage and error
        train_main(common)
    assert stop.value.code == 2 and "--lora-rank needs --init-from" in capsys.readouterr().err
    assert train_main(common + ["--init-from", "model:no-such-model"]) == 2
    assert "no model config 'no-such-model'" in capsys.readouterr().err
