"""The ``ensemble`` config section (:class:`EnsembleConfig`, its members). Defaults are
declared here and nowhere else."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from xmc_core.config_errors import mistakes
from xmc_core.config_io import apply_override
from xmc_core.config_section import Section
from xmc_core.errors import InputError
from xmc_core.model import registry
from xmc_core.model.contract import Member

SHARED_SECTIONS = {
    "tokenizer": "the members share one vectorizer; set it for the whole ensemble",
    "tfidf": "the members share one vectorizer; set it for the whole ensemble",
    "data": "the members train on one corpus; set it for the whole ensemble",
    "work_dir": "the members share the run's work_dir; set it for the whole ensemble",
    "model": "give the member's family as its kind",
    "ensemble": "a member is not an ensemble",
}
"""Config keys an ensemble member's ``set`` may not change, and why."""


class EnsembleMember(Section):
    """One member: a family (``kind``) and the ``--set`` overrides applied to the whole config
    for it (e.g. ``["tree.seed=1"]``, ``["label_features.kind=label_text"]``); the
    featurization (``tokenizer``, ``tfidf``, ``data``) is the ensemble's, not a member's."""

    kind: str = "xr_linear"
    set: list[str] = Field(default_factory=list)

    @field_validator("kind")
    @classmethod
    def _not_nested(cls, kind: str) -> str:
        kind = registry.canonical(kind)  # an earlier release's xr-linear: xr_linear
        if kind == "ensemble":
            raise ValueError("an ensemble member cannot be an ensemble")
        return kind

    @field_validator("set")
    @classmethod
    def _not_shared(cls, items: list[str]) -> list[str]:
        for item in items:
            key, sep, _ = item.partition("=")
            section = key.strip().split(".")[0]
            if not sep or not key.strip():
                raise ValueError(f"{item!r} is not KEY=VALUE (e.g. tree.seed=1)")
            if section in SHARED_SECTIONS:
                shared = section not in ("model", "ensemble")
                raise ValueError(
                    f"{item!r} changes {section}, which a member cannot change: "
                    f"{SHARED_SECTIONS[section]}" + (f" (--set {item.strip()})" if shared else "")
                )
        return items


class EnsembleConfig(Section):
    """An ensemble of N members (any families but ``ensemble``), each trained on the shared
    featurization with its own config (the whole config with the member's ``set`` applied and
    ``model.kind`` its ``kind``), as separate cached stages.

    Each member predicts its top ``member_topk`` labels (at least the requested top-k); a label
    a member did not rank counts 0 for it. For document d and label l, with N members and
    member i's scores s_i(d, l) over its ranked labels R_i(d):

    - ``average``: (1/N) sum_i s_i(d, l);
    - ``rank_average``: (1/N) sum_i 1 / rank_i(d, l), rank 1 the member's best label (ties:
      the lower label id first);
    - ``softmax_average``: (1/N) sum_i exp(s_i(d, l) / T) / sum_{j in R_i(d)} exp(s_i(d, j) / T),
      T = ``temperature``.

    The ensemble keeps the ``predict.topk`` best labels of the combined scores (ties: the lower
    label id)."""

    members: list[EnsembleMember] = Field(
        default_factory=lambda: [
            EnsembleMember(kind="xr_linear", set=[f"tree.seed={seed}"]) for seed in range(3)
        ],
        min_length=1,
    )
    combine: Literal["average", "rank_average", "softmax_average"] = "rank_average"
    member_topk: int = Field(100, ge=1)
    temperature: float = Field(1.0, gt=0)

    def member_configs(self, cfg: Any) -> list[Any]:
        """Each member's whole config (an ``XmcConfig`` like ``cfg``): ``cfg`` with the member's
        ``set`` applied and ``model.kind`` its ``kind``. A member whose config is invalid is a
        ValueError naming it and each mistake."""
        out = []
        for i, member in enumerate(self.members):
            raw = cfg.model_dump(mode="json")
            given = f"ensemble.members[{i}] (kind {member.kind}, set {member.set})"
            try:
                for item in member.set:
                    apply_override(raw, item)
                raw["model"] = {**raw["model"], "kind": member.kind}
                out.append(type(cfg).model_validate(raw))
            except InputError as err:  # an override that does not fit the config's shape
                raise ValueError(f"{given}: {err.problem}") from None
            except ValidationError as err:
                found = "; ".join(m.text for m in mistakes(type(cfg), err))
                raise ValueError(f"{given}: {found}") from None
        return out


def members(cfg: Any) -> list[Member]:
    """The ensemble's members of ``cfg`` (an ``XmcConfig``): ``ensemble.members[i]``, labelled
    by kind and overrides, each with its whole config."""
    return [
        Member(f"ensemble.members[{i}]", " ".join([m.kind, *m.set]), member_cfg)
        for i, (m, member_cfg) in enumerate(
            zip(cfg.ensemble.members, cfg.ensemble.member_configs(cfg), strict=True)
        )
    ]
