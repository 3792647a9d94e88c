"""Ensembles of any family: N members (different seeds, label indexings or encoders), each
trained by its own family's stage graph on the shared featurization, whose scores are combined
(average, rank average or softmax average;
:class:`~xmc_core.families.ensemble.config.EnsembleConfig`).

Member i's config is the whole config with its ``set`` applied and ``model.kind`` its
``kind``; its stages run through a :class:`~xmc_core.stages.graph.PrefixedRunner`, labelled
``member-<i>-...``. Each stage is keyed by its own inputs and settings, so the members are
separate cached tasks: a rerun after a member failed reuses the others, and a change of the
combination rule retrains no member. The model is saved, served and registered as one
(:class:`~xmc_core.families.ensemble.parts.EnsembleEncoder`,
:class:`~xmc_core.families.ensemble.parts.EnsembleRanker`).
"""

from __future__ import annotations

from typing import Any

from xmc_core.config import PredictConfig, XmcConfig
from xmc_core.corpus.schema import SPLITS
from xmc_core.families import featurize, matrices
from xmc_core.families.common import evaluated
from xmc_core.families.ensemble import NAME
from xmc_core.families.ensemble.config import EnsembleConfig, members
from xmc_core.families.ensemble.parts import EnsembleEncoder, EnsembleRanker
from xmc_core.features.split_features import SplitFeatures
from xmc_core.model import registry
from xmc_core.model.xmc_model import XmcModel
from xmc_core.stages.graph import PrefixedRunner, Runner, Stage


def assemble(
    members: list[XmcModel], trains: list[SplitFeatures], ensemble: EnsembleConfig,
    predict: PredictConfig,
) -> XmcModel:  # fmt: skip
    """The members' models (and their training inputs, for the widths of the encoder's
    blocks) -> one deployable model."""
    first = members[0]
    for m in members[1:]:
        if not m.labels.names.equals(first.labels.names):
            raise ValueError("the ensemble's members were trained on different label indexes")
    encoder = EnsembleEncoder.of([m.encoder for m in members])
    firsts = [encoder.member_blocks.index(b) for b in range(len(encoder.blocks))]
    columns = encoder.block_columns([trains[i].X.shape[1] for i in firsts])
    ranker = EnsembleRanker(ensemble, predict).set_members([m.ranker for m in members], columns)
    return XmcModel(
        NAME, first.vectorizer, first.labels, encoder, ranker, first.label_counts,
        first.n_train_docs,
    )  # fmt: skip


def ensemble_split(model: XmcModel, splits: list[SplitFeatures], split: str) -> SplitFeatures:
    """One split as the ensemble's input: the members' inputs (their ``model_train`` or
    ``model_test``) side by side in the encoder's block layout (``split`` names it in the
    key). A single block is the members' split itself."""
    encoder = model.encoder
    if not isinstance(encoder, EnsembleEncoder):
        raise TypeError(f"an ensemble model has an EnsembleEncoder, not {type(encoder).__name__}")
    X = encoder.stack_members([s.X for s in splits])
    return splits[0] if X is splits[0].X else splits[0].with_X(X)


MODEL = Stage(
    "ensemble-model", assemble, XmcModel, {"members": XmcModel, "trains": SplitFeatures},
    describe=lambda m: (
        f"{len(m.ranker.members_)} members, {m.ranker.cfg.combine}, "
        f"{len(m.encoder.blocks)} encoder block(s)"
    ),
)  # fmt: skip
SPLIT = Stage(
    "ensemble-split", ensemble_split, SplitFeatures,
    {"model": XmcModel, "splits": SplitFeatures},
    describe=lambda s: f"X {s.X.shape} ({s.X.nnz} nonzeros)",
)  # fmt: skip


def member_features(
    run: Runner, feats: dict[str, Any], cfg: XmcConfig, member_cfg: XmcConfig
) -> dict[str, Any]:
    """The featurized handles a member trains on: the ensemble's, with its own label features
    when its ``label_features`` differ (PIFA as the matrix entry computes it, label texts as
    the featurize graph does)."""
    own = member_cfg.label_features
    if own == cfg.label_features:
        return feats
    if own.kind == "pifa":
        z = run(matrices.LABEL_FEATURES, label="label-features", train=feats["train"], cfg=own)
    else:
        z = run(
            featurize.LABEL_FEATURES, label="label-features", parts=[feats["train"]],
            vectorizer=feats["vectorizer"], index=feats["label_index"], corpus=feats.get("corpus"),
            cfg=own,
        )  # fmt: skip
    return {**feats, "label_features": z}


def graph(run: Runner, feats: dict[str, Any], cfg: XmcConfig) -> dict[str, Any]:
    """Each member's own graph (stages labelled ``member-<i>-``), the ensemble model, its
    train and test inputs (the frame adds its evaluation); ``member_evaluations``: each
    member's test metrics, in member order."""
    outs = []
    for i, member in enumerate(members(cfg)):
        sub = PrefixedRunner(run, f"member-{i}-")
        family = registry.family(member.cfg.model.kind)
        out = family.graph(sub, member_features(sub, feats, cfg, member.cfg), member.cfg)
        outs.append(evaluated(sub, out, member.cfg))
    model = run(
        MODEL, label="assemble-ensemble", members=[o["model"] for o in outs],
        trains=[o["model_train"] for o in outs], ensemble=cfg.ensemble, predict=cfg.predict,
    )  # fmt: skip
    splits = {
        s: run(
            SPLIT, label=f"ensemble-{s}", model=model, splits=[o[f"model_{s}"] for o in outs],
            split=s,
        )
        for s in SPLITS
    }  # fmt: skip
    return {
        "model": model, "model_train": splits["train"],
        "model_test": splits["test"], "member_evaluations": [o["evaluation"] for o in outs],
    }  # fmt: skip
