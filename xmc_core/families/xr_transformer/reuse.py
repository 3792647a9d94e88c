"""XR-Transformer's rankers kept from the champion when a warm start's training problem is
the champion's own (:mod:`xmc_core.linear.reuse`).

A warm start without a new document trains no matcher step (:mod:`.warm`), so its encoder and
embeddings are the champion's; its vocabulary, labels and tree are the champion's too. Its
rankers' matcher negatives would not be: the finest matcher head is bootstrapped again, and the
champion's was trained. Trained again, the rankers would differ from the champion's a little;
kept, the champion's predictions come back.

The problem's digest covers the ranker's training features ``[TF-IDF, weight * embedding]``
and labels, the label features its tree and zero-shot rows come from, and the settings the
levels train with (``ranker``, the post-processor, the matcher's beam for negatives).
"""

from __future__ import annotations

from typing import Any

from xmc_core.config import MatcherConfig, PredictConfig, RankerConfig, XmcConfig
from xmc_core.families.common import describe_level
from xmc_core.families.warm import WarmHandles
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.split_features import SplitFeatures
from xmc_core.linear.model import LevelRankers, XRLinearModel
from xmc_core.linear.reuse import kept_level, same_problem, training_digest
from xmc_core.stages.graph import Runner, Stage

KEPT_LEVEL = Stage(
    "kept-level", kept_level, LevelRankers, {"base": XRLinearModel}, describe=describe_level
)


def problem_digest(
    train: SplitFeatures, label_features: LabelFeatures, ranker: RankerConfig,
    predict: PredictConfig, matcher: MatcherConfig,
) -> str:  # fmt: skip
    """The digest of the rankers' training problem (see the module)."""
    settings = {
        "ranker": ranker.model_dump(mode="json"),
        "post_processor": predict.post_processor,
        "beam_size": matcher.beam_size,
    }
    return training_digest([train.X, train.Y, label_features.z], settings)


def kept_levels(
    run: Runner, warm: WarmHandles, train: Any, label_features: Any, tree: Any, cfg: XmcConfig
) -> list[Any] | None:
    """The champion's level rankers (``warm.ranker``), one KEPT_LEVEL call per level, when
    this run's training problem (handles ``train``, ``label_features``, ``tree``) is the one
    they were trained on; None otherwise (train them)."""
    if warm.ranker is None or warm.ranker_digest is None:
        return None
    digest = problem_digest(
        run.value(train), run.value(label_features), cfg.ranker, cfg.predict, cfg.matcher
    )
    if digest != warm.ranker_digest:
        return None
    champion: XRLinearModel = run.value(warm.ranker)
    if not same_problem(champion, digest, run.value(tree)):
        return None
    return [
        run(KEPT_LEVEL, label=f"kept-ranker-level-{t}", base=warm.ranker, level=t)
        for t in range(champion.tree_.depth)
    ]
