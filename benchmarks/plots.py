"""The current benchmark tables and plots, made from the results JSON of ``benchmarks/results/``.

``CURRENT`` names, per dataset, the run that holds each method's current figures (a family or a
peer, the results file and the method's key in it). ``python benchmarks/plots.py`` then

- rewrites the tables of ``BENCHMARKS.md`` between its ``[start:tables]`` and ``[end:tables]``
  markers, which the documentation site includes with pymdownx.snippets (P@1, P@5, PSP@5,
  train s, predict ms per 1k documents, peak RSS; machine, commit and command of every run), and
- draws ``docs/assets/plots/<dataset>.png`` (test P@1 and train time, one bar each per method) and
  ``docs/assets/plots/scaling.png`` (train time and peak RSS against corpus size, ours vs PECOS),
  which the documentation site shows, and
- writes ``docs/families/figures/<family>.md``: each of our families' rows over the datasets,
  which its page of the site includes.

A rerun of a benchmark replaces its entry in ``CURRENT`` (and its table), never adds a table.
``--check`` exits 1 when ``BENCHMARKS.md``'s tables differ from what the results files give.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PLOTS = ROOT / "docs" / "assets" / "plots"
DOCUMENT = ROOT / "BENCHMARKS.md"
FIGURES = ROOT / "docs" / "families" / "figures"
"""One Markdown table per family, which its page of the documentation site includes."""
FAMILIES_OF_OURS = (
    "xr_linear", "xr_transformer", "x_transformer", "xml_cnn", "astec", "hierarchical_xc",
    "neural_xc", "ensemble",
)  # fmt: skip
START, END = "<!-- --8<-- [start:tables] -->", "<!-- --8<-- [end:tables] -->"

FAMILIES = "families-{}-2026-11-24.json"
PEERS = "peers-2026-12-03.json"
PEERS_OURS = "peers-ours-pecos-2026-12-03.json"
"""Ours and PECOS again after the beam's feature tables (fae95a3); napkinXC and Omikuji: PEERS."""
PEERS_NOTE = "seeds 0, 1, 2"
XRT_AMD = "xr-transformer-cpu-2026-11-27-amd.json"


@dataclass(frozen=True)
class Entry:
    """One row of a table: who (``label``, ``kind`` ours/peer/baseline), from which run."""

    label: str
    kind: str
    file: str
    method: str
    note: str = ""


def _families(name: str, *rows: tuple[str, str, str]) -> list[Entry]:
    return [Entry(label, kind, FAMILIES.format(name), method) for label, kind, method in rows]


_PEERS = [
    Entry("xr_linear", "ours", PEERS_OURS, "ours", PEERS_NOTE),
    Entry("PECOS XR-Linear", "peer", PEERS_OURS, "pecos"),
    Entry("napkinXC", "peer", PEERS, "napkinxc"),
    Entry("Omikuji (3 trees)", "peer", PEERS, "omikuji"),
]
_XRT_AMD = [
    Entry("xr_transformer (cpu preset, int8 predict)", "ours", XRT_AMD, "xr-transformer"),
    Entry("PECOS XR-Transformer (same settings)", "peer", XRT_AMD, "pecos-xr-transformer"),
]
_SMALL = (
    ("x_transformer", "ours", "x-transformer"),
    ("xml_cnn (5 epochs)", "ours", "xml-cnn"),
    ("ensemble (3 xr_linear)", "ours", "ensemble"),
    ("LibMultiLabel XML-CNN (5 epochs)", "peer", "libmultilabel-xml-cnn"),
)
_FAM_II = (
    ("astec", "ours", "astec"),
    ("neural_xc", "ours", "neural-xc"),
    ("hierarchical_xc", "ours", "hierarchical-xc"),
    ("label frequency", "baseline", "frequency"),
)
_GPU = "xr-transformer-full-gpu-h100-{}-2026-11-27.json"
_GPU_NOTE = "one H100, bf16; the tree of 195d5fd (the file's head reads f5da6ab)"
_XRT_OLD = "xr_transformer (cpu preset of 2026-11-24)"

CURRENT: dict[str, list[Entry]] = {
    "reuters21578-modapte": [
        *_PEERS,
        *_XRT_AMD,
        Entry("xr_transformer (gpu preset)", "ours", _GPU.format("reuters"), "xr-transformer",
              _GPU_NOTE),
        Entry(_XRT_OLD, "ours", FAMILIES.format("reuters"), "xr-transformer"),
        *_families("reuters", *_SMALL),
        *_families("ii-reuters", *_FAM_II),
    ],
    "bibtex-bow": [
        *_PEERS,
        Entry(_XRT_OLD, "ours", FAMILIES.format("bibtex-delicious"), "xr-transformer"),
        *_families("bibtex-delicious", *_SMALL),
        *_families("ii-bibtex", *_FAM_II),
    ],
    "delicious-bow": [
        *_PEERS,
        Entry(_XRT_OLD, "ours", FAMILIES.format("bibtex-delicious"), "xr-transformer"),
        *_families("bibtex-delicious", *_SMALL),
        *_families("ii-delicious-rerun", _FAM_II[0]),
        *_families("ii-delicious", *_FAM_II[1:]),
    ],
    "debian-deps": [
        *_PEERS,
        *_XRT_AMD,
        Entry("xr_transformer (cpu-long preset, int8 predict)", "ours",
              "xr-transformer-cpu-long-tfn-man-2026-11-27.json", "xr-transformer"),
        Entry("xr_transformer (gpu preset)", "ours", _GPU.format("debian-deps"), "xr-transformer",
              _GPU_NOTE),
        *_families("debian-transformers", _SMALL[0]),
        *_families("debian-cnn", _SMALL[1], _SMALL[3]),
        *_families("debian-linear", _SMALL[2]),
        *_families("ii-debian-rerun", _FAM_II[0]),
        *_families("ii-debian", *_FAM_II[1:]),
    ],
}  # fmt: skip

SCALING = ("scaling-2026-11-24-late.json", "scaling-1Mx1M-2026-12-03-beam.json")
"""The current scaling runs (ours vs PECOS): the sizes of the later file replace the earlier's."""


def load(name: str) -> dict[str, Any]:
    """A results file of ``benchmarks/results/`` as parsed JSON."""
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def row(entry: Entry, dataset: str) -> dict[str, Any]:
    """One method's current figures: metrics in %, times, memory, and where they come from."""
    run = load(entry.file)
    record = run["datasets"][dataset]["methods"][entry.method]
    metrics = record["metrics"]
    return {
        "label": entry.label,
        "kind": entry.kind,
        "P@1": 100 * metrics["P@1"],
        "P@5": 100 * metrics["P@5"],
        "PSP@5": 100 * metrics["PSP@5"],
        "train_s": record["train_s_median"],
        "predict_ms": record["predict_ms_per_1k_median"],
        "rss_mb": record["peak_rss_mb_max"],
        "machine": run["machine"]["cpu_model"],
        "commit": run["git_start"]["head"][:7],
        "file": entry.file,
        "command": run["command"],
        "note": entry.note,
    }


def table(dataset: str) -> str:
    """The Markdown table of ``dataset``: one row per method, then the runs it comes from."""
    rows = [row(entry, dataset) for entry in CURRENT[dataset]]
    runs = list(dict.fromkeys(r["file"] for r in rows))
    head = (
        "| method | P@1 | P@5 | PSP@5 | train s | predict ms/1k | peak RSS MB | run |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [f"### {dataset}", "", head]
    for r in rows:
        name = f"**{r['label']}**" if r["kind"] == "ours" else r["label"]
        lines.append(
            f"| {name} | {r['P@1']:.2f} | {r['P@5']:.2f} | {r['PSP@5']:.2f} | "
            f"{r['train_s']:,.1f} | {r['predict_ms']:,.0f} | {r['rss_mb']:,.0f} | "
            f"{runs.index(r['file']) + 1} |"
        )
    lines.append("")
    for number, name in enumerate(runs, 1):
        first = next(r for r in rows if r["file"] == name)
        note = f"; {first['note']}" if first["note"] else ""
        lines.append(
            f"{number}. `{name}` ({first['machine']}, {first['commit']}{note}): "
            f"`{first['command']}`"
        )
    return "\n".join(lines)


def tables() -> str:
    """Every dataset's table, in ``CURRENT``'s order."""
    return "\n\n".join(table(dataset) for dataset in CURRENT)


def family_table(family: str) -> str:
    """Every current row of one of our families (``family``: its ``model.kind``), all datasets."""
    lines = [
        "| dataset | method | P@1 | P@5 | PSP@5 | train s | predict ms/1k | peak RSS MB | run |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for dataset, entries in CURRENT.items():
        for entry in entries:
            if entry.kind != "ours" or entry.label.split()[0] != family:
                continue
            r = row(entry, dataset)
            lines.append(
                f"| {dataset} | {r['label']} | {r['P@1']:.2f} | {r['P@5']:.2f} | "
                f"{r['PSP@5']:.2f} | {r['train_s']:,.1f} | {r['predict_ms']:,.0f} | "
                f"{r['rss_mb']:,.0f} | `{entry.file}` ({r['machine']}, {r['commit']}) |"
            )
    return "\n".join(lines) + "\n"


def stale_files() -> dict[Path, str]:
    """The files whose text differs from what the results give: path -> the text it should hold."""
    wanted = {DOCUMENT: replace_tables(DOCUMENT.read_text(encoding="utf-8"), tables())}
    for family in FAMILIES_OF_OURS:
        wanted[FIGURES / f"{family}.md"] = family_table(family)
    return {
        path: text
        for path, text in wanted.items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    }


def replace_tables(document: str, text: str) -> str:
    """``document`` with what lies between the table markers replaced by ``text``."""
    before, _, rest = document.partition(START)
    _, _, after = rest.partition(END)
    if not rest:
        raise SystemExit(f"{DOCUMENT.name} has no {START} marker")
    return f"{before}{START}\n{text}\n{END}{after}"


def plot_dataset(dataset: str, out: Path) -> None:
    """Two bar panels, one bar per method sorted by P@1: test P@1, and train seconds (log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted((row(entry, dataset) for entry in CURRENT[dataset]), key=lambda r: r["P@1"])
    names = [r["label"] for r in rows]
    colours = ["C0" if r["kind"] == "ours" else "C3" for r in rows]
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(11, 0.32 * len(rows) + 1.4), sharey=True, width_ratios=(3, 2)
    )
    left.barh(names, [r["P@1"] for r in rows], color=colours)
    for y, r in enumerate(rows):
        left.text(r["P@1"] + 0.5, y, f"{r['P@1']:.2f}", va="center", fontsize=7)
    left.set_xlabel("test P@1 (%)")
    left.set_xlim(0, 105)
    right.barh(names, [max(r["train_s"], 0.01) for r in rows], color=colours)
    right.set_xscale("log")
    right.set_xlabel("train seconds (log scale)")
    for ax in (left, right):
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(f"{dataset}: ours (blue) against peers and baselines (red)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def scaling_points() -> dict[str, dict[str, tuple[int, int, float, float]]]:
    """Per size name, per method: (labels, train docs, train s, peak RSS MB); later files win."""
    points: dict[str, dict[str, tuple[int, int, float, float]]] = {}
    for name in SCALING:
        for size in load(name)["sizes"]:
            points[size["name"]] = {
                method: (size["n_labels"], size["n_train"], m["train_s"], m["peak_rss_mb"])
                for method, m in size["methods"].items()
                if m.get("status") == "ok"
            }
    return points


def plot_scaling(out: Path) -> None:
    """Train seconds and peak RSS of ours and PECOS at each synthetic size (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = scaling_points()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for method, colour in (("ours", "C0"), ("pecos", "C3")):
        sizes = [(name, p[method]) for name, p in points.items() if method in p]
        ticks = [n for n, _ in sizes]
        left.plot(ticks, [v[2] for _, v in sizes], "o-", c=colour, label=method)
        right.plot(ticks, [v[3] / 1024 for _, v in sizes], "o-", c=colour, label=method)
    left.set_ylabel("train seconds (2 cores)")
    right.set_ylabel("peak RSS (GiB)")
    for ax in (left, right):
        ax.set_yscale("log")
        ax.set_xlabel("labels x training documents")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("XR-Linear scaling on synthetic corpora: ours against PECOS")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Rewrite BENCHMARKS.md's and the family pages' tables and draw the plots (or only check)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the tables are stale")
    parser.add_argument("--no-plots", action="store_true", help="rewrite the tables only")
    args = parser.parse_args(argv)
    stale = stale_files()
    if args.check:
        for path in stale:
            print(
                f"{path.relative_to(ROOT)} is stale: run python benchmarks/plots.py",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path, text in stale.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if not args.no_plots:
        PLOTS.mkdir(parents=True, exist_ok=True)
        for dataset in CURRENT:
            plot_dataset(dataset, PLOTS / f"{dataset}.png")
        plot_scaling(PLOTS / "scaling.png")
    print(f"wrote {len(stale)} stale table file(s)" + ("" if args.no_plots else " and the plots"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
