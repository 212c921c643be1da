"""Every shipped config composes against the schema (offline, no model loaded)."""

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.cli import CONF_DIR
from harness.config import register_configs

MODELS = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))


def composed(overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


@pytest.mark.parametrize("model", MODELS)
def test_model_configs_compose(model):
    cfg = composed([f"model={model}"])
    assert cfg.model.name_or_path and cfg.model.trust_remote_code is False
    assert list(cfg.prefix.lengths) == [32, 64, 128, 256] and cfg.decode.max_new_tokens == 32 and cfg.seed == 0
    assert list(cfg.groups) == ["A", "B", "C"]


def test_launchers_compose():
    slurm = composed(["hydra/launcher=slurm", "hydra.launcher.partition=gpu"]).hydra.launcher
    assert slurm._target_.endswith("SlurmLauncher") and slurm.gpus_per_node == 1 and slurm.partition == "gpu"
    local = composed(["hydra/launcher=local"]).hydra.launcher
    assert local._target_.endswith("JoblibLauncher") and local.n_jobs == 2


def test_experiments_state_only_what_they_change():
    quick = composed(["experiment=quick"])
    assert quick.prompts.limit == 4 and list(quick.prefix.lengths) == [32, 128]
    demo = composed(["experiment=demo"])
    assert demo.model.name_or_path == "demo" and demo.prompts.name == "stories_en"
    resolved = OmegaConf.to_container(demo, resolve=False)
    assert resolved["prompts"]["path"] == "${harness_data:prompts_stories_en.jsonl}"
