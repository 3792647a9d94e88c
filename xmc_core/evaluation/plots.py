"""PNG plots of a run's diagnostics (:mod:`xmc_core.evaluation.diagnostics`, metrics by label
frequency).

Every function takes plain data (lists, dicts of floats) and a target path, writes the PNG
atomically and returns the path. matplotlib is imported lazily and drawn with its Agg canvas
directly (no pyplot, no global backend switch), so plotting is safe in worker threads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xmc_core.storage.atomic import atomic_file

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 100
TITLES = {
    "k_curves": "P@k and nDCG@k",
    "recall_by_frequency": "R@k by label frequency",
    "beam_recall": "Beam recall per tree level",
    "training_loss": "Ranker loss per tree level",
    "matcher_loss": "Matcher training loss",
    "reliability": "Reliability of the top-k probabilities",
}
"""Title of each plot (by the name :func:`write_plots` gives it) in reports."""


def plot_k_curves(curves: Mapping[str, Mapping[str, Sequence[float]]], path: str | Path) -> Path:
    """P@k and nDCG@k against k, one line per split.

    ``curves``: ``{split: {"k": [...], "P": [...], "nDCG": [...]}}`` (see
    :func:`xmc_core.evaluation.diagnostics.k_curves`); values are fractions, drawn in percent.
    """
    fig, axes = _figure(1, 2, (10, 4))
    for ax, metric in zip(axes, ("P", "nDCG"), strict=True):
        for split, curve in curves.items():
            ax.plot(curve["k"], [100 * v for v in curve[metric]], marker="o", label=split)
        ax.set(title=f"{metric}@k", xlabel="k", ylabel=f"{metric}@k (%)")
        _integer_ticks(ax)
        _finish(ax, bool(curves))
    return _save(fig, path)


def plot_recall_by_frequency(
    buckets: Mapping[str, Sequence[Mapping[str, Any]]], k: int, path: str | Path
) -> Path:
    """R@k of the relevant (doc, label) pairs per training-frequency bucket of the label.

    ``buckets``: ``{split: [{"lo", "hi", "n_labels", "n_relevant_pairs", "recall"}, ...]}``
    (see :func:`xmc_core.evaluation.metrics.recall_by_frequency`), the same buckets for every split.
    Grouped bars, one group per bucket, one bar per split.
    """
    fig, axes = _figure(1, 1, (8, 4))
    ax = axes[0]
    splits = list(buckets)
    names = [_bucket_name(b) for b in (buckets[splits[0]] if splits else [])]
    width = 0.8 / max(len(splits), 1)
    for s, split in enumerate(splits):
        xs = [i + (s - (len(splits) - 1) / 2) * width for i in range(len(names))]
        ax.bar(xs, [100 * b["recall"] for b in buckets[split]], width, label=split)
    ax.set_xticks(range(len(names)), names)
    ax.set(
        title=f"R@{k} by label frequency in train",
        xlabel="training documents per label",
        ylabel=f"R@{k} (%)",
        ylim=(0, 100),
    )
    _finish(ax, bool(splits))
    return _save(fig, path)


def plot_beam_recall(
    per_level: Mapping[str, Sequence[float]], beam_size: int, path: str | Path
) -> Path:
    """Beam recall per tree level, one line per split (``{split: [fraction per level]}``)."""
    fig, axes = _figure(1, 1, (6, 4))
    ax = axes[0]
    for split, values in per_level.items():
        ax.plot(range(len(values)), [100 * v for v in values], marker="o", label=split)
    ax.set(
        title=f"relevant nodes kept in the beam (beam size {beam_size})",
        xlabel="tree level",
        ylabel="beam recall (%)",
        ylim=(0, 105),
    )
    _integer_ticks(ax)
    _finish(ax, bool(per_level))
    return _save(fig, path)


def plot_training_loss(
    per_level: Mapping[str, Sequence[float]], loss: str, path: str | Path
) -> Path:
    """Mean ranker loss per tree level over teacher-forced pairs, one line per split."""
    fig, axes = _figure(1, 1, (6, 4))
    ax = axes[0]
    for split, values in per_level.items():
        ax.plot(range(len(values)), list(values), marker="o", label=split)
    ax.set(title=f"ranker {loss} loss per level", xlabel="tree level", ylabel="mean loss")
    _integer_ticks(ax)
    _finish(ax, bool(per_level))
    return _save(fig, path)


def plot_matcher_loss(history: Mapping[int, Sequence[tuple[int, float]]], path: str | Path) -> Path:
    """XR-Transformer matcher loss against step, one line per tree level
    (``{level: [(step, loss), ...]}``, see
    :func:`xmc_core.evaluation.diagnostics.matcher_loss_history`)."""
    fig, axes = _figure(1, 1, (6, 4))
    ax = axes[0]
    for level, points in history.items():
        if points:
            steps, losses = zip(*points, strict=True)
            ax.plot(steps, losses, marker=".", label=f"level {level}")
    ax.set(title="matcher training loss", xlabel="step", ylabel="loss")
    _finish(ax, any(history.values()))
    return _save(fig, path)


def plot_reliability(diagrams: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """Per split, the share of the top-k predictions that are relevant against their mean
    probability, bin by bin (the diagonal: perfectly calibrated), with each split's ECE@k."""
    fig, (ax,) = _figure(1, 1, (5, 4.5))
    ax.plot([0, 100], [0, 100], color="grey", linestyle="--", linewidth=1, label="calibrated")
    k = 0
    for split, d in diagrams.items():
        k = d["k"]
        shown = [i for i, n in enumerate(d["counts"]) if n > 0]
        ax.plot(
            [100 * d["confidence"][i] for i in shown], [100 * d["accuracy"][i] for i in shown],
            marker="o", label=f"{split} (ECE@{k} {100 * d['ece']:.2f}%)",
        )  # fmt: skip
    ax.set(
        title=f"Reliability of the top {k} probabilities", xlabel="mean probability (%)",
        ylabel="relevant (%)", xlim=(0, 100), ylim=(0, 100),
    )  # fmt: skip
    _finish(ax, bool(diagrams))
    return _save(fig, path)


def _figure(rows: int, cols: int, size: tuple[float, float]) -> tuple[Figure, list[Axes]]:
    """A figure on its own Agg canvas (no pyplot state) and its axes, flattened."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, list(axes.ravel())


def _finish(ax: Axes, has_data: bool) -> None:
    ax.grid(True, alpha=0.3)
    if has_data:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)


def _integer_ticks(ax: Axes) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _bucket_name(bucket: Mapping[str, Any]) -> str:
    lo, hi = bucket["lo"], bucket["hi"]
    span = f">={lo}" if hi is None else (str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}")
    return f"{span}\n{bucket['n_labels']} labels"


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI)
    return path


def write_plots(report: dict[str, Any], folder: Path) -> dict[str, str]:
    """The PNGs of a diagnostics report under ``folder``: ``{plot name: file name}`` (the
    per-level plots only for a tree ranker's report)."""
    written = [
        plot_k_curves(report["k_curves"], folder / "k_curves.png"),
        plot_recall_by_frequency(
            report["recall_by_frequency"], report["recall_k"], folder / "recall_by_frequency.png"
        ),
    ]
    if report["beam_recall"]:
        written.append(
            plot_beam_recall(report["beam_recall"], report["beam_size"], folder / "beam_recall.png")
        )
    if report["training_loss"]:
        written.append(
            plot_training_loss(
                report["training_loss"], report["loss"], folder / "training_loss.png"
            )
        )
    if report["matcher_loss"]:
        history = {int(level): points for level, points in report["matcher_loss"].items()}
        written.append(plot_matcher_loss(history, folder / "matcher_loss.png"))
    if report.get("reliability"):  # absent: an uncalibrated model, or an older report
        written.append(plot_reliability(report["reliability"], folder / "reliability.png"))
    return {path.stem: path.name for path in written}
