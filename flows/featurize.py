"""The ``featurize`` flow: TF-IDF and label features of a dataset folder, cached per partition.

python -m flows.featurize DATASET [--config cfg.yaml] [--set tfidf.max_features=100000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefect import flow
from prefect.states import State

from flows.console import add_verbose_flag, quiet_terminal
from flows.runtime import checked_config, configured, flow_command
from flows.stage_runner import PrefectRunner
from tasks.outcome import completed
from xmc_core.app.entry import run_command
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.reader import read_manifest
from xmc_core.families.featurize import featurize_graph


def featurize_stages(corpus_dir: str, cfg: XmcConfig) -> dict[str, str]:
    """The featurize graph (``xmc_core.families.featurize``) as cached tasks; returns the
    artifact folder of each output: ``vectorizer``, ``label_index``, ``label_features``,
    ``train``, ``test``."""
    run = PrefectRunner(Path(cfg.work_dir))
    return run.paths(featurize_graph(run, run.source(Corpus, corpus_dir), cfg))


@flow(name="featurize-pipeline", log_prints=True)
def featurize_pipeline(corpus_dir: str, cfg: XmcConfig) -> dict[str, str]:
    """The featurization tasks, on the task runner the caller configured."""
    return featurize_stages(corpus_dir, cfg)


@flow(name="featurize", log_prints=True)
def featurize(
    corpus_dir: str, config_path: str | None = None, overrides: list[str] | None = None
) -> dict[str, str] | State:
    """TF-IDF vocabulary, per-partition features and label features of ``corpus_dir``; the
    result (their folders) is stored under ``work_dir`` (:func:`tasks.outcome.completed`)."""
    cfg = XmcConfig.load(config_path, overrides)
    return completed(cfg, configured(featurize_pipeline, cfg)(str(Path(corpus_dir).resolve()), cfg))


def main(argv: list[str] | None = None) -> dict[str, str]:
    """Command line: run the featurize flow on a dataset folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="dataset folder (made by `xmc ingest`)")
    parser.add_argument("--config", help="YAML config file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    add_verbose_flag(parser)
    args = parser.parse_args(argv)
    quiet_terminal(args.verbose)
    cfg = checked_config(args.config, args.overrides)
    read_manifest(Path(args.dataset))  # a dataset folder, before Prefect starts
    with flow_command(featurize.name, cfg.work_dir, args.verbose):
        result = featurize(args.dataset, args.config, args.overrides)
    for name, path in result.items():
        print(f"{name:>15}: {path}")
    return result


if __name__ == "__main__":
    sys.exit(run_command(main))
