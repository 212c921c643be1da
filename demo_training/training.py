"""Training the demo models: the model, the learning-rate schedule, the losses, and the loop with
its checkpoints.

:class:`Trainer` runs AdamW over either random windows of the packed story stream (the plain
model) or the mixer's weighted rows (``--directives``), keeps an optional moving average of the
weights, and writes a checkpoint to the work directory at every evaluation, so that an
interrupted run continues with ``--resume`` exactly where it stopped.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, fields
from functools import partial
from pathlib import Path

import torch

from demo_training.checkpoints import load_checkpoint
from demo_training.settings import DemoModelShape, TrainSettings
from harness.errors import HarnessError
from harness.io import atomic_write


def build_model(shape: DemoModelShape, eot_id: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        **asdict(shape),
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=eot_id,
        eos_token_id=eot_id,
        pad_token_id=eot_id,
        attention_dropout=0.0,
    )
    return LlamaForCausalLM(config)


MODEL_CONFIG = "model:"


def load_pretrained(path: Path, device: str):
    """``(model, tokenizer, shape, identity)`` of a trained model to fine-tune (``--init-from``) or
    compare against (``--baseline``), in float32: a saved directory, or ``model:NAME``, a model
    config of the harness (``harness/conf/model/NAME.yaml``: a GGUF file from an installed package,
    with its adapter if it names one), loaded as a sweep loads it. ``identity``: what an adapter
    trained on it records of its base."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    reference = str(path)
    if reference.startswith(MODEL_CONFIG):
        from harness.config import compose
        from harness.model.loading import load_from_config

        name = reference[len(MODEL_CONFIG):]
        try:
            m = compose([f"model={name}"]).model
        except Exception as exc:  # Hydra's "could not find" names the config group's choices
            raise HarnessError(f"{reference}: no model config {name!r} ({type(exc).__name__}); the names are "
                               f"those of harness/conf/model/*.yaml") from None
        loaded = load_from_config(m, device=device, dtype="float32")
        model, tokenizer = loaded.model, loaded.tokenizer
        identity = {"model_config": name, "name_or_path": m.name_or_path,
                    **{k: (loaded.source or {})[k] for k in ("gguf_file", "gguf_sha256", "dequantized_to")
                       if k in (loaded.source or {})}}
    else:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
        identity = {"trained_on": reference}
    shape = DemoModelShape(**{f.name: getattr(model.config, f.name) for f in fields(DemoModelShape)})
    return model, tokenizer, shape, identity


def load_saved(path: Path, device: str):
    """``(model, tokenizer)`` that ``harness-train-demo`` saved in ``path``, in float32: its weights, or, for
    an adapter (``--lora-rank``), the base it names (``model:NAME``) with the adapter merged."""
    from harness.model.adapters import ADAPTER_CONFIG, merge_adapter, read_adapter

    if not (Path(path) / ADAPTER_CONFIG).is_file():
        return load_pretrained(path, device)[:2]
    base = read_adapter(Path(path))[0].get("base", {})
    if "model_config" not in base:
        raise HarnessError(f"the adapter in {path} does not name its base as a model config (model:NAME); "
                           f"it cannot be loaded again")
    model, tokenizer, _, identity = load_pretrained(Path(MODEL_CONFIG + base["model_config"]), "cpu")
    merge_adapter(model, Path(path), identity.get("gguf_sha256"))
    return model.to(device), tokenizer


def save_model(model, tokenizer, out: Path) -> int:
    """Save bfloat16 safetensors weights, greedy generation settings and the tokenizer to ``out``;
    returns the size of the weights in bytes."""
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    model.generation_config.do_sample = False
    model.generation_config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return sum(f.stat().st_size for f in out.glob("*.safetensors"))


def cosine_lr(step: int, settings: TrainSettings) -> float:
    """Linear warm-up, then cosine decay to ``min_lr_ratio`` of the peak."""
    if step < settings.warmup_steps:
        return settings.lr * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    floor = settings.min_lr_ratio
    return settings.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def sample_batch(stream: torch.Tensor, settings: TrainSettings, gen: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(stream) - settings.seq_len - 1, (settings.batch_size,), generator=gen)
    return torch.stack([stream[s : s + settings.seq_len + 1] for s in starts.tolist()])


def next_token_loss(model, batch: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``batch[:, 1:]`` given ``batch[:, :-1]``; batch: [B, seq_len + 1]."""
    logits = model(input_ids=batch[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), batch[:, 1:].flatten())


def _losses_and_logits(model, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of each token of ``batch[:, 1:]`` given the tokens before it [B, T], and the
    float32 logits it came from [B, T, vocab], for a batch of [B, T + 1]."""
    logits = model(input_ids=batch[:, :-1]).logits.float()
    ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(), reduction="none")
    return ce.view(batch.shape[0], -1), logits


def token_losses(model, batch: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each token of ``batch[:, 1:]`` given the tokens before it: [B, T] for a
    batch of [B, T + 1]."""
    return _losses_and_logits(model, batch)[0]


def weighted_loss(model, batch: torch.Tensor, weights: torch.Tensor, total_weight: float,
                  avoid: torch.Tensor | None = None, unlikelihood_weight: float = 0.0) -> torch.Tensor:
    """Cross-entropy of ``batch[:, 1:]``, each target token weighted by ``weights``, summed and
    divided by ``total_weight`` (the weight of the whole step, over all its micro-batches).

    With ``avoid`` [B, T] (a token id per position, -1 for none) and ``unlikelihood_weight`` > 0,
    adds ``unlikelihood_weight * -log(1 - p(avoid))`` at each such position (Welleck et al. 2019):
    the forbidden word's probability is pushed down directly, where plain cross-entropy on the
    story's own continuation only lowers it by raising other tokens."""
    ce, logits = _losses_and_logits(model, batch)
    loss = (ce * weights).sum()
    if avoid is not None and unlikelihood_weight > 0 and bool((avoid >= 0).any()):
        at = avoid >= 0
        logp = torch.log_softmax(logits[at], dim=-1).gather(-1, avoid[at].unsqueeze(-1)).squeeze(-1)
        loss = loss + unlikelihood_weight * -torch.log1p(-logp.exp().clamp(max=1 - 1e-6)).sum()
    return loss / total_weight


@torch.no_grad()
def heldout_loss(model, stream: torch.Tensor, settings: TrainSettings, device: str) -> float:
    """Mean next-token loss (nats) on fixed, evenly spaced held-out windows."""
    model.eval()
    n = settings.eval_batches * settings.batch_size
    span = settings.seq_len + 1
    starts = torch.linspace(0, len(stream) - span - 1, n).long().tolist()
    losses = []
    for i in range(0, n, settings.batch_size):
        batch = torch.stack([stream[s : s + span] for s in starts[i : i + settings.batch_size]]).to(device)
        losses.append(next_token_loss(model, batch).item())
    model.train()
    return sum(losses) / len(losses)


@contextlib.contextmanager
def training_lock(work: Path) -> Iterator[None]:
    """Hold ``work``'s lock (``work/.lock``, with the holder's pid) while a run trains there: two
    runs in one work directory would train on one checkpoint and overwrite each other's, so the
    second is refused before it trains or writes anything. The lock goes when the process ends,
    however it ends."""
    import fcntl

    fd = os.open(work / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise HarnessError(f"another harness-train-demo (pid {holder}) is training in {work}; wait for it to "
                               f"finish, or stop it, before resuming there") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def checkpoint_path(work: Path) -> Path:
    """Where a run in work directory ``work`` keeps its checkpoint (what ``--resume`` continues)."""
    return work / "checkpoint.pt"


def trained_parameter_names(model) -> set[str] | None:
    """Names of ``model``'s parameters that train when part of it is frozen (an adapter on its
    base): what its checkpoints keep. None when every parameter trains (they keep the whole model)."""
    params = dict(model.named_parameters())
    names = {name for name, p in params.items() if p.requires_grad}
    return names if len(names) < len(params) else None


def load_weights(model, state: dict[str, torch.Tensor], frozen_base: dict | None, path: Path, *,
                 base: dict | None, trained_names: set[str] | None) -> None:
    """Load what a checkpoint (or ``best.pt``) keeps of a model into ``model``: a whole state
    strictly (``frozen_base`` None); otherwise the trained tensors only, onto the base they were
    trained on (``base``, ``load_pretrained``'s identity) and exactly ``trained_names``, so that
    an adapter never lands on another base or in another shape. ``path``: named in the errors."""
    if frozen_base is None:  # a whole model (also what checkpoints of adapters held before)
        model.load_state_dict(state)
        return
    if frozen_base != (base or {}):
        raise HarnessError(f"{path} holds tensors trained on the base {frozen_base}, but this run loads "
                           f"{base}; resume with the --init-from it was started with")
    if set(state) != (trained_names or set()):
        raise HarnessError(f"{path} holds other tensors than this run trains (another --lora-rank or "
                           f"--lora-targets?); resume with the settings it was started with")
    model.load_state_dict(state, strict=False)


class Trainer:
    """The optimisation of one run: AdamW (weight decay on matrices only) on :func:`cosine_lr`, the
    moving average of the weights when ``settings.ema_decay`` > 0, the history of evaluations and
    a checkpoint in ``work`` after each. With ``--keep-best`` the watched weights of each evaluation
    that beats every one before it on the validation contrast are kept in ``work/best.pt``.
    ``copy_history``: the copy pre-training's (``mixer.copy_pretrain``), recorded in checkpoints.
    ``base``: the identity of a frozen base (``load_pretrained``'s) when only part of the model
    trains (an adapter): its checkpoints then hold the trained tensors only (tens of megabytes, not
    the whole model's hundreds) and resume only onto the same base.
    ``command``: this invocation's command line. Each invocation that trains is a *leg*
    (``self.legs``: its first step, its ``--steps`` and its command, kept in the checkpoint), so a
    run resumed with other settings, a longer ``--steps`` (another cosine schedule) for one, says so
    on its card instead of showing only the last command."""

    def __init__(self, model, settings: TrainSettings, device: str, work: Path, copy_history: list[dict],
                 command: str = "", base: dict | None = None):
        self.model, self.settings, self.device, self.base = model, settings, device, base
        trained = [p for p in model.parameters() if p.requires_grad]  # not an adapter's frozen base
        self.trained_names = trained_parameter_names(model)  # what checkpoints keep
        decay = [p for p in trained if p.dim() >= 2]
        no_decay = [p for p in trained if p.dim() < 2]
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=settings.lr,
            betas=(0.9, 0.95),
        )
        self.gen = torch.Generator().manual_seed(settings.seed)
        self.ema = None
        if settings.ema_decay:
            from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

            self.ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(settings.ema_decay))
        self.ckpt_path, self.best_path = checkpoint_path(work), work / "best.pt"
        self.start_step, self.history, self.elapsed, self.tokens_seen = 0, [], 0.0, 0
        self.copy_history = copy_history
        self.command, self.legs = command, []
        self.train_seconds = 0.0

    @property
    def watched(self):
        """What is monitored, evaluated and saved: the moving average when there is one."""
        return self.ema.module if self.ema is not None else self.model

    def resume(self, keep_best: bool) -> None:
        """Continue from the work directory's checkpoint, when there is one."""
        if not self.ckpt_path.exists():
            return
        ckpt = load_checkpoint(self.ckpt_path)
        load_weights(self.model, ckpt["model"], ckpt.get("frozen_base"), self.ckpt_path,
                     base=self.base, trained_names=self.trained_names)
        self.opt.load_state_dict(ckpt["opt"])
        self.gen.set_state(ckpt["gen"])
        if (self.ema is not None) != ("ema" in ckpt):
            raise HarnessError(f"{self.ckpt_path} was written {'with' if 'ema' in ckpt else 'without'} "
                             "--ema-decay; resume with the settings it was started with")
        if self.ema is not None:
            self.ema.load_state_dict(ckpt["ema"])
        self.start_step, self.history, self.elapsed = ckpt["step"], ckpt["history"], ckpt["elapsed"]
        self.tokens_seen = ckpt.get("tokens_seen", 0)
        self.copy_history = ckpt.get("copy_history", [])
        # checkpoints written before legs were recorded: one leg, command unknown
        self.legs = ckpt.get("legs", [{"start_step": 0, "steps": None, "command": None}])
        if keep_best and any(r.get("kept") for r in self.history) and not self.best_path.exists():
            raise HarnessError(f"{self.ckpt_path} says weights were kept for --keep-best but {self.best_path} "
                             "is missing; restore it, or start again without --resume")
        print(f"resumed at step {self.start_step}", flush=True)

    def _weights(self, model) -> dict[str, torch.Tensor]:
        """What a checkpoint (or ``best.pt``) keeps of ``model``: everything, or with a frozen base
        only the trained tensors; the base is loaded again from ``self.base`` on resume."""
        state = model.state_dict()
        return state if self.trained_names is None else {name: state[name] for name in sorted(self.trained_names)}

    def _step_loss(self, step: int, mixer, train_stream: torch.Tensor, autocast) -> torch.Tensor:
        """Forward and backward of training step ``step``; returns its loss."""
        settings, device = self.settings, self.device
        if mixer is not None:
            micro = mixer.batch(step, settings.batch_size, settings.steps)
            total = sum(w.sum().item() for _, w, _ in micro)
            self.tokens_seen += sum(int((w > 0).sum()) for _, w, _ in micro)
            loss = 0.0
            for batch, weights, avoid in micro:
                with autocast or contextlib.nullcontext():
                    part = weighted_loss(self.model, batch.to(device), weights.to(device), total, avoid.to(device),
                                         mixer.mix.unlikelihood_weight)
                part.backward()
                loss += part.detach()
            return loss
        batch = sample_batch(train_stream, settings, self.gen).to(device)
        with autocast or contextlib.nullcontext():
            loss = next_token_loss(self.model, batch)
        loss.backward()
        self.tokens_seen += batch.shape[0] * settings.seq_len
        return loss

    def run(self, *, mixer, train_stream: torch.Tensor, held_stream: torch.Tensor,
            monitor: Callable[[object], dict] | None, keep_best: bool) -> None:
        """Train from the current step to ``settings.steps``. Rows come from ``mixer``
        (``DirectiveMixer``) when there is one, else from windows of ``train_stream``. Every
        ``eval_every`` steps the watched weights are measured on ``held_stream`` and by
        ``monitor`` (extra history fields, such as the validation contrast that ``keep_best``
        chooses on), and a checkpoint is written."""
        from tqdm.auto import tqdm

        settings, model = self.settings, self.model
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if self.device.startswith("cuda") else None
        model.train()
        if self.start_step < settings.steps:
            self.legs.append({"start_step": self.start_step, "steps": settings.steps, "command": self.command})
        t0 = time.time() - self.elapsed
        bar = tqdm(range(self.start_step, settings.steps), initial=self.start_step, total=settings.steps,
                   desc="train", mininterval=30)
        for step in bar:
            for group in self.opt.param_groups:
                group["lr"] = cosine_lr(step, settings)
            self.opt.zero_grad(set_to_none=True)
            loss = self._step_loss(step, mixer, train_stream, autocast)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            self.opt.step()
            if self.ema is not None:
                self.ema.update_parameters(model)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
            if (step + 1) % settings.eval_every == 0 or step + 1 == settings.steps:
                watched = self.watched  # what will be saved
                record = {"step": step + 1, "train_loss": loss.item(),
                          "heldout_loss": heldout_loss(watched, held_stream, settings, self.device),
                          "minutes": round((time.time() - t0) / 60, 1)}
                if monitor is not None:
                    record.update(monitor(watched))
                    best = max((r["validation_contrast"] for r in self.history if r.get("kept")), default=None)
                    if keep_best and "validation_contrast" in record and (
                            best is None or record["validation_contrast"] >= best):
                        kept = {"model": self._weights(watched), "frozen_base": self._frozen_base()}
                        atomic_write(self.best_path, partial(torch.save, kept))
                        record["kept"] = True
                    model.train()
                self.history.append(record)
                bar.write(f"step {step + 1}: " + json.dumps({k: v for k, v in record.items() if k != "step"}))
                self._checkpoint(step + 1, time.time() - t0)
        self.train_seconds = time.time() - t0

    def _checkpoint(self, step: int, elapsed: float) -> None:
        checkpoint = {"model": self._weights(self.model), "frozen_base": self._frozen_base(),
                      "opt": self.opt.state_dict(), "gen": self.gen.get_state(),
                      "step": step, "history": self.history, "elapsed": elapsed,
                      "tokens_seen": self.tokens_seen, "copy_history": self.copy_history, "legs": self.legs,
                      **({"ema": self.ema.state_dict()} if self.ema is not None else {})}
        atomic_write(self.ckpt_path, lambda tmp: torch.save(checkpoint, tmp))

    def _frozen_base(self) -> dict | None:
        """What checkpoints record of the base they leave out (None: they hold the whole model)."""
        return None if self.trained_names is None else (self.base or {})

    def result(self, keep_best: bool) -> tuple[object, int]:
        """The weights to ship and the step they are from: the watched weights of the last step,
        or with ``keep_best`` the last kept ones (each kept one beat all before it)."""
        model = self.watched
        if not keep_best:
            return model, self.settings.steps
        selected_step = [r for r in self.history if r.get("kept")][-1]["step"]
        kept = load_checkpoint(self.best_path)
        if "frozen_base" not in kept:  # kept before best.pt recorded what it holds: a whole model
            kept = {"model": kept, "frozen_base": None}
        load_weights(model, kept["model"], kept["frozen_base"], self.best_path,
                     base=self.base, trained_names=self.trained_names)
        return model, selected_step
