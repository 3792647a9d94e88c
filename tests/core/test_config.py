"""The typed configuration: YAML, overrides, validation, fingerprints."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from xmc_core.config import TfidfConfig, XmcConfig
from xmc_core.errors import InputError


def test_defaults_round_trip_through_yaml(tmp_path: Path) -> None:
    cfg = XmcConfig()
    path = tmp_path / "c.yaml"
    path.write_text(cfg.to_yaml())
    assert XmcConfig.load(path) == cfg
    assert XmcConfig.load(path).fingerprint() == cfg.fingerprint()


def test_yaml_and_overrides_with_typed_values(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("tfidf:\n  min_df: 2\ntokenizer:\n  ngram_max: 1\n")
    cfg = XmcConfig.load(
        path, ["tfidf.max_df=0.5", "tfidf.max_features=null", "dask.address=tcp://h:1"]
    )
    assert cfg.tfidf.min_df == 2 and isinstance(cfg.tfidf.min_df, int)
    assert cfg.tfidf.max_df == 0.5 and cfg.tfidf.max_features is None
    assert cfg.tokenizer.ngram_max == 1 and cfg.dask.address == "tcp://h:1"


def test_unknown_keys_and_bad_values_are_rejected_with_the_key_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"tfidf\.max_featurez"):
        XmcConfig.load(None, ["tfidf.max_featurez=3"])
    with pytest.raises(InputError, match="ngram_max"):
        XmcConfig.load(None, ["tokenizer.ngram_max=0"])
    with pytest.raises(InputError, match="not KEY=VALUE"):
        XmcConfig.load(None, ["tfidf"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("tfidf: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        XmcConfig.load(bad)
    with pytest.raises(InputError, match="not found"):
        XmcConfig.load(tmp_path / "missing.yaml")


def test_fraction_above_one_rejected() -> None:
    with pytest.raises(ValidationError, match="fraction"):
        TfidfConfig(max_df=1.5)


def test_frozen_and_fingerprint_tracks_values() -> None:
    cfg = XmcConfig()
    with pytest.raises(ValidationError):
        cfg.tfidf.min_df = 3  # type: ignore[misc]
    other = XmcConfig.load(None, ["tfidf.max_features=100000"])
    assert other.fingerprint() != cfg.fingerprint()
    assert other.tokenizer.fingerprint() == cfg.tokenizer.fingerprint()
    assert other.tfidf.fingerprint() != cfg.tfidf.fingerprint()
