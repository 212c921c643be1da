"""Checkpoints of a run that trains an adapter hold the adapter's tensors, not the frozen base
(tens of megabytes for SmolLM2's, not the whole model's hundreds), and resume only onto the base they
were trained on; a resumed run continues exactly where the checkpoint stopped."""

import os

import pytest
import torch

from demo_training.settings import DemoModelShape, TrainSettings
from demo_training.tests.test_directives import STORIES
from demo_training.train_demo import main as train_main
from demo_training.training import Trainer, build_model, training_lock
from harness.errors import HarnessError
from harness.model.adapters import add_adapters

BASE = {"model_config": "tiny", "gguf_sha256": "0" * 64}
SHAPE = DemoModelShape(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
STREAM = torch.arange(300) % 64


def _adapted(adapter_seed: int, targets=("q_proj", "v_proj"), rank: int = 2):
    torch.manual_seed(0)  # the same base every time
    model = build_model(SHAPE, 0)
    add_adapters(model, rank, 4.0, targets, adapter_seed)
    return model


def _trainer(tmp_path, model, steps: int, base=BASE, monitor_every: int = 2) -> Trainer:
    settings = TrainSettings(seq_len=8, batch_size=2, steps=steps, warmup_steps=1, eval_every=monitor_every, lr=1e-2)
    return Trainer(model, settings, "cpu", tmp_path, [], f"harness-train-demo --steps {steps}", base=base)


def _run(trainer: Trainer, resume: bool = False, monitor=None, keep_best: bool = False) -> Trainer:
    if resume:
        trainer.resume(keep_best=keep_best)
    trainer.run(mixer=None, train_stream=STREAM, held_stream=STREAM, monitor=monitor, keep_best=keep_best)
    return trainer


def _trained(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def test_an_adapter_checkpoint_holds_the_trained_tensors_and_names_its_base(tmp_path):
    first = _run(_trainer(tmp_path, _adapted(1), 2))
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert set(ckpt["model"]) == set(_trained(first.model)) and ckpt["frozen_base"] == BASE
    assert all(torch.equal(ckpt["model"][n], t) for n, t in _trained(first.model).items())
    whole = sum(t.numel() for t in first.model.state_dict().values())
    assert sum(t.numel() for t in ckpt["model"].values()) < whole / 4


def test_a_resumed_adapter_continues_exactly(tmp_path):
    first = _run(_trainer(tmp_path, _adapted(1), 2))
    at_two = _trained(first.model)
    ends = []
    for adapter_seed in (5, 7):  # fresh adapters that start elsewhere: resuming must overwrite them
        resumed = _trainer(tmp_path / f"r{adapter_seed}", _adapted(adapter_seed), 4)
        (tmp_path / f"r{adapter_seed}").mkdir()
        (tmp_path / f"r{adapter_seed}" / "checkpoint.pt").write_bytes((tmp_path / "checkpoint.pt").read_bytes())
        resumed.resume(keep_best=False)
        assert all(torch.equal(p, at_two[n]) for n, p in _trained(resumed.model).items())
        restored, saved = resumed.opt.state_dict()["state"], first.opt.state_dict()["state"]
        assert resumed.start_step == 2 and all(torch.equal(restored[k]["exp_avg"], saved[k]["exp_avg"]) for k in saved)
        ends.append(_trained(_run(resumed).model))
    assert all(torch.equal(ends[0][n], ends[1][n]) for n in ends[0])
    assert any(not torch.equal(ends[0][n], at_two[n]) for n in ends[0])  # and it trained on
    base = {n: t for n, t in _adapted(1).state_dict().items() if n not in at_two}
    final = _adapted(9)
    final.load_state_dict(ends[0], strict=False)
    assert all(torch.equal(final.state_dict()[n], t) for n, t in base.items())  # the base never moved


def test_a_checkpoint_resumes_only_onto_its_base_and_its_adapter_shape(tmp_path):
    _run(_trainer(tmp_path, _adapted(1), 2))
    other_base = _trainer(tmp_path, _adapted(1), 4, base={**BASE, "gguf_sha256": "1" * 64})
    with pytest.raises(HarnessError, match="trained on the base .* resume with the --init-from"):
        other_base.resume(keep_best=False)
    other_targets = _trainer(tmp_path, _adapted(1, targets=("q_proj", "k_proj")), 4)
    with pytest.raises(HarnessError, match="other tensors than this run trains"):
        other_targets.resume(keep_best=False)


def test_a_whole_model_checkpoint_from_before_still_resumes(tmp_path):
    first = _run(_trainer(tmp_path, _adapted(1), 2))
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    del ckpt["frozen_base"]
    ckpt["model"] = first.model.state_dict()  # what checkpoints of adapter runs held before
    torch.save(ckpt, tmp_path / "checkpoint.pt")
    resumed = _trainer(tmp_path, _adapted(5), 4)
    resumed.resume(keep_best=False)
    assert all(torch.equal(p, first.model.state_dict()[n]) for n, p in resumed.model.state_dict().items())


def test_kept_best_weights_of_an_adapter_are_its_tensors_and_come_back(tmp_path):
    contrasts = iter([0.5, 0.1])  # step 1 is kept, step 2 is not
    trainer = _run(_trainer(tmp_path, _adapted(1), 2, monitor_every=1),
                   monitor=lambda model: {"validation_contrast": next(contrasts)}, keep_best=True)
    kept = torch.load(tmp_path / "best.pt", weights_only=True)
    assert set(kept["model"]) == set(_trained(trainer.model)) and kept["frozen_base"] == BASE
    at_two = _trained(trainer.model)
    model, step = trainer.result(keep_best=True)
    assert step == 1 and all(torch.equal(p, kept["model"][n]) for n, p in _trained(model).items())
    assert any(not torch.equal(p, at_two[n]) for n, p in _trained(model).items())


def test_a_second_run_in_a_work_directory_is_refused_while_the_first_trains(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n<|endoftext|>\n".join(f"Story {i}. {' '.join(STORIES)}" for i in range(60)), encoding="utf-8")
    work = tmp_path / "o.work"
    work.mkdir()
    with training_lock(work):  # the first run, still training
        with pytest.raises(HarnessError, match=rf"another harness-train-demo \(pid {os.getpid()}\) is training in"):
            with training_lock(work):
                pass
        rc = train_main(["--corpus", str(corpus), "--out", str(tmp_path / "o"), "--steps", "1",
                       "--layers", "1", "--seq-len", "64", "--resume"])
        assert rc == 2 and "is training in" in capsys.readouterr().err
        assert sorted(p.name for p in work.iterdir()) == [".lock"]  # nothing written
    with training_lock(work):  # released when the first run's block ends
        pass


class _RunsCode:
    """A pickle payload: unpickling it calls ``Path.touch`` on a file (any callable would do)."""

    def __init__(self, target):
        self.target = str(target)

    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (pathlib.Path(self.target),))


@pytest.mark.parametrize("name", ["checkpoint.pt", "best.pt"])
def test_a_crafted_checkpoint_is_refused_and_runs_nothing(tmp_path, name):
    _run(_trainer(tmp_path, _adapted(1), 2, monitor_every=1),
         monitor=lambda model: {"validation_contrast": 1.0}, keep_best=True)
    planted = tmp_path / "planted"
    ckpt = torch.load(tmp_path / name, weights_only=True)
    ckpt["extra"] = _RunsCode(planted)
    torch.save(ckpt, tmp_path / name)
    import pickle

    with pytest.raises(pickle.UnpicklingError):  # the payload is real: a plain unpickle would run it
        torch.load(tmp_path / name, weights_only=True)
    resumed = _trainer(tmp_path, _adapted(5), 4, monitor_every=1)
    with pytest.raises(HarnessError, match="could run code"):
        resumed.resume(keep_best=True)
        resumed.result(keep_best=True)
    assert not planted.exists()
    torch.load(tmp_path / name, weights_only=False)  # proof the payload runs when unpickled
    assert planted.exists()
