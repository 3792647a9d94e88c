"""``xc`` corpora (Extreme Classification Repository sparse format) as hypothesis strategies.

A valid corpus (headers ``N D L``, rows of label ids and ``index:value`` pairs, maybe a
label_map.txt with odd names) is broken by row and header mutations; a mutation that makes a
row invalid says so (``XcRow.bad``), so the model need not parse the row again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from tests.reliability.fuzz_corpora import ODD_LABELS
from xmc_core.corpus.schema import SPLITS, Policies


@dataclass
class XcRow:
    """One data row of an ``xc`` file; ``bad`` says a mutation made it invalid."""

    labels: list[int]
    features: list[tuple[int, float]]
    label_field: str | None = None  # raw label field, overriding ``labels``
    feature_tokens: list[str] | None = None  # raw tokens, overriding ``features``
    bad_labels: bool = False
    bad_features: bool = False

    @property
    def bad(self) -> bool:
        """Whether a mutation made the label field or a feature pair invalid."""
        return self.bad_labels or self.bad_features


@dataclass
class XcCorpus:
    """An ``xc`` corpus: headers ``N D L`` per split, rows and an optional label map."""

    n_features: int
    n_labels: int
    splits: dict[str, list[XcRow]]
    policies: Policies
    headers: dict[str, str] = field(default_factory=dict)  # raw header overrides
    names: list[str] | None = None  # label_map.txt names by id (None: no label map)
    crlf: bool = False


@st.composite
def xc_corpora(draw: st.DrawFn, mutate: bool = True) -> XcCorpus:
    """A valid ``xc`` corpus (maybe with a label map), then up to 3 broken rows or headers."""
    d = draw(st.sampled_from([1, 3, 20, 1000, 2**31]))
    n_labels = draw(st.integers(1, 12))
    value = st.floats(width=32, allow_nan=False, allow_infinity=False)

    def row() -> XcRow:
        ids = draw(st.lists(st.integers(0, min(d, 50) - 1), min_size=1, max_size=5, unique=True))
        if d == 2**31 and draw(st.booleans()):
            ids[0] = d - 1
        labels = draw(st.lists(st.integers(0, n_labels - 1), min_size=1, max_size=3))
        return XcRow(labels, [(i, draw(value)) for i in ids])

    splits = {
        s: [row() for _ in range(draw(st.integers(1, n)))] for s, n in (("train", 5), ("test", 3))
    }
    names = None
    if draw(st.booleans()):
        odd = [lab for lab in ODD_LABELS if lab.strip() and "\t" not in lab]
        names = [f"{draw(st.sampled_from(odd))} {i}" for i in range(n_labels)]
    corpus = XcCorpus(
        d,
        n_labels,
        splits,
        Policies(
            on_empty=draw(st.sampled_from(["error", "drop"])),
            on_unlabeled=draw(st.sampled_from(["error", "drop", "keep"])),
        ),
        names=names,
        crlf=draw(st.booleans()),
    )
    if mutate:
        _mutate_xc(draw, corpus)
    return corpus


XC_MUTATIONS = [
    "feature", "label", "dup", "no_features", "no_labels", "blank", "n", "d", "header", "huge",
]  # fmt: skip


def _mutate_xc(draw: st.DrawFn, corpus: XcCorpus) -> None:
    d, n_labels = corpus.n_features, corpus.n_labels
    bad_features = [
        f"{d}:1", f"{d + 7}:1", "-1:1", "0:nan", "0:inf", "0:-inf", "0:1e39", "0:-3.5e38", "5",
        "a:1", "0:x", ":", "0:", "1" * 5000 + ":1", "0:1:2",
    ]  # fmt: skip
    bad_labels = [str(n_labels), "-1", "x", "1.5", "0,,0", "0,", "9" * 5000, "0;1"]
    for _ in range(draw(st.integers(0, 3))):
        split = draw(st.sampled_from(SPLITS))
        rows = corpus.splits[split]
        i = draw(st.integers(0, len(rows) - 1))
        what = draw(st.sampled_from(XC_MUTATIONS))
        r = rows[i]
        if what == "feature":
            r.feature_tokens = [*_tokens(r), draw(st.sampled_from(bad_features))]
            r.bad_features = True
        elif what == "label":
            r.label_field = draw(st.sampled_from(bad_labels))
            r.bad_labels = True
        elif what == "dup" and _tokens(r):
            r.feature_tokens = [*_tokens(r), _tokens(r)[0]]
            r.bad_features = True
        elif what == "no_features":
            r.features, r.feature_tokens, r.bad_features = [], None, False
        elif what == "no_labels":
            r.labels, r.label_field, r.bad_labels = [], None, False
        elif what == "blank":
            rows.insert(i, XcRow([], [], label_field=""))
        elif what == "n":
            n = len(rows) + draw(st.sampled_from([-1, 1, 5]))
            corpus.headers[split] = f"{n} {d} {n_labels}"
        elif what == "d":
            wide = draw(st.sampled_from([d + 1, 2**31 + 1]))
            corpus.headers[split] = f"{len(rows)} {wide} {n_labels}"
        elif what == "header":
            corpus.headers[split] = draw(
                st.sampled_from(["", "3 4", "a b c", "1 0 1", "-1 2 2", "1 2 3 4"])
            )
        elif what == "huge" and d >= 2**31:
            r.features = [(i, 0.5) for i in range(100_000)]
            r.feature_tokens, r.bad_features = None, False


def _tokens(r: XcRow) -> list[str]:
    if r.feature_tokens is not None:
        return r.feature_tokens
    return [f"{i}:{v!r}" for i, v in r.features]


def xc_line(r: XcRow) -> str:
    """The text of one data row (without line ending)."""
    field_ = r.label_field if r.label_field is not None else ",".join(map(str, r.labels))
    return f"{field_} {' '.join(_tokens(r))}"


def xc_header(corpus: XcCorpus, split: str) -> str:
    default = f"{len(corpus.splits[split])} {corpus.n_features} {corpus.n_labels}"
    return corpus.headers.get(split, default)


def encode_xc(corpus: XcCorpus) -> dict[str, bytes]:
    """``train.txt``, ``test.txt`` and (maybe) ``label_map.txt``."""
    end = "\r\n" if corpus.crlf else "\n"
    files = {}
    for split in SPLITS:
        lines = [xc_header(corpus, split)] + [xc_line(r) for r in corpus.splits[split]]
        files[f"{split}.txt"] = "".join(line + end for line in lines).encode()
    if corpus.names is not None:
        lines = [f"{i}\t{name}\t1" for i, name in enumerate(corpus.names)]
        files["label_map.txt"] = "".join(line + end for line in lines).encode()
    return files
