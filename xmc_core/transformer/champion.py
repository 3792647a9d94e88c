"""A champion's fine-tuned encoder as a stage input: what a transformer family's warm start
fine-tunes from (:mod:`xmc_core.families.xr_transformer.warm`). Reads only metadata: no torch
import."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xmc_core.storage.artifacts import read_meta

ENCODER_CLASS = "EmbeddingFeatures"
"""The class of a transformer model's encoder part (``encoder/meta.json``)."""


@dataclass(frozen=True)
class ChampionEncoder:
    """The fine-tuned encoder of a champion's model folder (its ``encoder/`` part), as a
    warm start's stage input: keyed by its files, read by the matcher level it starts."""

    folder: Path

    @classmethod
    def load(cls, folder: str | Path) -> ChampionEncoder:
        """Check the part's ``meta.json`` (class and checksums, its encoder's ``meta.json``
        among them) and its encoder's class; the encoder's weights are checked once, when the
        matcher loads them (``TextEncoder.load_saved``), not hashed twice."""
        folder = Path(folder)
        read_meta(folder, ENCODER_CLASS)
        read_meta(folder / "encoder", "TextEncoder", verify=False)
        return cls(folder)

    @property
    def encoder_dir(self) -> Path:
        """The saved ``TextEncoder`` folder (Hugging Face files + tokenizer)."""
        return self.folder / "encoder"
