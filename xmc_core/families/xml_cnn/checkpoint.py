"""A trained XML-CNN: the best epoch's weights (safetensors) and its training record (JSON).

The folder holds ``network.safetensors`` (every weight of the network, output layer included)
and ``meta.json``: the ``xml_cnn`` config it was trained with, its shapes (words, embedding
dimension, outputs) and the history (per epoch: mean training loss, validation P@1, seconds),
the best epoch and why training stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from xmc_core.errors import ArtifactError
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.families.xml_cnn.network import XmlCnn
from xmc_core.storage.artifacts import meta_fields, read_meta, write_meta
from xmc_core.storage.atomic import atomic_file
from xmc_core.wording import counted

NETWORK_FILE = "network.safetensors"


def save_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Tensors (CPU copies) as one safetensors file, written atomically."""
    with atomic_file(path) as tmp:
        save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(tmp))


def load_tensors(path: Path, fix: str = "re-train it") -> dict[str, torch.Tensor]:
    """Read a file written by :func:`save_tensors`."""
    try:
        return load_file(str(path))
    except (OSError, ValueError, SafetensorError) as err:
        raise ArtifactError(path, f"not a safetensors file ({err})", fix) from err


@dataclass(frozen=True)
class Shapes:
    """What builds an :class:`XmlCnn` besides its config."""

    n_words: int
    dim: int
    n_outputs: int

    def network(self, cfg: XmlCnnConfig) -> XmlCnn:
        return XmlCnn(cfg, self.n_words, self.dim, self.n_outputs)


@dataclass(frozen=True)
class CnnCheckpoint:
    """A trained network's folder, read lazily (``network()`` loads the weights)."""

    folder: Path
    cfg: XmlCnnConfig
    shapes: Shapes
    history: list[dict[str, Any]]
    best_epoch: int
    stopped: str

    @classmethod
    def load(cls, folder: str | Path) -> CnnCheckpoint:
        """Check ``meta.json`` and the checksums of the folder's files."""
        folder = Path(folder)
        meta = read_meta(folder, "CnnCheckpoint")
        with meta_fields(folder):
            return cls(
                folder, XmlCnnConfig(**meta["xml_cnn"]), Shapes(**meta["shapes"]),
                list(meta["history"]), int(meta["best_epoch"]), str(meta["stopped"]),
            )  # fmt: skip

    def network(self) -> XmlCnn:
        """The network with the best epoch's weights, on the CPU, in eval mode."""
        net = self.shapes.network(self.cfg)
        state = load_tensors(self.folder / NETWORK_FILE)
        try:
            net.load_state_dict(state)
        except RuntimeError as err:
            raise ArtifactError(
                self.folder / NETWORK_FILE, f"weights do not fit ({err})", "re-train it"
            ) from err
        return net.eval()

    def describe(self) -> str:
        """``3 epochs (best 2, val P@1 0.6120), early stop``."""
        best = next((h for h in self.history if h["epoch"] == self.best_epoch), {})
        p1 = best.get("val_P@1")
        score = f", val P@1 {p1:.4f}" if p1 is not None else ""
        return (
            f"{counted(len(self.history), 'epoch')} (best {self.best_epoch}{score}), {self.stopped}"
        )


def write_checkpoint(
    out: Path, state: dict[str, torch.Tensor], cfg: XmlCnnConfig, shapes: Shapes,
    history: list[dict[str, Any]], best_epoch: int, stopped: str,
) -> None:  # fmt: skip
    """Write a :class:`CnnCheckpoint` folder (``meta.json`` last)."""
    out.mkdir(parents=True, exist_ok=True)
    save_tensors(out / NETWORK_FILE, state)
    fields = {
        "xml_cnn": cfg.model_dump(mode="json"), "shapes": shapes.__dict__,
        "history": history, "best_epoch": best_epoch, "stopped": stopped,
    }  # fmt: skip
    write_meta(out, "CnnCheckpoint", fields)
