"""The ``train`` flow, the main job: corpus -> features (-> label tree -> rankers -> evaluation).

    python -m flows.train [--config cfg.yaml] [--set data.dataset=PATH] [--set key=value ...]

Without ``data.dataset`` it trains on the embedded synthetic corpus. The stages after
featurization (label tree, per-level rankers, evaluation) are added by the XR-Linear work.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from prefect import flow

from flows.featurize import featurize_stages
from flows.runtime import configured, prefect_api
from tasks.corpus import synthesize_corpus
from xmc_core.config import XmcConfig
from xmc_core.report import features_summary


@flow(name="train-pipeline", log_prints=True)
def train_pipeline(cfg: XmcConfig) -> dict[str, str]:
    """Every stage the pipeline has, each cached; returns the artifact folders."""
    work = str(Path(cfg.work_dir).resolve())
    if cfg.data.dataset is not None:
        corpus_dir = str(Path(cfg.data.dataset).resolve())
    else:
        corpus_dir = synthesize_corpus(
            cfg.data.synthetic_scale, cfg.data.synthetic_seed, cfg.data.rows_per_group, work
        )
    outputs = {"corpus": corpus_dir, **featurize_stages(corpus_dir, cfg)}
    print(features_summary(outputs))
    return outputs


@flow(name="train", log_prints=True)
def train(config_path: str | None = None, overrides: list[str] | None = None) -> dict[str, str]:
    """Load the config, then run the pipeline on the configured Dask runner."""
    cfg = XmcConfig.load(config_path, overrides)
    return configured(train_pipeline, cfg)(cfg)


def main(argv: list[str] | None = None) -> dict[str, str]:
    """Command line: run the training flow."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="YAML config file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with prefect_api():
        result = train(args.config, args.overrides)
    print(f"train flow finished in {time.perf_counter() - start:.1f} s")
    return result


if __name__ == "__main__":
    main()
