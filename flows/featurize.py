"""The ``featurize`` flow: TF-IDF and label features of a dataset folder, cached per partition.

python -m flows.featurize DATASET [--config cfg.yaml] [--set tfidf.max_features=100000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefect import flow, unmapped

from flows.runtime import checked_config, configured, prefect_api
from tasks.featurize import assemble_split, count_terms, featurize_partition, fit_vocabulary
from tasks.labels import label_features, label_index
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.schema import SPLITS
from xmc_core.entry import run_command


def featurize_stages(corpus_dir: str, cfg: XmcConfig) -> dict[str, str]:
    """Submit every featurization task; returns the artifact folder of each output.

    Keys: ``vectorizer``, ``label_index``, ``label_features``, ``train``, ``test``.
    """
    corpus = Corpus(corpus_dir)
    work = str(Path(cfg.work_dir).resolve())
    refs = {s: corpus.partitions(s) for s in SPLITS}
    counts = {
        s: count_terms.map(corpus_dir, refs[s], unmapped(cfg.tokenizer), unmapped(work))
        for s in SPLITS
    }
    vocab = fit_vocabulary.submit(counts["train"], cfg.tfidf, cfg.tokenizer, work)
    index = label_index.submit(corpus_dir, work)
    parts = {
        s: featurize_partition.map(
            corpus_dir, refs[s], counts[s], unmapped(vocab), unmapped(index), unmapped(work)
        )
        for s in SPLITS
    }
    z = label_features.submit(parts["train"], vocab, index, corpus_dir, cfg.label_features, work)
    splits = {s: assemble_split.submit(parts[s], s, work) for s in SPLITS}
    return {
        "vectorizer": vocab.result(),
        "label_index": index.result(),
        "label_features": z.result(),
        **{s: splits[s].result() for s in SPLITS},
    }


@flow(name="featurize-pipeline", log_prints=True)
def featurize_pipeline(corpus_dir: str, cfg: XmcConfig) -> dict[str, str]:
    """The featurization tasks, on the task runner the caller configured."""
    return featurize_stages(corpus_dir, cfg)


@flow(name="featurize", log_prints=True)
def featurize(
    corpus_dir: str, config_path: str | None = None, overrides: list[str] | None = None
) -> dict[str, str]:
    """TF-IDF vocabulary, per-partition features and label features of ``corpus_dir``."""
    cfg = XmcConfig.load(config_path, overrides)
    return configured(featurize_pipeline, cfg)(str(Path(corpus_dir).resolve()), cfg)


def main(argv: list[str] | None = None) -> dict[str, str]:
    """Command line: run the featurize flow on a dataset folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="dataset folder (made by `xmc ingest`)")
    parser.add_argument("--config", help="YAML config file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    checked_config(args.config, args.overrides)
    with prefect_api():
        result = featurize(args.dataset, args.config, args.overrides)
    for name, path in result.items():
        print(f"{name:>15}: {path}")
    return result


if __name__ == "__main__":
    sys.exit(run_command(main))
