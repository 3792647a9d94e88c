"""Whether a retrain starts warm, and from which model (``retrain.warm_start``,
``retrain.cold_every``; what a warm start does is ``xmc_core.families.warm``).

The model is the champion of the new corpus's lineage: with the registry, the version holding
``registry.alias`` of the lineage's model name, when its recorded lineage is the corpus's; without
it (``tracking.enabled`` or ``registry.enabled`` off), the model the last retrain of this corpus
store trained (``trained.json``), whose corpus the new one grew from. It starts cold instead, and
says why, when the family cannot start warm, no such model exists, the model is of another
family or was trained with other featurization, tree or ranker settings, or when the last
``retrain.cold_every - 1`` retrains were warm.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from xmc_core.config import XmcConfig
from xmc_core.corpus.lineage import describe, lineage_of, one_lineage
from xmc_core.errors import XmcError
from xmc_core.evaluation.report import read_json
from xmc_core.families.warm import WarmBase
from xmc_core.model import registry
from xmc_core.model.layout import model_layout
from xmc_core.serving.registry.lineage import for_corpus, recorded_lineage
from xmc_core.serving.registry.store import RegistryStore
from xmc_core.serving.resolve import local_model_dir

log = logging.getLogger(__name__)

KEPT_SECTIONS = ("tokenizer", "tfidf", "label_features", "tree", "ranker", "encoder")
"""Settings a warm start keeps from its champion: a change in one of them means a cold start
(``encoder``: a transformer family's base model, pooling and length)."""


@dataclass(frozen=True)
class StartPlan:
    """How a retrain starts: from ``base`` (warm) or from nothing (``base`` None), and why."""

    base: WarmBase | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"base": None if self.base is None else self.base.to_dict(), "reason": self.reason}


def plan_start(cfg: XmcConfig, corpus_dir: str | Path, last_trained: Path | None) -> StartPlan:
    """Warm or cold for a retrain with ``cfg`` on ``corpus_dir``; ``last_trained``: the corpus
    store's ``trained.json`` (used without a registry)."""
    if not cfg.retrain.warm_start:
        return StartPlan(None, "cold: retrain.warm_start is off")
    family = registry.family(cfg.model.kind)
    if not family.warm_start:
        return StartPlan(None, f"cold: {family.name} always starts cold")
    if cfg.tracking.enabled and cfg.registry.enabled:
        found = _champion(cfg, Path(corpus_dir))
    else:
        found = _last_trained(last_trained)
    if isinstance(found, str):
        return StartPlan(None, f"cold: {found}")
    folder, source = found
    layout = model_layout(folder)
    why_not = _incompatible(cfg, folder, layout["family"])
    if why_not:
        return StartPlan(None, f"cold: {source} {why_not}")
    in_a_row = int((layout["start"] or {}).get("warm_in_a_row", 0))
    if in_a_row + 1 >= cfg.retrain.cold_every:
        return StartPlan(
            None,
            f"cold: the periodic cold retrain (retrain.cold_every={cfg.retrain.cold_every}; "
            f"{in_a_row} warm retrain(s) in a row led to {source})",
        )
    return StartPlan(WarmBase(str(folder), source, in_a_row), f"warm from {source}")


def _champion(cfg: XmcConfig, corpus: Path) -> tuple[Path, str] | str:
    """The alias holder of the corpus's model name and a description, or why there is none."""
    cfg = for_corpus(cfg, corpus)
    store = RegistryStore(cfg)
    version = store.holder()
    if version is None:
        return f"{store.name} has no {store.alias} yet"
    tags = store.client.get_model_version(store.name, version).tags
    theirs, mine = recorded_lineage(tags), lineage_of(corpus)
    if theirs is None or not one_lineage(theirs, mine):
        return f"the {store.alias} (version {version}) is not of the lineage {describe(mine)}"
    source = f"{store.name} version {version} ({store.alias})"
    try:
        return local_model_dir(f"models:/{store.name}/{version}", cfg), source
    except XmcError as err:
        log.warning("the %s could not be loaded to start from: %s", source, err)
        return f"{source} could not be loaded ({str(err).splitlines()[0]})"


def _last_trained(record: Path | None) -> tuple[Path, str] | str:
    """The model the last retrain trained, from the store's ``trained.json``."""
    if record is None or not record.is_file():
        return "no model trained before in this corpus store"
    model = read_json(record).get("model")
    if not isinstance(model, str) or not (Path(model) / "meta.json").is_file():
        return f"{record} names no model folder"
    return Path(model), f"the last trained model ({Path(model).name})"


def _incompatible(cfg: XmcConfig, folder: Path, family: str) -> str:
    """Why the model of ``family`` in ``folder`` cannot be started from with ``cfg`` ("" when
    it can)."""
    if family != cfg.model.kind:
        return f"is a {family} model, not {cfg.model.kind}"
    config = folder / "config.yaml"
    if not config.is_file():
        return "has no config.yaml to compare its settings with"
    trained = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    ours = cfg.model_dump(mode="json")
    changed = [s for s in KEPT_SECTIONS if trained.get(s) != ours.get(s)]
    return f"was trained with other {', '.join(changed)} settings" if changed else ""
