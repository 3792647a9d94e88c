"""The ``train`` flow, the main job: corpus -> features -> label tree -> one ranker task per
tree level -> model -> evaluation on the test split.

    python -m flows.train [--config cfg.yaml] [--set data.dataset=PATH] [--set key=value ...]

Without ``data.dataset`` it trains on the embedded synthetic corpus. Every task is cached on its
inputs, so a run that failed at tree level 2 resumes at level 2.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from prefect import flow

from flows.featurize import featurize_stages
from flows.runtime import configured, prefect_api
from tasks.corpus import synthesize_corpus
from tasks.xr_linear import assemble_model, build_tree, evaluate, train_level
from xmc_core.artifacts import read_meta
from xmc_core.config import XmcConfig
from xmc_core.metrics import format_metrics
from xmc_core.report import features_summary, read_json


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
    outputs.update(xr_linear_stages(outputs, cfg, work))
    print(format_metrics(read_json(Path(outputs["evaluation"]) / "metrics.json")))
    return outputs


def xr_linear_stages(feats: dict[str, str], cfg: XmcConfig, work: str) -> dict[str, str]:
    """Tree, then the levels in order (each needs the ones above), model, evaluation."""
    tree_dir = build_tree(feats["label_features"], cfg.tree, work)
    depth = len(read_meta(Path(tree_dir), "LabelTree", verify=False)["level_sizes"])
    post = cfg.predict.post_processor
    levels: list[str] = []
    for t in range(depth):
        levels.append(
            train_level(feats["train"], tree_dir, list(levels), t, cfg.ranker, post, work)
        )
    model_dir = assemble_model(
        feats["vectorizer"], feats["label_index"], tree_dir, levels, feats["train"],
        cfg.ranker, cfg.predict, work,
    )  # fmt: skip
    evaluation = evaluate(model_dir, feats["test"], cfg.eval, work)
    return {"tree": tree_dir, "model": model_dir, "evaluation": evaluation}


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
