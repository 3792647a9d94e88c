"""The Prefect runner of the stage graph: each stage call is one cached task run.

Handles are :class:`Ref` (the output class and the task's future or artifact folder). Stages
marked ``on_dask`` are submitted to the flow's Dask task runner (per-partition work, in
parallel); the others run in the flow's own process, in graph order. A sub-graph named in
:data:`HANDOFFS` may run elsewhere: the matcher goes to its GPU deployment when one is named.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect.exceptions import UnfinishedRun
from prefect.futures import PrefectFuture

from tasks.stage_task import stage_task
from xmc_core.config import DaskConfig
from xmc_core.model.contract import Lazy
from xmc_core.stages.graph import Stage, map_calls


@dataclass(frozen=True)
class Ref:
    """A stage output in a flow: its class and its task's future (or its folder)."""

    cls: type
    ref: PrefectFuture[str] | str


class PrefectRunner:
    """Runs a graph as tasks of the current flow, writing under ``work_dir``;
    ``result_storage``: the tasks' result storage (default: the flow's); ``level_cluster``:
    the config's ``dask`` section: with its ``address`` set, the tree levels of the stages run
    in this process train their batches on that cluster (``tasks/dask_ranker.py``)."""

    def __init__(
        self,
        work_dir: str | Path,
        result_storage: Any = None,
        level_cluster: DaskConfig | None = None,
    ) -> None:
        self.work_dir = str(Path(work_dir).resolve())
        self.result_storage = result_storage
        self.level_cluster = level_cluster if level_cluster and level_cluster.address else None
        self._loaded: dict[tuple[type, str], Any] = {}
        self._submitted: list[PrefectFuture[str]] = []

    def __call__(self, stage: Stage, *, label: str | None = None, **args: Any) -> Ref:
        options: dict[str, Any] = {"task_run_name": label or stage.name}
        if self.result_storage is not None:
            options["result_storage"] = self.result_storage
        task = stage_task(stage).with_options(**options)
        if stage.on_dask:
            future = task.submit(_refs(args, lambda r: r.ref), self.work_dir)
            self._submitted.append(future)
            return Ref(stage.output, future)
        return Ref(stage.output, task(_refs(args, self.path), self.work_dir, self.level_cluster))

    def map(
        self, stage: Stage, over: Mapping[str, Sequence[Any]], labels: Sequence[str], **args: Any
    ) -> list[Ref]:
        return map_calls(self, stage, over, labels, args)

    def value(self, handle: Ref) -> Any:
        """The object behind ``handle``, loaded once: an artifact folder never changes."""
        key = (handle.cls, self.path(handle))
        if key not in self._loaded:
            self._loaded[key] = handle.cls.load(key[1])
        return self._loaded[key]

    def source(self, cls: type, path: str) -> Ref:
        return Ref(cls, str(Path(path).resolve()))

    def handoff(self, name: str, graph: Callable[..., Any], **args: Any) -> Any:
        if name in HANDOFFS:
            return HANDOFFS[name](self, **args)
        return graph(self, **args)

    def path(self, handle: Ref) -> str:
        """The artifact folder of a handle (waits for its task). A task that never ran because
        one it waited on failed raises that failure (the first submitted that failed: a full
        disk, bad input), not Prefect's ``UnfinishedRun``."""
        ref = handle.ref
        if not isinstance(ref, PrefectFuture):
            return ref
        try:
            return ref.result()
        except UnfinishedRun:
            for submitted in self._submitted:
                with contextlib.suppress(UnfinishedRun):
                    submitted.result()  # a failed task raises its exception
            raise

    def paths(self, handles: Mapping[str, Any]) -> dict[str, str]:
        """Every handle's folder; a list of handles as a JSON list of folders."""
        return {
            name: json.dumps([self.path(h) for h in value])
            if isinstance(value, list)
            else self.path(value)
            for name, value in handles.items()
        }


def _refs(value: Any, fn: Callable[[Ref], Any]) -> Any:
    """``value`` with every handle in it (nested in dicts and lists) replaced by ``fn(handle)``:
    its future for a submitted task, its folder for a task run in this process."""
    if isinstance(value, Ref):
        return fn(value)
    if isinstance(value, dict):
        return {k: _refs(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_refs(v, fn) for v in value]
    return value


HANDOFFS: dict[str, Lazy] = {"matcher": Lazy("flows.matcher:run_matcher")}
"""Sub-graphs that may leave the flow's process: name -> ``fn(runner, **args)``, imported on
first use (``flows/matcher.py`` builds on this module's runner)."""
