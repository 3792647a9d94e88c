"""Config mistakes through the real ``xmc`` entry point: one line per mistake naming the key,
what it takes and where it was given, "did you mean" for a near key, no pydantic jargon."""

from __future__ import annotations

from pathlib import Path

import pytest

from xmc_core.app.cli import main
from xmc_core.config import XmcConfig
from xmc_core.errors import ConfigError
from xmc_core.model import registry

RANKER_KEYS = (
    "loss, Cp, Cn, max_iter, eps, bias, threshold, negatives, matcher_topk, "
    "importance_weights, leaf_cost_scales, leaf_cost_sample, seed"
)


def dump_config_error(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    """stderr lines of ``xmc dump-config ARGS``, which must fail with status 2."""
    assert main(["dump-config", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    for jargon in ("pydantic", "https://", "[type=", "validation error", "Traceback"):
        assert jargon not in captured.err
    return captured.err.splitlines()


def test_unknown_key_names_it_suggests_the_near_one_and_lists_the_section(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert dump_config_error(capsys, "--set", "ranker.negative=tfn") == [
        "error: config key ranker.negative does not exist (in --set ranker.negative=tfn)",
        "  did you mean ranker.negatives?",
        f"  fix: the keys of ranker are {RANKER_KEYS}",
    ]
    assert dump_config_error(capsys, "--set", "ranker.cp=2")[1] == "  did you mean ranker.Cp?"
    # a key of another section: where it lives
    assert dump_config_error(capsys, "--set", "ranker.branching=4")[1] == (
        "  did you mean tree.branching?"
    )
    assert dump_config_error(capsys, "--set", "branching=4")[:2] == [
        "error: config key branching does not exist (in --set branching=4)",
        "  did you mean tree.branching?",
    ]


def test_unknown_section_suggests_the_near_one(capsys: pytest.CaptureFixture[str]) -> None:
    lines = dump_config_error(capsys, "--set", "rankr.loss=logistic")
    assert lines[:2] == [
        "error: config section rankr does not exist (in --set rankr.loss=logistic)",
        "  did you mean ranker?",
    ]
    assert lines[2].startswith("  fix: the top-level keys are work_dir, model, data, tokenizer,")


@pytest.mark.parametrize(
    "override,first,fix",
    [
        (
            "tree.branching=abc",
            "tree.branching must be a whole number, got 'abc'",
            "set tree.branching to a whole number (default: 16)",
        ),
        (
            "tfidf.min_df=abc",  # int | float: one mistake, not one per member
            "tfidf.min_df must be a number, got 'abc'",
            "set tfidf.min_df to a number (default: 1)",
        ),
        (
            "tfidf.max_features=0.5",
            "tfidf.max_features must be a whole number or null, got 0.5",
            "set tfidf.max_features to a whole number or null (default: 200000)",
        ),
        (
            "tracking.enabled=maybe",
            "tracking.enabled must be true or false, got 'maybe'",
            "set tracking.enabled to true or false (default: true)",
        ),
        (
            "tree.branching=0",
            "tree.branching must be at least 2, got 0",
            "set tree.branching to a value at least 2 (default: 16)",
        ),
        (
            "label_features.label_text_weight=0",
            "label_features.label_text_weight must be greater than 0, got 0",
            "set label_features.label_text_weight to a value greater than 0 (default: 1.0)",
        ),
        (
            "serve.port=70000",
            "serve.port must be at most 65535, got 70000",
            "set serve.port to a value at most 65535 (default: 5005)",
        ),
        (
            "tree.branching=3",  # a section's own validator
            "tree.branching=3 must be a power of two",
            "correct tree.branching (default: 16)",
        ),
        (
            "registry.model_name=''",
            "registry.model_name must not be empty",
            "correct registry.model_name (default: 'xmc-{dataset}')",
        ),
        (
            "work_dir=",
            "work_dir must be a path, got null",
            "set work_dir to a path (default: 'data')",
        ),
        (
            "tfidf=3",
            "tfidf is a section and must hold keys, got 3",
            "set its keys one by one, e.g. --set tfidf.min_df=...",
        ),
    ],
)
def test_wrong_values_name_the_key_what_it_takes_and_the_bound(
    capsys: pytest.CaptureFixture[str], override: str, first: str, fix: str
) -> None:
    assert dump_config_error(capsys, "--set", override) == [
        f"error: {first} (in --set {override})",
        f"  fix: {fix}",
    ]


def test_literals_list_the_allowed_values_and_the_near_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert dump_config_error(capsys, "--set", "ranker.negatives=tnf") == [
        "error: ranker.negatives must be one of tfn, man, tfn+man, got 'tnf' "
        "(in --set ranker.negatives=tnf)",
        "  did you mean tfn?",
        "  fix: set ranker.negatives to one of tfn, man, tfn+man (default: 'tfn')",
    ]


def test_unregistered_model_kind(capsys: pytest.CaptureFixture[str]) -> None:
    known = registry.family_names()  # the built-ins, and plug-ins registered by earlier tests
    assert {"xr_linear", "xr_transformer", "ensemble"} <= set(known)
    assert dump_config_error(capsys, "--set", "model.kind=xr-lineer") == [
        f"error: model.kind: unknown model family 'xr-lineer' (known: {', '.join(known)}) "
        "(in --set model.kind=xr-lineer)",
        "  did you mean xr_linear?",
        f"  fix: set model.kind to {' or '.join(known)} (a plug-in family is found through "
        "its distribution's 'xmc.families' entry points)",
    ]


def test_yaml_mistakes_name_the_file_and_line_one_line_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("tree:\n  branching: 16\nranker:\n  negative: tfn\n  loss: hinge\n")
    assert dump_config_error(capsys, "--config", str(cfg)) == [
        "error: 2 mistakes in the configuration:",
        f"  ranker.loss must be one of squared_hinge, logistic, got 'hinge' (in {cfg} line 5)",
        f"  config key ranker.negative does not exist (in {cfg} line 4); "
        "did you mean ranker.negatives?",
        "  fix: correct them (`xmc dump-config` prints every key with its value)",
    ]
    # an override of a key set in the file is the one named
    lines = dump_config_error(capsys, "--config", str(cfg), "--set", "ranker.loss=hingee")
    assert lines[1].endswith("got 'hingee' (in --set ranker.loss=hingee)")


def test_plugin_settings_of_an_unknown_family(capsys: pytest.CaptureFixture[str]) -> None:
    assert dump_config_error(capsys, "--set", "plugins.nope.k=1") == [
        "error: plugins.nope: no plug-in family 'nope' is registered",
        "  fix: correct it (`xmc dump-config` prints every key with its value)",
    ]


def test_config_built_in_code_raises_the_same_words() -> None:
    with pytest.raises(ConfigError) as excinfo:
        XmcConfig.load(None, ["eval.ks=[1, x]", "tree.kmeans_iter=0"])
    assert str(excinfo.value).splitlines() == [
        "2 mistakes in the configuration:",
        "  tree.kmeans_iter must be at least 1, got 0 (in --set tree.kmeans_iter=0)",
        "  eval.ks[1] must be a whole number, got 'x' (in --set eval.ks=[1, x])",
        "  fix: correct them (`xmc dump-config` prints every key with its value)",
    ]


def test_options_built_into_a_model_are_said_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["ingest", "lines", "/nonexistent-src", "/nonexistent-dest", "--label-sep", ""]) == 2
    )
    assert capsys.readouterr().err.splitlines() == [
        "error: label_sep must not be empty",  # IngestOptions(label_sep="")
        "  fix: correct the value named above",
    ]
