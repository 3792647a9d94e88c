"""Featurization benchmark: xmc TF-IDF (fit + transform) vs scikit-learn's ``TfidfVectorizer``.

Usage, from the repository root::

    python benchmarks/featurize.py [--datasets-root ../shared/datasets]
        [--datasets debian-deps,reuters21578-modapte,delicious-bow,bibtex-bow]
        [--repeats 3] [--max-features 200000] [--out benchmarks/results/featurize-<date>.json]

Each dataset is ingested once (``lines`` importer, untimed) into a temporary folder. Each timed
variant then runs in its own fresh subprocess, ``--repeats`` times, variants interleaved:

- ``sklearn``: ``fit_transform(train)`` + ``transform(test)`` on texts already in memory;
- ``xmc-1proc``: count every partition, fit the vectorizer, transform every partition, in one
  process, reading partitions from the ingested Parquet corpus;
- ``xmc-2proc``: the same stages with partitions on a ``ProcessPoolExecutor(2)`` (fork);
- ``xmc-2proc-dask``: the same with dask's ``processes`` scheduler (fork context), for reference.

Peak memory: the sums of RSS and of PSS over a variant's process tree, sampled every 20 ms by
this process (forked workers share pages, which RSS counts once per process and PSS splits).
Equivalence checks run once per dataset, outside timing, and the script exits 1 if one fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import numpy as np
import psutil
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from xmc_core.config import TfidfConfig, TokenizerConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.schema import Policies
from xmc_core.features import stages

REPO = Path(__file__).resolve().parents[1]
DATASETS = "debian-deps,reuters21578-modapte,delicious-bow,bibtex-bow"
VARIANTS = ("sklearn", "xmc-1proc", "xmc-2proc", "xmc-2proc-dask")
TOLERANCE = 1e-6
SAMPLE_S = 0.02

SKLEARN = {"ngram_range": (1, 2), "sublinear_tf": True, "smooth_idf": True, "norm": "l2"}
SKLEARN |= {"min_df": 1, "max_df": 1.0, "dtype": np.float32}
TABLE_HEAD = (
    "| variant | median s | min s | / sklearn | peak RSS MB | peak PSS MB | stages (median s) |\n"
    "|---|---:|---:|---:|---:|---:|---|"
)

Mapper = Callable[[Callable[[Any], Any], Sequence[Any]], Iterable[Any]]
Job = Callable[[], tuple[dict, int, int]]  # -> (wall seconds per stage, n_features, nnz)


# ---------------------------------------------------------------- identical settings on both sides
def tokenizer_config() -> TokenizerConfig:
    """Lowercase word uni- and bigrams of >= 2 word characters (sklearn's default pattern)."""
    return TokenizerConfig(lowercase=True, ngram_max=2, min_token_len=2)


def tfidf_config(max_features: int | None) -> TfidfConfig:
    """Our settings matching :func:`sklearn_vectorizer`."""
    return TfidfConfig(
        min_df=1, max_df=1.0, max_features=max_features, sublinear_tf=True, smooth_idf=True
    )


def sklearn_vectorizer(max_features: int | None, vocabulary: list[str] | None = None) -> Any:
    """scikit-learn's ``TfidfVectorizer`` with the settings of :func:`tfidf_config`."""
    return TfidfVectorizer(max_features=max_features, vocabulary=vocabulary, **SKLEARN)


def read_texts(corpus: Corpus, split: str) -> list[str]:
    """Texts of ``split`` as ingested: exactly the documents our pipeline featurizes."""
    return corpus.read_split(split, ["text"]).column("text").to_pylist()


# ---------------------------------------------------------------- the timed work (child processes)
def xmc_featurize(corpus: Corpus, tfidf: TfidfConfig, mapper: Mapper) -> dict[str, Any]:
    """Count train+test partitions, fit on train counts, transform train+test partitions;
    ``mapper`` is ``map`` (one process) or a parallel equivalent.

    Returns ``vectorizer``, ``X``: list of csr (rows_of_partition, n_features) in partition
    order (train first), ``n_train_parts`` and ``stages_s``: wall seconds per stage.
    """
    tok = tokenizer_config()
    train, test = corpus.partitions("train"), corpus.partitions("test")
    t0 = time.perf_counter()
    counts = list(mapper(partial(stages.count_partition, corpus, cfg=tok), train + test))
    t1 = time.perf_counter()
    vectorizer = stages.fit_vectorizer(counts[: len(train)], tfidf, tok)
    t2 = time.perf_counter()
    X = list(mapper(vectorizer.transform_counts, counts))
    t3 = time.perf_counter()
    times = {"count": t1 - t0, "fit": t2 - t1, "transform": t3 - t2}
    return {"vectorizer": vectorizer, "X": X, "n_train_parts": len(train), "stages_s": times}


def dask_map(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """dask core's ``processes`` scheduler on 2 forked workers (a fresh pool per call)."""
    import dask

    with dask.config.set({"multiprocessing.context": "fork"}):
        tasks = [dask.delayed(fn)(x) for x in items]
        return list(dask.compute(*tasks, scheduler="processes", num_workers=2))


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process and its reaped children (pool workers)."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def sklearn_job(corpus_dir: str, max_features: int) -> Job:
    """Load the texts now (untimed); the job fits on train and transforms train and test."""
    corpus = Corpus(corpus_dir)
    train, test = read_texts(corpus, "train"), read_texts(corpus, "test")

    def job() -> tuple[dict, int, int]:
        t0 = time.perf_counter()
        vectorizer = sklearn_vectorizer(max_features)
        X_train = vectorizer.fit_transform(train)
        t1 = time.perf_counter()
        X_test = vectorizer.transform(test)
        times = {"fit_transform_train": t1 - t0, "transform_test": time.perf_counter() - t1}
        return times, len(vectorizer.vocabulary_), X_train.nnz + X_test.nnz

    return job


def xmc_job(corpus_dir: str, max_features: int, variant: str) -> Job:
    """Our stages; opening the corpus and reading partitions are part of the job."""

    def job() -> tuple[dict, int, int]:
        corpus, tfidf = Corpus(corpus_dir), tfidf_config(max_features)
        if variant == "xmc-2proc":
            with ProcessPoolExecutor(2) as pool:
                out = xmc_featurize(corpus, tfidf, pool.map)
        else:
            out = xmc_featurize(corpus, tfidf, dask_map if variant.endswith("dask") else map)
        return out["stages_s"], out["vectorizer"].n_features, sum(x.nnz for x in out["X"])

    return job


def child_main(variant: str, corpus_dir: str, max_features: int) -> None:
    """Entry point of one timed subprocess: prints one JSON line."""
    if variant == "sklearn":
        job = sklearn_job(corpus_dir, max_features)
    else:
        job = xmc_job(corpus_dir, max_features, variant)
    rss0, cpu0, t0 = psutil.Process().memory_info().rss, _cpu_s(), time.perf_counter()
    stages_s, n_features, nnz = job()
    wall, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    result = {"wall_s": wall, "cpu_s": cpu, "rss_at_start_mb": rss0 / 2**20, "stages_s": stages_s}
    print(json.dumps(result | {"n_features": n_features, "nnz": int(nnz)}))


# ---------------------------------------------------------------- the parent: measure subprocesses
def tree_memory(tree: list[psutil.Process]) -> tuple[int, int]:
    """Sums of RSS and of PSS (shared pages split between sharers) of ``tree``, in bytes;
    processes that vanish while sampled count 0."""
    rss = pss = 0
    for p in tree:
        try:
            mem = p.memory_full_info()
        except psutil.Error:
            continue
        rss, pss = rss + mem.rss, pss + mem.pss
    return rss, pss


def measure(variant: str, corpus_dir: Path, max_features: int) -> dict[str, Any]:
    """Run one variant in a fresh subprocess: its own timing plus the tree's peak memory.

    Memory is sampled every SAMPLE_S; the process list (the costly part) every 5 samples.
    """
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", variant]
    cmd += ["--corpus", str(corpus_dir), "--max-features", str(max_features)]
    load_1min, peak_rss, peak_pss, n = os.getloadavg()[0], 0, 0, 0
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO) as child:
        proc, tree = psutil.Process(child.pid), []
        while child.poll() is None:
            tree = bench_common.process_tree(proc) if n % 5 == 0 else tree
            rss, pss = tree_memory(tree)
            peak_rss, peak_pss, n = max(peak_rss, rss), max(peak_pss, pss), n + 1
            time.sleep(SAMPLE_S)
        stdout = child.stdout.read() if child.stdout else ""
    if child.returncode != 0:
        raise RuntimeError(f"{variant} on {corpus_dir} failed with exit code {child.returncode}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result |= {"peak_rss_mb": peak_rss / 2**20, "peak_pss_mb": peak_pss / 2**20}
    return result | {"load_avg_1min_before": load_1min}


def bench_dataset(corpus_dir: Path, max_features: int, repeats: int) -> dict[str, Any]:
    """Every variant ``repeats`` times, interleaved; median / min wall time, max peak RSS."""
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for _ in range(repeats):
        for variant in VARIANTS:
            runs[variant].append(measure(variant, corpus_dir, max_features))
    summary = {}
    for variant, rs in runs.items():
        walls = [r["wall_s"] for r in rs]
        stage_names = rs[0]["stages_s"]
        summary[variant] = {
            "wall_s_median": statistics.median(walls),
            "wall_s_min": min(walls),
            "peak_rss_mb_max": max(r["peak_rss_mb"] for r in rs),
            "peak_pss_mb_max": max(r["peak_pss_mb"] for r in rs),
            "stages_s_median": {
                s: statistics.median(r["stages_s"][s] for r in rs) for s in stage_names
            },
            "runs": rs,
        }
    base = summary["sklearn"]["wall_s_median"]
    for variant in VARIANTS:
        summary[variant]["ratio_to_sklearn_median"] = summary[variant]["wall_s_median"] / base
    return summary


# ---------------------------------------------------------------- equivalence (untimed)
def max_abs_diff(A: sp.spmatrix, B: sp.spmatrix) -> float:
    """max |A - B| over all entries (0.0 for identical matrices)."""
    D = (sp.csr_matrix(A, dtype=np.float64) - sp.csr_matrix(B, dtype=np.float64)).tocsr()
    return float(np.abs(D.data).max()) if D.nnz else 0.0


def compare(ours: dict[str, Any], vocab: list[str], X_train: Any, X_test: Any) -> dict:
    """Vocabulary equality and max |difference| of train and test matrices (same columns)."""
    ours_vocab = ours["vectorizer"].vocabulary_.to_pylist()
    n = ours["n_train_parts"]
    out: dict[str, Any] = {"vocab_equal": ours_vocab == vocab, "n_features": len(ours_vocab)}
    if out["vocab_equal"]:
        diff = max(
            max_abs_diff(sp.vstack(ours["X"][:n]), X_train),
            max_abs_diff(sp.vstack(ours["X"][n:]), X_test),
        )
        out.update(max_abs_diff=diff, matrices_equal=diff <= TOLERANCE)
    else:
        mine, theirs = set(ours_vocab), set(vocab)
        out["only_ours_examples"] = sorted(mine - theirs)[:20]
        out["only_sklearn_examples"] = sorted(theirs - mine)[:20]
        out.update(n_only_ours=len(mine - theirs), n_only_sklearn=len(theirs - mine))
        out.update(max_abs_diff=None, matrices_equal=False)
    return out


def tie_check(train: list[str], ours_vocab: list[str], sk_vocab: list[str], M: int) -> dict:
    """Do the max_features vocabularies differ only in terms tied at the cut-off frequency?

    The corpus term frequency comes from sklearn's own ``CountVectorizer`` on the train texts;
    with min_df=1 and max_df=1.0 every term is a candidate for the top ``M``.
    """
    counter = CountVectorizer(ngram_range=(1, 2), dtype=np.float64)
    tf_all = np.asarray(counter.fit_transform(train).sum(axis=0)).ravel()
    tf = dict(zip(counter.get_feature_names_out().tolist(), tf_all.tolist(), strict=True))
    cutoff = float(-np.partition(-tf_all, M - 1)[M - 1]) if len(tf_all) > M else 0.0
    sym = set(ours_vocab) ^ set(sk_vocab)
    return {
        "n_candidates": len(tf_all),
        "cutoff_tf": cutoff,
        "n_terms_at_cutoff_tf": int((tf_all == cutoff).sum()),
        "n_kept_at_cutoff_tf": int(sum(tf[t] == cutoff for t in ours_vocab)),
        "symmetric_difference": len(sym),
        "symmetric_difference_examples": sorted(sym)[:10],
        "only_ties_differ": all(tf.get(t) == cutoff for t in sym),
        "sizes_equal": len(ours_vocab) == len(sk_vocab) == min(M, len(tf_all)),
    }


def check_equivalence(corpus_dir: Path, M: int) -> dict[str, Any]:
    """(1) max_features=None: same vocabulary, matrices equal; (2) max_features=M: vocabularies
    differ only by cut-off ties, and our matrices equal sklearn's fitted on our vocabulary."""
    corpus = Corpus(corpus_dir)
    train, test = read_texts(corpus, "train"), read_texts(corpus, "test")
    sk = sklearn_vectorizer(None)
    sk_train = sk.fit_transform(train)
    full = compare(
        xmc_featurize(corpus, tfidf_config(None), map),
        sk.get_feature_names_out().tolist(),
        sk_train,
        sk.transform(test),
    )
    del sk, sk_train
    ours = xmc_featurize(corpus, tfidf_config(M), map)
    ours_vocab = ours["vectorizer"].vocabulary_.to_pylist()
    sk_vocab = sorted(sklearn_vectorizer(M).fit(train).vocabulary_)
    ties = tie_check(train, ours_vocab, sk_vocab, M)
    fixed = sklearn_vectorizer(None, vocabulary=ours_vocab)
    limited = compare(ours, ours_vocab, fixed.fit_transform(train), fixed.transform(test))
    limited.update(ties)
    limited["vocab_equal"] = ours_vocab == sk_vocab  # compare() saw our vocabulary on both sides
    limited["ok"] = limited["only_ties_differ"] and limited["sizes_equal"]
    limited["ok"] = limited["ok"] and limited["matrices_equal"]
    full["ok"] = full["vocab_equal"] and full["matrices_equal"]
    return {"max_features_none": full, "max_features_M": limited}


# ---------------------------------------------------------------- dataset, machine, report
def prepare(src: Path, dest: Path) -> dict[str, Any]:
    """Ingest ``src`` (lines format) into ``dest``; dataset statistics."""
    options = IngestOptions(policies=Policies(on_unlabeled="keep", on_empty="drop"))
    manifest = ingest("lines", src, dest, options)
    corpus = Corpus(dest)
    stats: dict[str, Any] = {"source": str(src), "rows_per_group": options.rows_per_group}
    for split, s in manifest.splits.items():
        texts = read_texts(corpus, split)
        stats[split] = {
            "docs": s.rows,
            "dropped_empty": s.dropped_empty,
            "kept_unlabeled": s.kept_unlabeled,
            "partitions": len(corpus.partitions(split)),
            "text_mb": sum(len(t.encode()) for t in texts) / 2**20,
        }
    return stats


def machine_info() -> dict[str, Any]:
    """Where and with what the benchmark ran."""
    libs = ["numpy", "scipy", "pyarrow", "scikit-learn", "dask", "psutil", "xmc"]
    return bench_common.machine_basics() | {
        "python": platform.python_version(), **{f"{lib}_version": version(lib) for lib in libs},
    }  # fmt: skip


def markdown(name: str, result: dict[str, Any], max_features: int) -> str:
    """One dataset's table plus its equivalence lines."""
    lines = [f"### {name}", "", TABLE_HEAD]
    for variant, r in result["variants"].items():
        stage_text = ", ".join(f"{k} {v:.2f}" for k, v in r["stages_s_median"].items())
        lines.append(
            f"| {variant} | {r['wall_s_median']:.2f} | {r['wall_s_min']:.2f} | "
            f"{r['ratio_to_sklearn_median']:.2f}x | {r['peak_rss_mb_max']:.0f} | "
            f"{r['peak_pss_mb_max']:.0f} | {stage_text} |"
        )
    full, lim = result["equivalence"]["max_features_none"], result["equivalence"]["max_features_M"]
    lines += [
        "",
        "- max_features=None: vocabulary equal {vocab_equal} ({n_features} terms), "
        "max |diff| {max_abs_diff}".format_map(full),
        f"- max_features={max_features} "
        + "({n_candidates} candidates): vocabulary equal {vocab_equal}, {symmetric_difference} "
        "terms differ, all tied at the cut-off tf {cutoff_tf:g}: {only_ties_differ} "
        "({n_terms_at_cutoff_tf} terms at that tf, {n_kept_at_cutoff_tf} kept); vs sklearn "
        "fitted on our vocabulary: max |diff| {max_abs_diff}".format_map(lim),
        "",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line (``--child``/``--corpus`` are internal: one timed run)."""
    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--datasets-root", type=Path, default=REPO.parent / "shared" / "datasets")
    p.add_argument("--datasets", default=DATASETS, help="comma-separated folder names")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-features", type=int, default=200_000)
    p.add_argument("--out", type=Path, default=REPO / f"benchmarks/results/featurize-{today}.json")
    p.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    p.add_argument("--corpus", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main() -> int:
    """Benchmark every dataset, write the JSON, print Markdown; 1 if an equivalence check fails."""
    args = parse_args()
    if args.child:
        child_main(args.child, args.corpus, args.max_features)
        return 0
    settings = {
        "max_features": args.max_features,
        "repeats": args.repeats,
        "variants": VARIANTS,
        "tokenizer": tokenizer_config().model_dump(),
        "tfidf": tfidf_config(args.max_features).model_dump(),
        "sklearn": {k: str(v) for k, v in SKLEARN.items()},
    }
    report: dict[str, Any] = {
        "command": shlex.join(["python", *sys.argv]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "settings": settings,
        "load_average_start": os.getloadavg(),
        "datasets": {},
    }
    with tempfile.TemporaryDirectory(prefix="xmc-bench-") as tmp:
        for name in args.datasets.split(","):
            corpus_dir = Path(tmp) / name
            result = {"stats": prepare(args.datasets_root / name, corpus_dir)}
            result["equivalence"] = check_equivalence(corpus_dir, args.max_features)
            result["variants"] = bench_dataset(corpus_dir, args.max_features, args.repeats)
            report["datasets"][name] = result
            print(markdown(name, result, args.max_features), flush=True)
    report["load_average_end"] = os.getloadavg()
    ok = all(
        check["ok"] for r in report["datasets"].values() for check in r["equivalence"].values()
    )
    report["all_equivalence_checks_ok"] = ok
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"wrote {args.out}; all equivalence checks ok: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
