"""The shipped presets (``configs/*.yaml``) load against the config and are what they say."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from xmc_core.config import XmcConfig

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
PRESETS = sorted(p.name for p in CONFIGS.glob("*.yaml"))


def load(name: str) -> XmcConfig:
    return XmcConfig.load(CONFIGS / name)


def test_the_presets_the_docs_name_are_shipped() -> None:
    assert {
        "xr-linear.yaml",
        "xr-transformer-cpu.yaml",
        "xr-transformer-cpu-long.yaml",
        "xr-transformer-gpu.yaml",
        "nightly.yaml",
    } <= set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_loads_names_its_kind_and_says_how_to_run_it(name: str) -> None:
    text = (CONFIGS / name).read_text(encoding="utf-8")
    cfg = load(name)  # XmcConfig.load rejects unknown keys and bad values
    assert yaml.safe_load(text)["model"]["kind"] == cfg.model.kind
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert len(header) >= 3, "a comment header says what the preset is for"
    assert f"--config configs/{name}" in text, "and how to run it"


@pytest.mark.parametrize("name", PRESETS)
def test_preset_spells_out_only_values_that_differ_from_the_defaults(name: str) -> None:
    raw = yaml.safe_load((CONFIGS / name).read_text(encoding="utf-8"))
    defaults = XmcConfig().model_dump(mode="json")
    for section, values in raw.items():
        for key, value in values.items():
            if (section, key) != ("model", "kind"):
                assert value != defaults[section][key], f"{section}.{key} is the default"


def test_xr_linear_is_the_default_configuration() -> None:
    assert load("xr-linear.yaml") == XmcConfig()


def test_cpu_presets_are_the_benchmarked_reduced_configurations() -> None:
    reduced = load("xr-transformer-cpu.yaml")
    assert reduced.model.kind == "xr_transformer" and reduced.matcher.device == "cpu"
    assert reduced.encoder.max_length == 64 and reduced.matcher.train_docs == 8000
    assert (reduced.matcher.steps_per_level, reduced.matcher.batch_size) == (150, 32)
    assert (reduced.matcher.eval_every, reduced.matcher.eval_docs) == (75, 500)
    assert reduced.matcher.max_clusters == 512 and reduced.matcher.bootstrap_docs == 2000
    assert reduced.ranker.leaf_cost_scales == [1.0]
    assert reduced.matcher.predict_runtime == "onnx-int8"  # P@1 -0.03, 2.20x faster
    assert reduced.ranker.negatives == "tfn"  # P@3/P@5 kept (tfn+man: P@5 -0.46, validation)
    assert reduced.matcher.warm_trainable_layers == 1  # warm retrains: the top layer, cached
    long = load("xr-transformer-cpu-long.yaml")
    assert long.matcher.steps_per_level == 300 and long.matcher.eval_every == 100
    assert long.ranker.negatives == "tfn+man"  # validation P@1 +0.27; test +2.15 over XR-Linear
    # otherwise the same settings: twice the steps and the ranker's own negatives
    same = long.model_copy(
        update={
            "matcher": long.matcher.model_copy(update={"steps_per_level": 150, "eval_every": 75}),
            "ranker": long.ranker.model_copy(update={"negatives": "tfn"}),
        }
    )
    assert same == reduced


def test_gpu_preset_runs_the_full_matcher_on_cuda_in_bf16() -> None:
    cfg = load("xr-transformer-gpu.yaml")
    assert cfg.model.kind == "xr_transformer"
    assert cfg.matcher.device == "cuda" and cfg.matcher.bf16 is True
    assert cfg.matcher.train_docs is None and cfg.matcher.steps_per_level == 1000
    assert (cfg.matcher.min_clusters, cfg.matcher.max_clusters) == (16, 4096)
    assert cfg.encoder.max_length == 128


def test_nightly_preset_trains_a_real_corpus_not_the_synthetic_one() -> None:
    cfg = load("nightly.yaml")
    assert cfg.model.kind == "xr_linear" and cfg.data.dataset == Path("data/corpus")
    assert cfg.model_copy(update={"data": XmcConfig().data}) == XmcConfig()


def test_benchmark_presets_are_the_shipped_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # as when run as a script
    import xr_transformer

    assert {k: p.relative_to(ROOT).as_posix() for k, p in xr_transformer.PRESETS.items()} == {
        "full": "configs/xr-transformer-gpu.yaml",
        "cpu-reduced": "configs/xr-transformer-cpu.yaml",
        "cpu-long": "configs/xr-transformer-cpu-long.yaml",
    }
    args = xr_transformer.parse_args(["--preset", "cpu-reduced", "--set", "matcher.seed=3"])
    assert args.config == CONFIGS / "xr-transformer-cpu.yaml"
    assert args.overrides == ["matcher.seed=3"]


def test_x_transformer_preset_matches_xr_transformers_encoder_and_step_budget() -> None:
    """The benchmark's pair (the paper's ordering needs the same encoder and step budget):
    on debian-deps (42,850 labels) XR-Transformer's CPU preset trains 2 levels x 150 steps."""
    from xmc_core.families.x_transformer.single_resolution import xr_transformer_steps

    xt, xr = load("x-transformer-cpu.yaml"), load("xr-transformer-cpu.yaml")
    assert xt.model.kind == "x_transformer" and xt.encoder == xr.encoder
    assert xt.matcher.steps_per_level == xr_transformer_steps(42_850, xr.tree, xr.matcher) == 300
    same = ("device", "batch_size", "train_docs", "encoder_lr", "head_lr", "eval_docs")
    assert all(getattr(xt.matcher, k) == getattr(xr.matcher, k) for k in same)
    assert xt.tree == xr.tree and xt.ranker.negatives == "tfn+man"
    assert xt.predict.post_processor == "noop"
    assert xt.label_features.zero_shot and xr.label_features.zero_shot  # the default
