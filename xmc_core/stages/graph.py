"""The stage graph: every training step declared once, run in-process or by Prefect.

A :class:`Stage` is a pure function of loaded artifacts and settings that returns one artifact
(an object with ``save(folder)`` whose class has ``load(folder)``). A *graph* is a plain function
``graph(run, ...)`` that calls ``run(stage, **args)`` / ``run.map(...)`` in order and returns the
handles of what it produced; it is the one declaration of a family's DAG. Two runners execute it:

- :class:`InProcessRunner` (``xmc train``): handles hold the objects in memory; only stages that
  write their own folder (``writes_folder``: resumable matcher checkpoints) touch the disk.
- ``flows.stage_runner.PrefectRunner`` (the flows): one cached Prefect task per stage call
  (per partition, per tree level), handles are artifact folders, Dask runs the ``on_dask``
  stages, and a sub-graph can be handed off to a deployment (the GPU work pool).

Keys (:func:`stage_key`) cover the code the stage runs (its module closure), the keys of its
artifact inputs and its settings, so both runners reuse what is unchanged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from xmc_core.interrupt import stage_running
from xmc_core.stages.keys import key_part, stage_code
from xmc_core.stages.store import ArtifactStore
from xmc_core.storage.fingerprint import combine, path_fingerprint

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class Stage:
    """One step: ``fn(**args) -> output`` (an object of class ``output``).

    ``artifacts``: the arguments that are artifacts, by class (each a handle, a list of handles
    or None); the others are settings (config sections, ints, strings). ``unkeyed``: artifact
    arguments left out of the key because another argument already covers what is read from
    them (a partition's ``ref`` covers the rows read from its ``corpus``). ``writes_folder``:
    ``fn`` takes ``out`` (a folder) and writes the artifact itself (resumable checkpoints).
    ``on_dask``: the flow runs it on the Dask cluster (per-partition work), else in the flow's
    process. ``describe``: one log line about a finished output.
    """

    name: str
    fn: Callable[..., Any]
    output: type
    artifacts: Mapping[str, type] = field(default_factory=dict)
    unkeyed: frozenset[str] = frozenset()
    writes_folder: bool = False
    on_dask: bool = False
    describe: Callable[[Any], str] | None = None

    def key(self, args: Mapping[str, Any], input_key: Callable[[str, Any], Any]) -> str:
        """Cache key of a call: the stage's code, its settings, its inputs' keys (as given by
        ``input_key(arg name, handle)``)."""
        parts = []
        for name in sorted(args):
            if name in self.unkeyed:
                continue
            value = args[name]
            if name in self.artifacts:
                parts.append([name, each(value, lambda h, n=name: input_key(n, h))])
            else:
                parts.append([name, key_part(value)])
        return combine(self.name, stage_code(self.fn), parts)[:32]


def each(value: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn`` of a handle, of each handle of a list, or None."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return [fn(v) for v in value]
    return fn(value)


class Runner(Protocol):
    """What a graph calls; see :class:`InProcessRunner` and ``flows.stage_runner``."""

    def __call__(self, stage: Stage, *, label: str | None = None, **args: Any) -> Any:
        """Run ``stage`` on ``args`` (handles and settings); returns the output's handle."""
        ...

    def map(
        self, stage: Stage, over: Mapping[str, Sequence[Any]], labels: Sequence[str], **args: Any
    ) -> list[Any]:
        """``stage`` once per item of the equal-length lists in ``over`` (zipped), in parallel
        where the runner can; ``labels``: each call's name."""
        ...

    def value(self, handle: Any) -> Any:
        """The object behind a handle (waits for it)."""
        ...

    def source(self, cls: type, path: str) -> Any:
        """A handle on an input that no stage made (a dataset folder)."""
        ...

    def handoff(self, name: str, graph: Callable[..., Any], **args: Any) -> Any:
        """Run a sub-graph; a runner may send it elsewhere (the matcher to a GPU pool)."""
        ...


def map_calls(
    run: Runner, stage: Stage, over: Mapping[str, Sequence[Any]], labels: Sequence[str],
    args: Mapping[str, Any],
) -> list[Any]:  # fmt: skip
    """``run(stage)`` once per row of the zipped lists in ``over``, with ``args`` besides: a
    runner's ``map``."""
    names = list(over)
    rows = zip(*(over[n] for n in names), strict=True)
    return [
        run(stage, label=label, **args, **dict(zip(names, row, strict=True)))
        for label, row in zip(labels, rows, strict=True)
    ]


@dataclass
class StageTally:
    """The stage calls of one run, and how many of them reused a finished artifact (an earlier
    run's, its inputs unchanged) instead of computing it."""

    calls: int = 0
    reused: int = 0


@dataclass
class Held:
    """An in-process handle: the object and its cache key."""

    value: Any
    key: str


class InProcessRunner:
    """Runs a graph in this process: objects stay in memory, keys are derived from the inputs'
    keys (no hashing of folders); ``writes_folder`` stages use the artifact store under
    ``work_dir`` so an interrupted run resumes there. ``timings``: wall seconds per stage
    label (summed; a resumed checkpoint counts 0, as a Cached task does in a flow)."""

    def __init__(self, work_dir: str) -> None:
        self.store = ArtifactStore(work_dir)
        self.tally = StageTally()
        self.timings: dict[str, float] = {}

    def __call__(self, stage: Stage, *, label: str | None = None, **args: Any) -> Held:
        with stage_running(label or stage.name):  # a Ctrl-C meanwhile names it
            return self._call(stage, label=label, **args)

    def _call(self, stage: Stage, *, label: str | None = None, **args: Any) -> Held:
        key = stage.key(args, lambda _name, h: h.key)
        self.tally.calls += 1
        loaded = {
            name: each(value, lambda h: h.value) if name in stage.artifacts else value
            for name, value in args.items()
        }
        start, name, reused = time.perf_counter(), label or stage.name, False
        if stage.writes_folder:
            # in this process only these (checkpoint) folders outlive a run
            with self.store.produce(stage.name, key, log, name, "resumed from checkpoint") as tmp:
                if tmp is not None:
                    stage.fn(**loaded, out=tmp)
                else:
                    self.tally.reused += 1
                    reused = True
            value = stage.output.load(self.store.path(stage.name, key))
        else:
            value = stage.fn(**loaded)
        seconds = time.perf_counter() - start
        self.timings[name] = self.timings.get(name, 0.0) + (0.0 if reused else seconds)
        if stage.describe is not None:
            log.info("%s: %s (%.1f s)", name, stage.describe(value), seconds)
        return Held(value, key)

    def map(
        self, stage: Stage, over: Mapping[str, Sequence[Any]], labels: Sequence[str], **args: Any
    ) -> list[Held]:
        return map_calls(self, stage, over, labels, args)

    def value(self, handle: Held) -> Any:
        return handle.value

    def source(self, cls: type, path: str) -> Held:
        return Held(cls.load(path), path_fingerprint(path))

    def handoff(self, name: str, graph: Callable[..., Any], **args: Any) -> Any:
        return graph(self, **args)


class PrefixedRunner:
    """A runner that runs a sub-graph on ``base`` with every stage label prefixed (an ensemble
    member's stages: ``member-1-label-tree``). Handles are ``base``'s; the cache keys do not
    depend on labels, so a sub-graph's stages are cached as ``base`` caches them. A hand-off
    goes to ``base`` (a runner may send it elsewhere); run here, its stages are prefixed too."""

    def __init__(self, base: Runner, prefix: str) -> None:
        self.base, self.prefix = base, prefix

    def __call__(self, stage: Stage, *, label: str | None = None, **args: Any) -> Any:
        return self.base(stage, label=self.prefix + (label or stage.name), **args)

    def map(
        self, stage: Stage, over: Mapping[str, Sequence[Any]], labels: Sequence[str], **args: Any
    ) -> list[Any]:
        return self.base.map(stage, over, [self.prefix + label for label in labels], **args)

    def value(self, handle: Any) -> Any:
        return self.base.value(handle)

    def source(self, cls: type, path: str) -> Any:
        return self.base.source(cls, path)

    def handoff(self, name: str, graph: Callable[..., Any], **args: Any) -> Any:
        return self.base.handoff(name, lambda _base, **a: graph(self, **a), **args)

    def __getattr__(self, name: str) -> Any:
        """Anything else of the base runner (the Prefect runner's ``path``, ``work_dir``)."""
        if name == "base":  # not set yet (a copy being built)
            raise AttributeError(name)
        return getattr(self.base, name)
