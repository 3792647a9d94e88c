"""The whole training graph of a family (featurize, then the family's own stages), and
``xmc train``'s way of running it: in this process (the flows run the same graph as tasks)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.reader import read_manifest
from xmc_core.errors import InputError, XmcError
from xmc_core.families.calibrate import calibrated, carved
from xmc_core.families.common import evaluated
from xmc_core.families.configured import trained_families
from xmc_core.families.featurize import featurize_graph
from xmc_core.families.matrices import matrix_graph
from xmc_core.families.warm import WarmBase, WarmHandles, warm_handles
from xmc_core.features.matrices import MatrixFiles
from xmc_core.model import registry
from xmc_core.stages.graph import InProcessRunner, Runner

log = logging.getLogger(__name__)


def check_corpus(corpus: Corpus, cfg: XmcConfig) -> None:
    """Refuse, before any work, a corpus the configured family cannot train on."""
    _check_kind(corpus.path, corpus.kind, cfg)


def check_dataset(dataset: Path, cfg: XmcConfig) -> None:
    """Refuse, before any work and reading only its manifest, a dataset folder that is missing
    or not a dataset, or whose kind the configured family cannot train on."""
    _check_kind(Path(dataset), read_manifest(Path(dataset)).kind, cfg)


def _check_kind(path: Path, kind: str, cfg: XmcConfig) -> None:
    """``model.kind`` (or, for an ensemble, each member's kind) against the corpus kind."""
    for member, family in trained_families(cfg):
        if family.needs_text and kind != "text":
            raise InputError(
                path,
                f"{member.key}.kind {family.name} needs a raw-text corpus, this one is {kind}",
                f"pass a text dataset, or set {member.key}.kind=xr_linear",
            )


def train_graph(
    run: Runner,
    corpus: Any,
    cfg: XmcConfig,
    on_featurized: Callable[[dict[str, Any]], None] | None = None,
    warm: WarmBase | None = None,
) -> dict[str, Any]:
    """Carve the calibration documents out of the dataset behind handle ``corpus``
    (:mod:`xmc_core.families.calibrate`), featurize the rest, then the configured family's
    stages; returns every output's handle (``corpus``: the dataset, ``carve``: the carve, when
    there is one). ``on_featurized``: called with the featurize graph's handles before the
    family's stages start (a progress line). ``warm``: the model a warm start starts from
    (:mod:`xmc_core.families.warm`; a family that cannot start warm refuses it)."""
    family = registry.family(cfg.model.kind)
    if warm is not None and not family.warm_start:
        raise XmcError(f"{family.name} cannot start warm: retrain it cold")
    handles = None if warm is None else warm_handles(run, warm)
    training, carve = carved(run, corpus, cfg)
    feats = {"corpus": training, **featurize_graph(run, training, cfg, handles)}
    if on_featurized is not None:
        on_featurized(feats)
    held = None if carve is None else {"carve": carve}
    outs = {**family_graph(run, feats, cfg, handles, held), "corpus": corpus}
    return outs if carve is None else {**outs, "carve": carve}


def family_graph(
    run: Runner, feats: dict[str, Any], cfg: XmcConfig, warm: WarmHandles | None = None,
    held: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The configured family's stages on featurized handles ``feats`` (``warm``: from a
    champion's parts), then the frame's common ending: the model calibrated on ``held`` (when
    there is a carve: :func:`~xmc_core.families.calibrate.calibrated`) and its evaluation on the
    test split; returns ``feats`` and every output's handle."""
    graph = registry.family(cfg.model.kind).graph
    outs = graph(run, feats, cfg) if warm is None else graph(run, feats, cfg, warm=warm)
    return {**feats, **evaluated(run, calibrated(run, outs, held, cfg), cfg)}


def train_in_process(
    corpus: Corpus, cfg: XmcConfig, warm: WarmBase | None = None
) -> dict[str, Any]:
    """:func:`train_graph` in this process (``warm``: starting from that model); returns the
    output objects (``model``: the ``XmcModel``, ``evaluation``: its test ``Metrics``,
    ``train``/``test``: the featurized splits, ...) and ``stages``: the run's
    :class:`~xmc_core.stages.graph.StageTally`."""
    run, handles = train_handles(corpus, cfg, warm)
    return {**values_of(run, handles), "stages": run.tally}


def train_handles(
    corpus: Corpus, cfg: XmcConfig, warm: WarmBase | None = None
) -> tuple[InProcessRunner, dict[str, Any]]:
    """:func:`train_graph` in this process -> the runner and the outputs' handles (what the
    lifecycle graph goes on from: ``xmc train --track``)."""
    check_corpus(corpus, cfg)
    start = time.perf_counter()
    run = InProcessRunner(str(cfg.work_dir))
    handles = train_graph(run, run.source(Corpus, str(corpus.path)), cfg, warm=warm)
    log.debug("%s trained in %.1f s", cfg.model.kind, time.perf_counter() - start)
    return run, handles


def train_matrices_in_process(files: MatrixFiles, cfg: XmcConfig) -> dict[str, Any]:
    """The family's stages on feature matrices (:func:`~xmc_core.families.matrices.matrix_graph`
    in place of featurization), in this process; returns the output objects as
    :func:`train_in_process`. The files are checked before any work."""
    start = time.perf_counter()
    run = InProcessRunner(str(cfg.work_dir))
    feats = matrix_graph(run, files, cfg)
    held = {"held": feats.pop("held")} if "held" in feats else None
    handles = family_graph(run, feats, cfg, held=held)
    log.info("%s trained in %.1f s", cfg.model.kind, time.perf_counter() - start)
    return {**values_of(run, handles), "stages": run.tally}


def featurize_in_process(corpus: Corpus, cfg: XmcConfig) -> dict[str, Any]:
    """The featurize graph in this process: ``vectorizer``, ``label_index``,
    ``label_features``, ``train`` and ``test`` (``SplitFeatures``)."""
    run = InProcessRunner(str(cfg.work_dir))
    return values_of(run, featurize_graph(run, run.source(Corpus, str(corpus.path)), cfg))


def values_of(run: InProcessRunner, handles: dict[str, Any]) -> dict[str, Any]:
    """The objects behind a graph's handles (a list of handles: a list of objects)."""
    return {
        name: [run.value(h) for h in handle] if isinstance(handle, list) else run.value(handle)
        for name, handle in handles.items()
    }
