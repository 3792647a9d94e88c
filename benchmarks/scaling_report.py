"""What ``benchmarks/scaling.py`` makes of its runs: power-law fits of time and memory in labels
and documents, estimates for a size not yet run, the log-log plot and the Markdown summary.

A fit is ordinary least squares of ``log y = c + a log(labels) + b log(docs)`` over the sizes
where the step succeeded: ``a`` is the growth exponent in labels, ``b`` in documents. It needs
three sizes not on one line in (log labels, log docs); with sizes on one line (say labels =
docs) only the exponent along that line, ``a + b``, is known and is reported as such.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

QUANTITIES = {
    "featurize s": ("featurize", "featurize_s"),
    "featurize peak RSS MB": ("featurize", "peak_rss_mb"),
    "ours train s": ("ours", "train_s"),
    "ours train CPU s": ("ours", "train_cpu_s"),
    "ours predict ms/1k docs": ("ours", "predict_ms_per_1k_docs"),
    "ours peak RSS MB": ("ours", "peak_rss_mb"),
    "pecos train s": ("pecos", "train_s"),
    "pecos train CPU s": ("pecos", "train_cpu_s"),
    "pecos predict ms/1k docs": ("pecos", "predict_ms_per_1k_docs"),
    "pecos peak RSS MB": ("pecos", "peak_rss_mb"),
}
"""Name -> (step, key) of every fitted quantity."""
BASE_RSS_MB = 200.0
"""RSS of a process that has loaded the interpreter and its imports: not scaled by estimates."""


def step_of(size: dict[str, Any], step: str) -> dict[str, Any]:
    """The run of ``step`` (``generate``, ``featurize`` or a method) at ``size`` ({} if none)."""
    if step in ("generate", "featurize"):
        return size.get(step, {})
    return size.get("methods", {}).get(step, {})


def rows(sizes: list[dict[str, Any]], step: str, key: str) -> list[tuple[int, int, float, str]]:
    """``(labels, docs, value, size name)`` of the sizes where ``step`` succeeded."""
    out = []
    for size in sizes:
        run = step_of(size, step)
        if run.get("status") == "ok" and run.get(key) is not None and "n_labels" in size:
            out.append((size["n_labels"], size["n_train"], float(run[key]), size["name"]))
    return out


def points(sizes: list[dict[str, Any]], step: str, key: str) -> np.ndarray:
    """(n, 3) rows ``labels, docs, value`` of the sizes where ``step`` succeeded."""
    found = [r[:3] for r in rows(sizes, step, key)]
    return np.array(found, dtype=np.float64).reshape(-1, 3)


def fit(pts: np.ndarray) -> dict[str, Any] | None:
    """Power law through ``pts`` (rows labels, docs, value): exponents in labels and documents
    when the points span both, else the exponent along their line; None below 2 points."""
    pts = pts[pts[:, 2] > 0]
    if len(pts) < 2:
        return None
    logs = np.log(pts)
    design = np.column_stack([np.ones(len(pts)), logs[:, 0], logs[:, 1]])
    if len(pts) >= 3 and np.linalg.matrix_rank(design, tol=1e-6) == 3:
        coef, *_ = np.linalg.lstsq(design, logs[:, 2], rcond=None)
        resid = logs[:, 2] - design @ coef
        return {
            "labels_exponent": float(coef[1]),
            "docs_exponent": float(coef[2]),
            "log_intercept": float(coef[0]),
            "n_points": len(pts),
            "max_abs_log_residual": float(np.abs(resid).max()),
        }
    along = np.log(pts[:, 0] * pts[:, 1])  # the sizes' line; exponent per unit of log size
    slope, intercept = np.polyfit(along, logs[:, 2], 1)
    return {"along_line_exponent": float(2 * slope), "n_points": len(pts), "note": (
        "sizes on one line in (log labels, log docs): labels and documents not separable; "
        "the exponent is d log y / d log size with labels and docs growing together"
    ), "log_intercept_along": float(intercept)}  # fmt: skip


def linear_fit(pts: np.ndarray) -> dict[str, Any] | None:
    """Least squares of ``value = base + a * labels + b * docs`` through ``pts`` (rows labels,
    docs, value): how memory grows, a fixed part (interpreter, imports) plus a cost per label
    and per document. None unless three sizes span both dimensions."""
    if len(pts) < 3:
        return None
    design = np.column_stack([np.ones(len(pts)), pts[:, 0], pts[:, 1]])
    if np.linalg.matrix_rank(design / design.max(axis=0), tol=1e-6) < 3:
        return None  # the sizes lie on one line: labels and documents not separable
    coef, *_ = np.linalg.lstsq(design, pts[:, 2], rcond=None)
    resid = (pts[:, 2] - design @ coef) / pts[:, 2]
    return {
        "base": float(coef[0]),
        "per_1k_labels": float(1000 * coef[1]),
        "per_1k_docs": float(1000 * coef[2]),
        "n_points": len(pts),
        "max_rel_residual": float(np.abs(resid).max()),
    }


def fits(sizes: list[dict[str, Any]]) -> dict[str, Any]:
    """Every quantity of :data:`QUANTITIES` fitted over ``sizes``; its exponents between sizes
    that differ in one dimension only (``pairs``); peak RSS also as base + per label + per doc
    (``linear``)."""
    out = {name: fit(points(sizes, *where)) for name, where in QUANTITIES.items()}
    pairs = {name: pair_exponents(rows(sizes, *where)) for name, where in QUANTITIES.items()}
    linear = {
        name: linear_fit(points(sizes, *where))
        for name, where in QUANTITIES.items()
        if where[1] == "peak_rss_mb"
    }
    return out | {
        "pairs": {name: p for name, p in pairs.items() if p},
        "linear": {name: f for name, f in linear.items() if f},
    }


def pair_exponents(found: list[tuple[int, int, float, str]]) -> list[dict[str, Any]]:
    """``d log value / d log size`` between two sizes whose labels (or documents) are within
    5% of each other while the documents (labels) grow at least 1.5x: the cleanest exponent in
    one dimension, free of the other and of the smaller sizes' fixed costs."""
    out = []
    for i, (l1, d1, y1, a) in enumerate(found):
        for l2, d2, y2, b in found[i + 1 :]:
            for vary, same, (x1, x2) in (
                ("docs", (l1, l2), (d1, d2)),
                ("labels", (d1, d2), (l1, l2)),
            ):
                steady = abs(np.log(same[1] / same[0])) < np.log(1.05)
                if steady and abs(np.log(x2 / x1)) >= np.log(1.5) and y1 > 0 and y2 > 0:
                    e = float(np.log(y2 / y1) / np.log(x2 / x1))
                    low, high = (a, b) if x1 < x2 else (b, a)
                    out.append({"vary": vary, "from": low, "to": high, "exponent": e})
    return out


def estimate(sizes: list[dict[str, Any]], step: str, key: str, labels: int, docs: int) -> Any:
    """(value, how) of ``step``'s ``key`` at a size not yet run: from the fit in labels and
    documents when there is one (memory: :func:`linear_fit`, time: the power law), else from
    the largest size run, the part above BASE_RSS_MB (memory) or all of it (time) grown in
    proportion to the larger of the two size ratios. (None, why) without a size run."""
    pts = points(sizes, step, key)
    lin = linear_fit(pts) if key == "peak_rss_mb" else None
    if lin is not None:
        value = lin["base"] + (lin["per_1k_labels"] * labels + lin["per_1k_docs"] * docs) / 1000
        return float(value), f"base + per label + per doc, fitted over {lin['n_points']} sizes"
    f = fit(pts)
    if f is not None and "labels_exponent" in f:
        value = np.exp(
            f["log_intercept"]
            + f["labels_exponent"] * np.log(labels)
            + f["docs_exponent"] * np.log(docs)
        )
        return float(value), f"power-law fit over {f['n_points']} sizes"
    if not len(pts):
        return None, "no earlier size to estimate from"
    last = pts[np.argmax(pts[:, 0] * pts[:, 1])]
    ratio = max(labels / last[0], docs / last[1])
    base = BASE_RSS_MB if key == "peak_rss_mb" else 0.0
    value = base + max(last[2] - base, 0.0) * ratio
    return value, f"{last[2]:.4g} at {int(last[0])} labels/{int(last[1])} docs x {ratio:.3g}"


# ---------------------------------------------------------------- plot
def plot(sizes: list[dict[str, Any]], path: Path) -> None:
    """Time and peak RSS vs documents and vs labels (log-log), ours and PECOS (and our
    featurization), as a PNG at ``path`` (written through a temporary name)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 8.5))  # no pyplot: no global figure state, no GUI backend
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2)
    series = {
        "time": [("ours", "train_s", "ours train"), ("pecos", "train_s", "PECOS train"),
                 ("featurize", "featurize_s", "our featurize")],
        "memory": [("ours", "peak_rss_mb", "ours"), ("pecos", "peak_rss_mb", "PECOS"),
                   ("featurize", "peak_rss_mb", "our featurize")],
    }  # fmt: skip
    for row, (what, lines) in enumerate(series.items()):
        for col, (axis, name) in enumerate(((1, "training documents"), (0, "labels"))):
            ax = axes[row][col]
            for step, key, label in lines:
                pts = points(sizes, step, key)
                if len(pts):
                    ax.loglog(pts[:, axis], pts[:, 2], marker="o", label=label)
                for *xy, y, size in rows(sizes, step, key) if step == "ours" else ():
                    at = (xy[axis], y)
                    ax.annotate(size, at, fontsize=7, xytext=(4, -10), textcoords="offset points")
            ax.set_xlabel(name)
            ax.set_ylabel("seconds" if what == "time" else "peak RSS (MB)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle("XR-Linear scaling on synthetic power-law corpora (ours vs PECOS)")
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}.png")
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)


# ---------------------------------------------------------------- Markdown
def _cell(run: dict[str, Any], key: str, fmt: str) -> str:
    if run.get("status") != "ok":
        return run.get("status", "-") if run else "-"
    value = run.get(key)
    return "-" if value is None else format(value, fmt)


def size_table(sizes: list[dict[str, Any]]) -> list[str]:
    """One row per size: corpus, featurization, and ours / PECOS side by side."""
    head = (
        "| size | labels | train / test docs | X nnz | generate s (docs/s) | featurize s "
        "| featurize RSS MB | train s ours / PECOS | predict ms/1k ours / PECOS "
        "| peak RSS MB ours / PECOS | P@1 % ours / PECOS |"
    )
    lines = [head, "|---|" + "---:|" * 10]
    for s in sizes:
        gen, feat = s.get("generate", {}), s.get("featurize", {})
        ours, pecos = step_of(s, "ours"), step_of(s, "pecos")

        def pair(key: str, fmt: str, a: dict = ours, b: dict = pecos) -> str:
            return f"{_cell(a, key, fmt)} / {_cell(b, key, fmt)}"

        p1 = [f"{100 * r['metrics']['P@1']:.2f}" if "metrics" in r else "-" for r in (ours, pecos)]
        rate = f" ({gen['docs_per_s']:.0f})" if gen.get("status") == "ok" else ""
        lines.append(
            f"| {s['name']} | {s.get('n_labels', '-')} | {s.get('n_train', '-')} / "
            f"{s.get('n_test', '-')} | {s.get('nnz_train', '-')} | "
            f"{_cell(gen, 'write_s', '.1f')}{rate} | {_cell(feat, 'featurize_s', '.1f')} | "
            f"{_cell(feat, 'peak_rss_mb', '.0f')} | {pair('train_s', '.1f')} | "
            f"{pair('predict_ms_per_1k_docs', '.0f')} | {pair('peak_rss_mb', '.0f')} | "
            f"{' / '.join(p1)} |"
        )
    return lines


def fit_table(all_fits: dict[str, Any]) -> list[str]:
    """The exponents of every quantity."""
    lines = ["| quantity | exponent in labels | exponent in docs | sizes | max log residual |"]
    lines.append("|---|---:|---:|---:|---:|")
    for name, f in all_fits.items():
        if f is None:
            lines.append(f"| {name} | - | - | <2 | - |")
        elif "labels_exponent" in f:
            lines.append(
                f"| {name} | {f['labels_exponent']:.2f} | {f['docs_exponent']:.2f} | "
                f"{f['n_points']} | {f['max_abs_log_residual']:.3f} |"
            )
        else:
            lines.append(
                f"| {name} | {f['along_line_exponent']:.2f} (labels and docs together) | | "
                f"{f['n_points']} | - |"
            )
    return lines


def pair_table(pairs: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The exponents between sizes that differ in labels only or in documents only."""
    lines = ["| quantity | grows with | from | to | exponent |", "|---|---|---|---|---:|"]
    for name, found in pairs.items():
        for p in found:
            lines.append(
                f"| {name} | {p['vary']} | {p['from']} | {p['to']} | {p['exponent']:.2f} |"
            )
    return lines


def markdown(report: dict[str, Any]) -> str:
    """The summary: sizes table, exponents, the largest size within the limits, skipped sizes."""
    sizes = report["sizes"]
    lines = ["### Scaling: results", "", *size_table(sizes), "", "Fitted growth exponents:", ""]
    all_fits = dict(report["fits"])
    pairs, linear = all_fits.pop("pairs", {}), all_fits.pop("linear", {})
    lines += fit_table(all_fits)
    if linear:
        lines += ["", "Peak RSS as base + per label + per document (least squares):", ""]
        lines += ["| step | base MB | MB per 1k labels | MB per 1k docs | max rel. residual |"]
        lines += ["|---|---:|---:|---:|---:|"]
        for name, f in linear.items():
            lines.append(
                f"| {name} | {f['base']:.0f} | {f['per_1k_labels']:.2f} | "
                f"{f['per_1k_docs']:.2f} | {f['max_rel_residual']:.3f} |"
            )
    if pairs:
        lines += ["", "Between sizes that differ in one dimension only:", "", *pair_table(pairs)]
    limits = report["limits"]
    lines += ["", f"Largest size within {limits['memory_gib']:g} GiB on {limits['cores']} cores:"]
    for method, name in report["largest_ok"].items():
        lines.append(f"- {method}: {name or 'none'}")
    for s in sizes:
        if s.get("status") != "ok":
            lines.append(f"- {s['name']}: {s.get('status')}: {s.get('reason', '')}")
    return "\n".join(lines) + "\n"
