"""The ``retrain`` flow: new corpus drops -> training corpus -> train flow -> registry.

    python -m flows.retrain [--config cfg.yaml] [--set retrain.mode=replace] [--set key=value ...]

Deployed with a cron schedule by ``prefect.yaml`` (deployment ``retrain/retrain``). Each run:

1. takes in the drops in ``retrain.landing_dir`` (one sub-folder per drop, any import format):
   valid ones are ingested and merged into the current training corpus (``retrain.mode:
   merge``; ``replace`` trains on the new drops alone) and moved to the archive folder, bad ones
   are moved to the quarantine folder with a ``REASON.txt``; nothing is deleted (a run killed
   half-way is finished by the next one, see :func:`xmc_core.intake.drops.take_in`);
2. trains when the current corpus differs from the last one trained (so a run that failed after
   the intake is finished by the next run), through the ``train-pipeline`` subflow, whose
   cached stages are reused where their inputs did not change: featurization, model,
   evaluation, MLflow tracking, registration and the gated promotion of the new version. The
   corpus keeps the lineage of the one it follows (``xmc_core.corpus.lineage``), so its model
   keeps that lineage's name (``registry.model_name``'s ``{dataset}``) and champion. The
   training starts warm from that champion when it can (``retrain.warm_start``,
   ``retrain.cold_every``: ``xmc_core.serving.registry.warm_start`` says when and from which
   model, ``xmc_core.families.warm`` what is kept), else cold; the run log says which and why.

Every run ends Completed with a message saying what happened (``P@1 79.33% — version 3 promoted
to xmc-reuters@champion; ...``, ``nothing to do: corpus <fingerprint> already trained``) and is
tagged ``promoted``, ``kept-champion``, ``other-lineage``, ``not-promoted``, ``not-registered``
or ``nothing-to-do``.
A run that refused a drop ends in the state ``CompletedWithQuarantine`` (a Completed state: the
good drops were taken in and trained; its message names the refused drops, it is tagged
``quarantined``, and the Prefect event ``prefect.flow-run.CompletedWithQuarantine`` can drive a
notification). Their reasons are in the ``xmc-intake-report`` artifact, the run report and each
drop's ``REASON.txt``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow
from prefect.states import State

from flows.runtime import config_flow_main, configured
from flows.train import train_pipeline
from tasks.landing import mark_trained, take_in_drops
from tasks.outcome import retrain_state
from tasks.warm_start import plan_warm_start
from xmc_core.config import XmcConfig


@flow(name="retrain-pipeline", log_prints=True)
def retrain_pipeline(cfg: XmcConfig) -> dict[str, Any]:
    """Intake, then the train pipeline on the resulting corpus when it has not been trained;
    returns what happened (the ``retrain`` flow's run says it in its state).

    It returns the plain dict, never a State: Prefect hands a subflow's returned value to its
    parent in memory, but a returned State's data it may read back from the result storage (when
    the API answered the state change itself, e.g. after the server's SQLite was busy); the
    parent's final state (:func:`tasks.outcome.retrain_state`) is what is stored for that."""
    return _retrain(cfg)


def _retrain(cfg: XmcConfig) -> dict[str, Any]:
    """The retrain pipeline's steps; returns what happened (intake, trained, outputs)."""
    work = str(Path(cfg.work_dir).resolve())
    intake = take_in_drops(cfg, work)
    print(
        f"intake: {len(intake['ingested'])} drop(s) ingested, "
        f"{len(intake['quarantined'])} quarantined; corpus {intake['corpus']}"
    )
    if intake["corpus"] is None:
        print("no training corpus yet: drop one into the landing folder")
        return {"intake": intake, "trained": False}
    if not intake["needs_training"] and not cfg.retrain.retrain_without_new_data:
        print("the current corpus is already trained and no new drop arrived: nothing to do")
        return {"intake": intake, "trained": False}
    data = cfg.data.model_copy(update={"dataset": Path(intake["corpus"])})
    train_cfg = cfg.model_copy(update={"data": data})
    start = plan_warm_start(train_cfg, intake["corpus"], work)
    print(f"start: {start['reason']}")
    outputs = configured(train_pipeline, train_cfg)(train_cfg, intake, start)
    mark_trained(intake["corpus"], outputs, work)
    return {"intake": intake, "trained": True, "outputs": outputs}


@flow(name="retrain", log_prints=True)
def retrain(
    config_path: str | None = None, overrides: list[str] | None = None
) -> dict[str, Any] | State:
    """Load the config, then run the retrain pipeline (its train subflow runs on Dask); the
    run ends with the outcome's message and tags (:func:`tasks.outcome.retrain_state`)."""
    cfg = XmcConfig.load(config_path, overrides)
    return retrain_state(cfg, configured(retrain_pipeline, cfg, use_dask=False)(cfg))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: run the retrain flow."""
    return config_flow_main(retrain, __doc__ or "", argv)


if __name__ == "__main__":
    main()
