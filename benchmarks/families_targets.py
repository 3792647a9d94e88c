"""The targets of the second families issue (DeepXML/Astec, NeuralXC, HierarchicalXC) in the
report of ``benchmarks/families.py``: computed met / not met with their margins, and their
Markdown lines.

- Astec predicts at most as slowly as our XR-Linear on debian-deps (ms per 1,000 documents:
  its selling point is a prediction cost independent of the label count); its P@1 is reported
  against XR-Linear on every dataset;
- NeuralXC and HierarchicalXC beat the label-frequency baseline on every dataset, and their gap
  to XR-Linear is stated.
"""

from __future__ import annotations

from typing import Any

DEBIAN = "debian-deps"
ASTEC, NEURALXC, HXC = "astec", "neural-xc", "hierarchical-xc"
FAMILIES = (ASTEC, NEURALXC, HXC)


def _ok(datasets: dict[str, Any], name: str, method: str) -> dict[str, Any] | None:
    r = datasets.get(name, {}).get("methods", {}).get(method)
    return r if r is not None and r["status"] == "ok" else None


def _p1(r: dict[str, Any]) -> float:
    return 100 * r["metrics"]["P@1"]


def _why(*pairs: tuple[str, dict[str, Any] | None]) -> str:
    return "not evaluated: " + ", ".join(f"{m} did not run" for m, r in pairs if r is None)


def astec_rows(datasets: dict[str, Any]) -> list[dict[str, Any]]:
    """Astec vs XR-Linear on every dataset both ran: P@1 points and predict-time ratio; the
    target (``met``) is the predict time on debian-deps only (None elsewhere: reported)."""
    rows = []
    for name in datasets:
        astec, xr = _ok(datasets, name, ASTEC), _ok(datasets, name, "xr-linear")
        row: dict[str, Any] = {"dataset": name, "target": name == DEBIAN}
        if astec is None or xr is None:
            rows.append(row | {"met": None, "why": _why((ASTEC, astec), ("xr-linear", xr))})
            continue
        ms, xr_ms = astec["predict_ms_per_1k_median"], xr["predict_ms_per_1k_median"]
        row |= {"P@1_points": _p1(astec) - _p1(xr), "predict_ms": ms, "xr_linear_ms": xr_ms}
        met = ms <= xr_ms if row["target"] else None
        rows.append(row | {"predict_ratio": ms / xr_ms, "met": met})
    return rows


def frequency_rows(datasets: dict[str, Any]) -> list[dict[str, Any]]:
    """NeuralXC and HierarchicalXC vs the frequency baseline (the target) and XR-Linear (the
    stated gap), on every dataset."""
    rows = []
    for method in (NEURALXC, HXC):
        for name in datasets:
            r, base = _ok(datasets, name, method), _ok(datasets, name, "frequency")
            xr = _ok(datasets, name, "xr-linear")
            row: dict[str, Any] = {"method": method, "dataset": name}
            if r is None or base is None:
                rows.append(row | {"met": None, "why": _why((method, r), ("frequency", base))})
                continue
            gain = _p1(r) - _p1(base)
            row |= {"P@1": _p1(r), "vs_frequency": gain, "met": gain > 0}
            rows.append(row | {"vs_xr_linear": None if xr is None else _p1(r) - _p1(xr)})
    return rows


def targets(datasets: dict[str, Any]) -> dict[str, Any]:
    return {"astec_vs_xr_linear": astec_rows(datasets), "beats_frequency": frequency_rows(datasets)}


def lines(t: dict[str, Any], verdict: Any) -> list[str]:
    """Markdown bullets (``verdict``: met / NOT met / not evaluated from True / False / None)."""
    out = []
    for r in t.get("astec_vs_xr_linear", []):
        head = f"- Astec vs XR-Linear on {r['dataset']}"
        if "why" in r:
            out.append(f"{head}: {r['why']}")
            continue
        text = (
            f"{head}: P@1 {r['P@1_points']:+.2f} points; predict {r['predict_ms']:.0f} vs "
            f"{r['xr_linear_ms']:.0f} ms per 1k docs ({r['predict_ratio']:.2f}x"
        )
        out.append(text + (f", <= 1.0x): {verdict(r['met'])}" if r["target"] else ", reported)"))
    for r in t.get("beats_frequency", []):
        head = f"- {r['method']} vs the label-frequency baseline on {r['dataset']}"
        if "why" in r:
            out.append(f"{head}: {r['why']}")
            continue
        gap = "" if r["vs_xr_linear"] is None else f"; {r['vs_xr_linear']:+.2f} vs XR-Linear"
        out.append(
            f"{head}: P@1 {r['P@1']:.2f}, {r['vs_frequency']:+.2f} points (> 0){gap}: "
            f"{verdict(r['met'])}"
        )
    return out
