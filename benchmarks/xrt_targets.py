"""The targets of ``benchmarks/xr_transformer.py`` (issue 18), met / not met with margins, and
the stage lines of its report.

On debian-deps, against the same run's other methods (medians over repeats):

- ``vs_pecos``: our XR-Transformer trains in <= 0.6x PECOS XR-Transformer's seconds, at a P@1
  >= PECOS XR-Transformer's (same step budget: the runs share the preset);
- ``budget``: ours trains in <= 30 minutes with a P@1 >= the best XR-Linear's (ours or PECOS)
  + 2.0 points;
- ``predict``: ours predicts in <= 1.5 s per 1,000 documents (``predict_ms_per_1k``), with a P@1
  loss <= 0.3 points against the same model at full precision (``full_precision_P@1`` of the
  run when it predicted at reduced precision; otherwise the run is the full-precision model).

The targets are for 2 CPU cores: a run of ours on a GPU (``--preset full``; its ``gpu`` entry
was sampled) keeps its figures but is not judged (``met`` None, ``device`` the GPU's name).
"""

from __future__ import annotations

from typing import Any

DEBIAN = "debian-deps"
OURS, PECOS_XRT = "xr-transformer", "pecos-xr-transformer"
LINEAR = ("xr-linear", "pecos")
TRAIN_RATIO = 0.6
TRAIN_LIMIT_S = 30 * 60
P1_GAIN = 2.0
PREDICT_MS = 1500.0
P1_LOSS = 0.3


def _ok(methods: dict[str, Any], name: str) -> dict[str, Any] | None:
    r = methods.get(name)
    return r if r is not None and r["status"] == "ok" else None


def _first_run(r: dict[str, Any]) -> dict[str, Any]:
    """The first successful run of a method that ran (``_ok``)."""
    return next(x for x in r["runs"] if x["status"] == "ok")


def _p1(r: dict[str, Any]) -> float:
    return 100 * r["metrics"]["P@1"]


def vs_pecos(methods: dict[str, Any]) -> dict[str, Any]:
    """Train-time ratio and P@1 points of ours against PECOS XR-Transformer."""
    ours, peer = _ok(methods, OURS), _ok(methods, PECOS_XRT)
    if ours is None or peer is None:
        return {"met": None, "why": f"{OURS if ours is None else PECOS_XRT} did not run"}
    ratio = ours["train_s_median"] / peer["train_s_median"]
    points = _p1(ours) - _p1(peer)
    return {
        "train_s": ours["train_s_median"], "pecos_train_s": peer["train_s_median"],
        "train_ratio": ratio, "P@1": _p1(ours), "pecos_P@1": _p1(peer), "P@1_points": points,
        "met": ratio <= TRAIN_RATIO and points >= 0,
    }  # fmt: skip


def budget(methods: dict[str, Any]) -> dict[str, Any]:
    """Training seconds of ours and its P@1 gain over the best XR-Linear."""
    ours = _ok(methods, OURS)
    linear = {m: r for m in LINEAR if (r := _ok(methods, m)) is not None}
    if ours is None or not linear:
        return {"met": None, "why": f"{OURS} did not run" if ours is None else "no XR-Linear ran"}
    best = max(linear, key=lambda m: _p1(linear[m]))
    gain = _p1(ours) - _p1(linear[best])
    train_s = ours["train_s_median"]
    return {
        "train_s": train_s, "limit_s": TRAIN_LIMIT_S, "best_linear": best,
        "best_linear_P@1": _p1(linear[best]), "P@1": _p1(ours), "P@1_gain": gain,
        "met": train_s <= TRAIN_LIMIT_S and gain >= P1_GAIN,
    }  # fmt: skip


def predict(methods: dict[str, Any]) -> dict[str, Any]:
    """Prediction ms per 1,000 documents and the P@1 lost to reduced precision."""
    ours = _ok(methods, OURS)
    if ours is None:
        return {"met": None, "why": f"{OURS} did not run"}
    full = _first_run(ours).get("full_precision_metrics")
    loss = 0.0 if full is None else 100 * full["P@1"] - _p1(ours)
    ms = ours["predict_ms_per_1k_median"]
    return {
        "predict_ms_per_1k": ms, "limit_ms": PREDICT_MS, "P@1_loss": loss,
        "reduced_precision": full is not None,
        "met": ms <= PREDICT_MS and loss <= P1_LOSS,
    }  # fmt: skip


def targets(datasets: dict[str, Any]) -> dict[str, Any]:
    """The three targets on debian-deps (not evaluated when it did not run)."""
    if DEBIAN not in datasets:
        why = {"met": None, "why": f"{DEBIAN} was not benchmarked"}
        return {"vs_pecos": why, "budget": why, "predict": why}
    methods = datasets[DEBIAN]["methods"]
    out = {"vs_pecos": vs_pecos(methods), "budget": budget(methods), "predict": predict(methods)}
    if (device := gpu_name(methods)) is not None:
        for t in out.values():
            if t["met"] is not None:
                t["met"], t["device"] = None, device
    return out


def gpu_name(methods: dict[str, Any]) -> str | None:
    """The GPU our XR-Transformer ran on (its first successful run), None on a CPU."""
    ours = _ok(methods, OURS)
    gpu = {} if ours is None else _first_run(ours).get("gpu", {})
    return gpu.get("gpu_name", "a GPU") if gpu.get("sampled") else None


def verdict(t: dict[str, Any]) -> str:
    """met / NOT met, or why a target with figures was not judged."""
    if "device" in t:
        return f"not judged (ran on {t['device']}; the targets are for 2 CPU cores)"
    return {True: "met", False: "NOT met", None: "not evaluated"}[t["met"]]


def lines(t: dict[str, Any]) -> list[str]:
    """The targets section."""
    out = ["### Targets (debian-deps)", ""]
    v, b, p = t["vs_pecos"], t["budget"], t["predict"]
    head = "- training <= 0.6x PECOS XR-Transformer's, P@1 >= its"
    out.append(f"{head}: {v['why']}" if "why" in v else (
        f"{head}: {v['train_s']:.0f} vs {v['pecos_train_s']:.0f} s = {v['train_ratio']:.2f}x, "
        f"P@1 {v['P@1']:.2f} vs {v['pecos_P@1']:.2f} ({v['P@1_points']:+.2f}): "
        f"{verdict(v)}"))  # fmt: skip
    head = "- training <= 30 min with P@1 >= best XR-Linear + 2.0"
    out.append(f"{head}: {b['why']}" if "why" in b else (
        f"{head}: {b['train_s']:.0f} s, P@1 {b['P@1']:.2f} vs {b['best_linear']} "
        f"{b['best_linear_P@1']:.2f} ({b['P@1_gain']:+.2f}): {verdict(b)}"))  # fmt: skip
    head = "- prediction <= 1.5 s per 1,000 documents, P@1 loss <= 0.3"
    precision = "reduced precision" if p.get("reduced_precision") else "full precision"
    out.append(f"{head}: {p['why']}" if "why" in p else (
        f"{head}: {p['predict_ms_per_1k']:.0f} ms ({precision}), P@1 loss "
        f"{p['P@1_loss']:.2f}: {verdict(p)}"))  # fmt: skip
    return out


def stage_lines(methods: dict[str, Any]) -> list[str]:
    """Where the two XR-Transformers' training time goes (their first successful run)."""
    out: list[str] = []
    for name in (OURS, PECOS_XRT):
        r = _ok(methods, name)
        run = None if r is None else _first_run(r)
        if run is None:
            continue
        if name == OURS:
            parts = [f"{c['label']} {c['wall_s']:.1f}" for c in run["stages_s"] if c["wall_s"] >= 1]
        else:
            st = run["stages"]
            parts = [f"{k} {v:.1f}" for k, v in st["totals_s"].items()]
            parts += ["matcher levels " + ", ".join(f"{s:.1f}" for s in st["matcher_level_s"])]
        out += [f"{name} stages (wall s): " + "; ".join(parts), ""]
    return out
