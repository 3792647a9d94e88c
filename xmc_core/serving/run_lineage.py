"""What links an MLflow training run to its data: the training corpus as MLflow dataset inputs
(``training``: the train split, ``evaluation``: the test split), built from its
``manifest.json`` (no data is read or copied), and the registered version's description (family,
dataset and its lineage, test figures, the MLflow run and, for a flow's run, the Prefect flow
run named by the run's ``prefect.*`` tags: ``tasks.lineage.flow_run_links``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xmc_core.corpus import Corpus
from xmc_core.corpus.lineage import describe, lineage_of
from xmc_core.evaluation.metrics import metric_line
from xmc_core.families.warm import START_TAG

DATASET_CONTEXTS = {"train": "training", "test": "evaluation"}
"""MLflow input context of each corpus split."""
DIGEST_CHARS = 32
"""Characters of the corpus fingerprint used as an MLflow dataset digest (MLflow keeps 36)."""
DESCRIBED_METRICS = ("P@1", "P@5")


def log_dataset_inputs(client: Any, run_id: str, corpus_dir: str | Path) -> list[str]:
    """Log the corpus's splits as dataset inputs of the MLflow run -> the dataset names.

    Each is named ``<folder>/<split>``, its digest is the corpus fingerprint (cut to
    :data:`DIGEST_CHARS`), its source the corpus folder, its profile the split's counts."""
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    corpus = Corpus(corpus_dir)
    manifest = corpus.manifest
    folder = Path(corpus_dir).resolve()
    inputs = []
    for split, context in DATASET_CONTEXTS.items():
        stats = manifest.splits.get(split)
        if stats is None:
            continue
        profile = {
            "split": split,
            **stats.model_dump(mode="json"),
            "n_labels": manifest.n_labels,
            "fingerprint": manifest.fingerprint,
        }
        dataset = Dataset(
            name=f"{folder.name}/{split}",
            digest=manifest.fingerprint[:DIGEST_CHARS],
            source_type="local",
            source=json.dumps({"uri": str(folder)}),
            profile=json.dumps(profile),
        )
        inputs.append(DatasetInput(dataset, [InputTag(MLFLOW_DATASET_CONTEXT, context)]))
    client.log_inputs(run_id, datasets=inputs)
    return [i.dataset.name for i in inputs]


def version_description(
    family: str,
    corpus_dir: str | Path,
    test_metrics: Mapping[str, float],
    links: Mapping[str, str],
    run_id: str,
) -> str:
    """Markdown shown on the registered version's page: what was trained on what, how well,
    and by which Prefect flow run (the ``prefect.*`` keys of ``links``, see
    :func:`flow_run_links`) and MLflow run."""
    corpus = Corpus(corpus_dir)
    folder = Path(corpus_dir).resolve()
    figures = metric_line(test_metrics, DESCRIBED_METRICS, sep=", ")
    lines = [
        f"{family} model trained on `{folder.name}` (corpus fingerprint "
        f"`{corpus.fingerprint[:16]}`, {folder}).",
        f"Lineage: {describe(lineage_of(folder))}; only a version of this lineage is compared "
        "with it.",
        f"Test split: {figures or 'no figures'}.",
        f"MLflow run: `{run_id}`.",
    ]
    if START_TAG in links:  # a retrain: warm from its champion, or cold and why
        lines.insert(3, f"Start: {links[START_TAG]}.")
    if "prefect.flow_run_id" in links:
        name, run = links["prefect.flow_run_name"], links["prefect.flow_run_id"]
        url = links.get("prefect.flow_run_url")
        where = f"[{name}]({url})" if url else f"{name} (`{run}`)"
        lines.append(f"Prefect flow run: {where}.")
    return "\n\n".join(lines)


def describe_version(
    client: Any, model_name: str, version: str, run_id: str, description: str
) -> bool:
    """Set the description of ``version`` when this run created it (a version reused for an
    identical model keeps the description of the run that made it) -> whether it was set."""
    found = client.get_model_version(model_name, version)
    if found.run_id != run_id:
        return False
    client.update_model_version(model_name, version, description=description)
    return True
