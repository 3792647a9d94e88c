"""TextEncoder: keeping the first N layers of a pretrained encoder (``encoder.layers``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from xmc_core.config import EncoderConfig
from xmc_core.errors import InputError
from xmc_core.transformer.encoder import TextEncoder, load_tokenizer


def _ids(folder: Path) -> tuple[torch.Tensor, torch.Tensor]:
    batch = load_tokenizer(folder)(
        ["label trees and beams", "a second, longer document of several words"],
        padding=True,
        return_tensors="pt",
    )
    return batch["input_ids"], batch["attention_mask"]


def test_first_layers_are_kept_with_their_pretrained_weights(tx_encoder_dir: Path) -> None:
    full = TextEncoder.load(EncoderConfig(path=tx_encoder_dir)).eval()
    one = TextEncoder.load(EncoderConfig(path=tx_encoder_dir, layers=1)).eval()
    assert len(full.body.encoder.layer) == 2
    assert len(one.body.encoder.layer) == 1 and one.body.config.num_hidden_layers == 1
    full.body.encoder.layer = full.body.encoder.layer[:1]  # the same cut, by hand
    ids, mask = _ids(tx_encoder_dir)
    with torch.no_grad():
        expected, got = full(ids, mask), one(ids, mask)
    assert torch.equal(got, expected)
    assert torch.allclose(got.norm(dim=1), torch.ones(2))


def test_every_layer_is_the_default(tx_encoder_dir: Path) -> None:
    cfg = EncoderConfig(path=tx_encoder_dir, layers=2)
    assert len(TextEncoder.load(cfg).body.encoder.layer) == 2
    assert EncoderConfig().layers is None


def test_a_cut_encoder_saves_and_loads_as_itself(tmp_path: Path, tx_encoder_dir: Path) -> None:
    one = TextEncoder.load(EncoderConfig(path=tx_encoder_dir, layers=1)).eval()
    one.save(tmp_path / "enc", load_tokenizer(tx_encoder_dir))
    loaded, _ = TextEncoder.load_saved(tmp_path / "enc")
    assert len(loaded.body.encoder.layer) == 1 and loaded.cfg.layers == 1
    ids, mask = _ids(tx_encoder_dir)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(ids, mask), one(ids, mask))


def test_more_layers_than_the_encoder_has_is_refused(tx_encoder_dir: Path) -> None:
    with pytest.raises(InputError, match=r"encoder\.layers is 3 but .* has 2 layers") as err:
        TextEncoder.load(EncoderConfig(path=tx_encoder_dir, layers=3))
    assert "at most 2" in str(err.value)


def test_the_dropped_layers_are_not_reported(tx_encoder_dir: Path, capfd) -> None:
    TextEncoder.load(EncoderConfig(path=tx_encoder_dir, layers=1))
    out, err = capfd.readouterr()
    assert "UNEXPECTED" not in out + err and "LOAD REPORT" not in out + err
