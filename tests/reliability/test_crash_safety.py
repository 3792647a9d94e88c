"""Crash safety: SIGKILL a training run during each stage in turn, rerun, compare.

The main job (``python -m flows.train`` on the embedded corpus) runs in a process group of its
own, against one Prefect server and one Dask cluster (``dask.address``) shared by every run of
the module (a cluster per run would cost ~10 s of start-up each). A hook loaded into every
process (``sitecustomize`` on ``PYTHONPATH``: the flow processes and the Dask workers):

* holds the chosen stage once its temporary artifact folder is half written (the first file
  landed, no ``meta.json``) or whole but not yet renamed into place (``meta.json`` landed), and
  says so with a marker file (a Dask worker secedes the held task, so that a stage running
  beside it can be held too); the test then SIGKILLs the flow's process group, and a Dask
  worker holding a stage SIGKILLs itself (its nanny starts a fresh one): nothing that wrote
  the stage survives;
* records, through an audit hook, every ``open``/``scandir`` of a temporary artifact folder
  that another process created: a half-written artifact read by anyone.

Each killed run is the rerun of the previous kill, so the campaign kills every stage of the
XR-Linear flow once (count with the label index, vocabulary, partition, split with the label
features, tree, every tree level, model, evaluation, diagnostics), then runs to completion and
compares with an uninterrupted run of the same seed: same artifact keys, byte-identical model
and ``meta.json`` files, every folder verified, finished stages never recomputed, no temporary
folder read.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.conftest import SuiteStats
from tests.reliability.crash_services import (
    NO_META_STAGES,
    RESULT_FILE,
    ROOT,
    RUN_TIMEOUT,
    Services,
    cache_records,
    cluster_offset,
    finished_folders,
    kill_group,
    run_log,
    run_to_end,
    start_run,
    start_services,
    temp_folders,
    wait_gone,
)
from xmc_core.errors import ArtifactError
from xmc_core.lifecycle.stages import RUN_SCOPED
from xmc_core.storage.artifacts import read_meta
from xmc_core.storage.atomic import atomic_dir
from xmc_core.storage.fingerprint import code_fingerprint

pytestmark = pytest.mark.reliability


@dataclass(frozen=True)
class Hold:
    """Hold ``stage`` while it writes its temporary folder: once ``after`` folders of the stage
    are finished, at its ``first`` file (half written, no ``meta.json``) or once its ``meta`` is
    written (whole but not yet renamed into place)."""

    stage: str
    after: int = 0
    point: str = "first"


@dataclass(frozen=True)
class Kill:
    """SIGKILL the run once every stage of ``holds`` is held (stages that run side by side on
    the Dask workers are killed in the same run)."""

    name: str
    holds: tuple[Hold, ...]


KILLS = [
    Kill("count+label-index", (Hold("count"), Hold("label-index"))),
    Kill("vocabulary", (Hold("vocabulary", point="meta"),)),
    Kill("partition", (Hold("partition", point="meta"),)),
    Kill("split+label-features", (Hold("split", point="meta"), Hold("label-features"))),
    Kill("tree", (Hold("tree"),)),
    Kill("level-0", (Hold("level", 0, "meta"),)),
    Kill("level-1", (Hold("level", 1),)),
    Kill("model", (Hold("model", point="meta"),)),
    Kill("evaluation", (Hold("evaluation"),)),
    Kill("diagnostics", (Hold("diagnostics"),)),
]
TREE_DEPTH = sum(1 for k in KILLS for h in k.holds if h.stage == "level")


@pytest.fixture(scope="module")
def services(
    tmp_path_factory: pytest.TempPathFactory, prefect_template: Path
) -> Iterator[Services]:
    with start_services(tmp_path_factory.mktemp("crash").resolve(), prefect_template) as running:
        yield running


@dataclass
class KillRecord:
    kill: Kill
    markers: dict[str, dict[str, Any]]
    finished: dict[str, tuple[int, int]]
    recorded: set[str]
    temps_meta: dict[str, bool]
    log: str
    seconds: float
    reopened: list[str]


@dataclass
class Campaign:
    reference: Path
    work: Path
    kills: list[KillRecord] = field(default_factory=list)
    final_log: str = ""
    audit: list[dict[str, Any]] = field(default_factory=list)
    torn_records: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def _reopen(hold: Hold, work: Path, reference: Path) -> list[str]:
    """Move a finished folder of ``hold.stage`` aside when an earlier run finished them all (a
    task that was running when its run was killed goes on to its end, and a stage with no input
    from the previous one may run early): the kill needs one to compute. Returns what was
    moved (then not counted as reused)."""
    stage = hold.stage
    expected = {p.name for p in (reference / "artifacts" / stage).iterdir()}
    done = sorted(expected & {p.name for p in (work / "artifacts" / stage).glob("*")})
    if hold.after or len(done) < len(expected):
        return []
    aside = work / "reopened" / stage
    aside.mkdir(parents=True, exist_ok=True)
    os.rename(work / "artifacts" / stage / done[-1], aside / done[-1])
    return [f"{stage}/{done[-1]}"]


def _kill_during(services: Services, kill: Kill, work: Path, reference: Path) -> KillRecord:
    markers = services.base / f"markers-{kill.name}"
    markers.mkdir()
    holds = {h.stage: [h.after, h.point] for h in kill.holds}
    services.plan(holds=holds, markers=str(markers))
    log = services.base / f"run-{kill.name}.log"
    reopened = [name for h in kill.holds for name in _reopen(h, work, reference)]
    start, offset = time.perf_counter(), cluster_offset(services)
    proc = start_run(services, work, log)
    deadline = time.monotonic() + RUN_TIMEOUT
    while not all((markers / stage).is_file() for stage in holds):
        if proc.poll() is not None or time.monotonic() > deadline:
            kill_group(proc)
            pytest.fail(
                f"kill {kill.name}: not every stage held (exit {proc.returncode}):\n"
                f"{run_log(services, log, offset)[-4000:]}"
            )
        time.sleep(0.02)
    kill_group(proc)  # the flow process and everything it started
    held = {stage: json.loads((markers / stage).read_text()) for stage in holds}
    for stage, info in held.items():
        (markers / f"{stage}.release").touch()  # a held Dask worker now SIGKILLs itself
        wait_gone(info["pid"])
    services.plan()
    services.idle()
    temps = {str(t): (t / "meta.json").is_file() for t in temp_folders(work)}
    return KillRecord(
        kill, held, finished_folders(work), cache_records(work), temps,
        run_log(services, log, offset), time.perf_counter() - start, reopened,
    )  # fmt: skip


def _tear_cache_records(work: Path) -> list[str]:
    """Prefect writes its cache record non-atomically: leave one torn, one empty."""
    records = sorted((work / "artifacts").glob(f"tree/*/{RESULT_FILE}"))
    records += sorted((work / "artifacts").glob(f"vocabulary/*/{RESULT_FILE}"))
    torn = []
    for record, keep in zip(records[:2], (0.5, 0.0), strict=False):
        data = record.read_bytes()
        record.write_bytes(data[: int(len(data) * keep)])
        torn.append(f"{record.parent.parent.name}/{record.parent.name}")
    return torn


@pytest.fixture(scope="module")
def campaign(services: Services) -> Campaign:
    base = services.base
    result = Campaign(reference=base / "reference", work=base / "crashed")
    code = code_fingerprint.__wrapped__()
    start = time.perf_counter()
    run_to_end(services, result.reference, base / "reference.log")
    result.seconds["reference run"] = time.perf_counter() - start
    for kill in KILLS:
        result.kills.append(_kill_during(services, kill, result.work, result.reference))
    result.torn_records = _tear_cache_records(result.work)
    start = time.perf_counter()
    result.final_log = run_to_end(services, result.work, base / "final.log")
    result.seconds["final run"] = time.perf_counter() - start
    if code_fingerprint.__wrapped__() != code:  # every cache key changed under the runs
        pytest.fail("xmc_core was edited while the crash campaign ran: run it again")
    result.seconds |= {f"kill {r.kill.name}": r.seconds for r in result.kills}
    audit = base / "audit.jsonl"
    result.audit = [json.loads(line) for line in audit.read_text().splitlines()]
    print("\ncrash campaign timings (s):", {k: round(v, 1) for k, v in result.seconds.items()})
    print("re-opened before their kill:", [n for r in result.kills for n in r.reopened])
    return result


def _later_logs(c: Campaign, index: int) -> str:
    return "\n".join([r.log for r in c.kills[index + 1 :]] + [c.final_log])


@pytest.mark.parametrize("index", range(len(KILLS)), ids=[k.name for k in KILLS])
def test_kill_during_stage_then_rerun_reuses_finished_stages(
    campaign: Campaign, index: int
) -> None:
    record, kill = campaign.kills[index], KILLS[index]
    # each stage was killed mid-write: its temporary folder is left, never renamed into place
    for hold in kill.holds:
        marker = record.markers[hold.stage]
        tmp = Path(marker["tmp"])
        assert tmp.parent.name == hold.stage and tmp.name[0] == "." and tmp.suffix == ".tmp"
        assert record.temps_meta[str(tmp)] is (hold.point == "meta"), marker
        assert sum(1 for k in record.finished if k.startswith(f"{hold.stage}/")) >= hold.after
        assert f"{hold.stage}/{tmp.name[1:].split('.')[0]}" not in record.finished
    # what was finished before the kill is never recomputed: same files, no "wrote" line
    later = _later_logs(campaign, index)
    now = finished_folders(campaign.work)
    reopened = {n for r in campaign.kills[index + 1 :] for n in r.reopened}
    for name, ident in record.finished.items():
        if name in reopened:
            continue
        assert now.get(name) == ident, f"{name} was rewritten after kill {kill.name}"
        assert f": wrote {campaign.work / 'artifacts' / name} " not in later, name
    # the rerun took finished stages from the cache, and redid the killed one
    nxt = campaign.kills[index + 1].log if index + 1 < len(KILLS) else campaign.final_log
    if record.recorded:
        assert "Finished in state Cached" in nxt
    for hold in kill.holds:
        assert f"{hold.stage}: wrote {campaign.work / 'artifacts' / hold.stage}/" in nxt


def test_no_process_reads_a_half_written_artifact(campaign: Campaign) -> None:
    flows = [r for r in campaign.audit if r.get("argv", [""])[0] == "-m"]
    workers = [r for r in campaign.audit if r.get("argv", [])[1:] == ["--multiprocessing-fork"]]
    # every run's flow process carried the hook, and the Dask workers (restarted after a kill)
    assert len(flows) == len(KILLS) + 2 and len(workers) >= 2
    assert [r for r in campaign.audit if "violation" in r] == []
    assert all(r.temps_meta for r in campaign.kills), "a kill left no temporary folder behind"


def test_rerun_after_every_kill_matches_the_uninterrupted_run(
    campaign: Campaign, suite_stats: SuiteStats
) -> None:
    ref, work = campaign.reference, campaign.work
    run_scoped = {stage.name for stage in RUN_SCOPED}  # the report: keyed on its run

    def keyed(found: dict[str, Any]) -> set[str]:
        return {name for name in found if name.split("/")[0] not in run_scoped}

    assert keyed(finished_folders(work)) == keyed(finished_folders(ref))  # same inputs: same keys
    assert {n.split("/")[0] for n in finished_folders(work)} >= {"report", "diagnostics"}
    assert len(list((work / "artifacts" / "level").iterdir())) >= TREE_DEPTH
    tree = next((ref / "artifacts" / "tree").iterdir())
    assert len(read_meta(tree, "LabelTree")["level_sizes"]) == TREE_DEPTH  # every level killed
    (model,) = [f for f in (work / "artifacts" / "model").iterdir() if f.name[0] != "."]
    ref_model = ref / "artifacts" / "model" / model.name
    files = sorted(p.relative_to(model) for p in model.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(ref_model) for p in ref_model.rglob("*") if p.is_file())
    for rel in files:
        if rel.name != RESULT_FILE:  # Prefect's record holds the absolute path
            assert (model / rel).read_bytes() == (ref_model / rel).read_bytes(), rel
    for name in keyed(finished_folders(work)):
        folder = work / "artifacts" / name
        if folder.parent.name in NO_META_STAGES:
            key = NO_META_STAGES[folder.parent.name]
            assert (folder / key).read_bytes() == (ref / "artifacts" / name / key).read_bytes()
        else:
            cls = json.loads((folder / "meta.json").read_text())["class"]
            read_meta(folder, cls, verify=True)
            assert (folder / "meta.json").read_bytes() == (
                ref / "artifacts" / name / "meta.json"
            ).read_bytes(), name
    held = sum(len(kill.holds) for kill in KILLS)
    suite_stats.add(
        "crash", faults=len(KILLS) + len(campaign.torn_records), stages_killed=held, data_lost=0
    )


def test_torn_prefect_cache_records_are_a_cache_miss(campaign: Campaign) -> None:
    assert len(campaign.torn_records) == 2
    for name in campaign.torn_records:
        folder = campaign.work / "artifacts" / name
        assert f"reusing finished artifact {folder}" in campaign.final_log
        json.loads((folder / RESULT_FILE).read_text())  # rewritten whole


def test_a_crash_inside_atomic_dir_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "artifacts" / "stage" / "key"
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "X.npz").write_bytes(b"half")
        raise RuntimeError("crash")
    assert list(target.parent.iterdir()) == []


def test_a_sigkill_inside_atomic_dir_leaves_only_hidden_names(tmp_path: Path) -> None:
    target = tmp_path / "artifacts" / "stage" / "key"
    code = (
        "import os, signal, sys\nfrom xmc_core.storage.atomic import atomic_dir\n"
        "with atomic_dir(sys.argv[1]) as tmp:\n"
        "    (tmp / 'X.npz').write_bytes(b'half')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(target)], cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL
    (left,) = {p.name for p in target.parent.iterdir()} - {".key.lock"}
    assert left.startswith(".key.") and left.endswith(".tmp")
    assert not target.exists()
    with atomic_dir(target) as tmp:  # a rerun never reads them, and clears them (lock unheld)
        (tmp / "X.npz").write_bytes(b"whole")
    assert (target / "X.npz").read_bytes() == b"whole"
    assert [p.name for p in target.parent.iterdir()] == ["key"]


def test_a_half_written_folder_renamed_by_hand_fails_clearly(tmp_path: Path) -> None:
    target = tmp_path / "key"
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "W.npz").write_bytes(b"half")
        shutil.copytree(tmp, tmp_path / "copy")
        raise RuntimeError("crash")
    os.rename(tmp_path / "copy", target)
    with pytest.raises(ArtifactError) as excinfo:
        read_meta(target, "LevelRankers")
    message = str(excinfo.value)
    assert str(target / "meta.json") in message and "meta.json is missing" in message
    assert "not a saved xmc artifact" in message
