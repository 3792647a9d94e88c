"""XR-Transformer (Zhang et al. 2021): a transformer matcher fine-tuned coarse to fine over a
label tree, then XR-Linear on TF-IDF + embedding (stages in :mod:`.graph`; its parts are the
shared ``xmc_core.transformer``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xmc_core.model.contract import Family, Lazy

if TYPE_CHECKING:
    from xmc_core.config import XmcConfig

NAME = "xr_transformer"


def runtime_requirements(cfg: XmcConfig) -> tuple[str, ...]:
    """The int8 encoder's runtime, when ``matcher.predict_runtime`` asks for it."""
    return ("onnxruntime",) if cfg.matcher.predict_runtime == "onnx-int8" else ()


CONTRACT_SETTINGS = (
    "tree.branching=4", "tree.max_leaf_size=4", "tfidf.max_features=20000",
    "encoder.max_length=32", "matcher.min_clusters=4", "matcher.max_clusters=16",
    "matcher.steps_per_level=6", "matcher.batch_size=8", "matcher.eval_every=3",
    "matcher.eval_docs=40", "matcher.embed_batch_size=64", "matcher.head_lr=0.01",
    "matcher.device=cpu", "encoder.path={encoder}",
)  # fmt: skip
"""Sized for the contract tests' corpus (the transformer tests' settings too)."""

SECTIONS = (
    "tokenizer", "tfidf", "label_features", "tree", "ranker", "predict", "encoder", "matcher",
    "eval",
)  # fmt: skip
"""The config sections it reads."""
REQUIREMENTS = ("torch", "transformers", "safetensors", "tokenizers")
"""What a served model imports (the pyfunc pins them)."""

FAMILY = Family(
    name=NAME,
    graph=Lazy("xmc_core.families.xr_transformer.graph:graph"),
    description="XR-Transformer: a transformer matcher fine-tuned coarse to fine over a label "
    "tree, then XR-Linear on TF-IDF + embedding with matcher-aware negatives",
    config_requirements=runtime_requirements,
    contract_settings=CONTRACT_SETTINGS,
    sections=SECTIONS,
    needs_text=True,
    requirements=REQUIREMENTS,
    warm_start=True,
    zero_shot=True,
)
