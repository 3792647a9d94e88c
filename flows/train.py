"""The ``train`` flow, the main job: corpus -> features -> label tree -> one ranker task per
tree level -> model -> evaluation on the test split.

    python -m flows.train [--config cfg.yaml] [--set data.dataset=PATH] [--set key=value ...]

Without ``data.dataset`` it trains on the embedded synthetic corpus. Every task is cached on its
inputs, so a run that failed at tree level 2 resumes at level 2. With
``model.kind=xr-transformer`` the matcher levels run in the ``matcher`` subflow: in this process,
or on the deployment named by ``XMC_MATCHER_DEPLOYMENT`` (a GPU work pool, see ``prefect.yaml``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from prefect import flow, unmapped
from prefect.deployments import run_deployment
from prefect.runtime import flow_run

from flows.featurize import featurize_stages
from flows.runtime import config_flow_main, configured
from tasks.cache_records import returned_folders
from tasks.caching import results_root
from tasks.corpus import synthesize_corpus
from tasks.xr_linear import assemble_model, build_tree, evaluate, train_level
from xmc_core.artifacts import read_meta
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.schema import SPLITS
from xmc_core.entry import run_command
from xmc_core.metrics import format_metrics
from xmc_core.report import features_summary, read_json

MATCHER_DEPLOYMENT_ENV = "XMC_MATCHER_DEPLOYMENT"
"""Names the matcher deployment (``FLOW/DEPLOYMENT``) to run the matcher on; unset: in-process."""


@flow(name="train-pipeline", log_prints=True)
def train_pipeline(cfg: XmcConfig, intake: dict[str, Any] | None = None) -> dict[str, str]:
    """Every stage the pipeline has, each cached; returns the artifact folders.

    ``intake``: what the retrain flow's intake did, shown in the run report (None: not shown).
    """
    work = str(Path(cfg.work_dir).resolve())
    if cfg.data.dataset is not None:
        corpus_dir = str(Path(cfg.data.dataset).resolve())
    else:
        corpus_dir = synthesize_corpus(
            cfg.data.synthetic_scale, cfg.data.synthetic_seed, cfg.data.rows_per_group, work
        )
    outputs = {"corpus": corpus_dir, **featurize_stages(corpus_dir, cfg)}
    print(features_summary(outputs))
    if cfg.model.kind == "xr-transformer":
        outputs.update(xr_transformer_stages(outputs, cfg, work))
    else:
        outputs.update(xr_linear_stages(outputs, cfg, work))
    print(format_metrics(read_json(Path(outputs["evaluation"]) / "metrics.json")))
    outputs.update(lifecycle_stages(outputs, cfg, work, intake))
    return outputs


def lifecycle_stages(
    outputs: dict[str, str], cfg: XmcConfig, work: str, intake: dict[str, Any] | None = None
) -> dict[str, str]:
    """Train-split evaluation and diagnostics, MLflow tracking and registration, the gated
    promotion, the run report (Prefect artifacts)."""
    from tasks.diagnostics import diagnose
    from tasks.registry import promote_candidate
    from tasks.report import publish_report
    from tasks.tracking import log_training_run, stage_timings

    train_split = outputs.get("embedded_train", outputs["train"])
    test_split = outputs.get("embedded_test", outputs["test"])
    eval_dirs = {
        "train": evaluate.with_options(task_run_name="evaluate-train")(
            outputs["model"], train_split, cfg.eval, work
        ),
        "test": outputs["evaluation"],
    }
    checkpoints = json.loads(outputs["matcher_levels"]) if "matcher_levels" in outputs else None
    diagnostics = diagnose(outputs["model"], train_split, test_split, cfg.eval, work, checkpoints)
    timings = stage_timings(flow_run.get_id())
    tracking: dict[str, Any] = {}
    if cfg.tracking.enabled:
        tracking = log_training_run(cfg, outputs, timings, diagnostics, eval_dirs)
    decision = None
    if tracking.get("version") and cfg.registry.promote:
        decision = promote_candidate(cfg, tracking["version"], outputs["corpus"])
    report = publish_report(
        cfg, outputs, timings, tracking, decision, diagnostics, eval_dirs, intake
    )
    extra = {"evaluation_train": eval_dirs["train"], "diagnostics": diagnostics, "report": report}
    if tracking:
        version = str(tracking.get("version") or "")
        extra |= {"mlflow_run": tracking["run_id"], "model_version": version}
    return extra


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


def xr_transformer_stages(feats: dict[str, str], cfg: XmcConfig, work: str) -> dict[str, str]:
    """Tokens (per partition), matcher tree and levels, embeddings, refined tree, matcher
    shortlists, ranker levels, model, evaluation on the embedded test split."""
    from tasks import xr_transformer as xrt  # torch and transformers: only when needed

    corpus_dir = feats["corpus"]
    refs = {s: Corpus(corpus_dir).partitions(s) for s in SPLITS}
    parts = {
        s: xrt.tokenize_partition.map(corpus_dir, refs[s], unmapped(cfg.encoder), unmapped(work))
        for s in SPLITS
    }
    tokens = {s: xrt.assemble_tokens.submit(parts[s], s, work) for s in SPLITS}
    matcher_tree = build_tree.with_options(task_run_name="matcher-tree")(
        feats["label_features"], cfg.tree, work
    )
    token_dirs = {s: tokens[s].result() for s in SPLITS}
    matcher_levels = run_matcher(token_dirs["train"], feats["train"], matcher_tree, cfg, work)
    checkpoint = matcher_levels[-1]
    embedded = {
        s: xrt.embed_split(feats[s], token_dirs[s], checkpoint, s, cfg.matcher, work)
        for s in SPLITS
    }
    z = xrt.ranker_features(feats["train"], embedded["train"], work)
    tree_dir = build_tree.with_options(task_run_name="ranker-tree")(z, cfg.tree, work)
    shortlists = xrt.matcher_shortlists(
        checkpoint, embedded["train"], matcher_tree, tree_dir, cfg.matcher.beam_size, work
    )
    depth = len(read_meta(Path(tree_dir), "LabelTree", verify=False)["level_sizes"])
    post = cfg.predict.post_processor
    levels: list[str] = []
    for t in range(depth):
        levels.append(
            train_level.with_options(task_run_name=f"ranker-level-{t}")(
                embedded["train"], tree_dir, list(levels), t, cfg.ranker, post, work, shortlists
            )
        )
    model_dir = xrt.assemble_model(
        feats["vectorizer"], feats["label_index"], tree_dir, levels, embedded["train"],
        checkpoint, cfg.ranker, cfg.predict, cfg.matcher, work,
    )  # fmt: skip
    evaluation = evaluate(model_dir, embedded["test"], cfg.eval, work)
    return {
        "tokens_train": token_dirs["train"], "tokens_test": token_dirs["test"],
        "matcher_tree": matcher_tree, "matcher": checkpoint,
        "matcher_levels": json.dumps(matcher_levels),
        "embedded_train": embedded["train"], "embedded_test": embedded["test"],
        "tree": tree_dir, "model": model_dir, "evaluation": evaluation,
    }  # fmt: skip


def run_matcher(
    tokens_dir: str, train_dir: str, tree_dir: str, cfg: XmcConfig, work: str
) -> list[str]:
    """The matcher checkpoints, coarse to fine: the ``matcher`` subflow in this process, or its
    deployment named by ``XMC_MATCHER_DEPLOYMENT`` (waits for the run, reads its result)."""
    params: dict[str, Any] = {
        "tokens_dir": tokens_dir, "train_dir": train_dir, "tree_dir": tree_dir,
        "encoder": cfg.encoder, "matcher": cfg.matcher, "work_dir": work,
    }  # fmt: skip
    deployment = os.environ.get(MATCHER_DEPLOYMENT_ENV)
    if not deployment:
        from flows.matcher import matcher_flow

        return matcher_flow(**params)
    params |= {k: params[k].model_dump(mode="json") for k in ("encoder", "matcher")}
    # the worker keeps its results (task cache records included) beside the artifacts
    storage = {"PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(results_root(work))}
    run = run_deployment(
        deployment, parameters=params, job_variables={"env": storage}, timeout=None
    )
    if run.state is None or not run.state.is_completed():
        state = None if run.state is None else run.state.name
        raise RuntimeError(f"matcher deployment {deployment}: flow run {run.name} ended {state}")
    return returned_folders(run.state, work, "matcher-level")  # not state.result(): may unpickle


@flow(name="train", log_prints=True)
def train(config_path: str | None = None, overrides: list[str] | None = None) -> dict[str, str]:
    """Load the config, then run the pipeline on the configured Dask runner."""
    cfg = XmcConfig.load(config_path, overrides)
    return configured(train_pipeline, cfg)(cfg)


def main(argv: list[str] | None = None) -> dict[str, str]:
    """Command line: run the train flow."""
    return config_flow_main(train, __doc__ or "", argv)


if __name__ == "__main__":
    sys.exit(run_command(main))
