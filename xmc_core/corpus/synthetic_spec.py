"""The parameters of the synthetic corpus and what its two generators share.

``SyntheticSpec`` and ``SyntheticDoc`` are re-exported by :mod:`xmc_core.corpus.synthetic`; the
per-document generator lives there, the vectorized one (``vectorized=True``, for corpora of up to
millions of labels and documents) in :mod:`xmc_core.corpus.synthetic_batch`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from xmc_core.corpus.synthetic_words import make_words

_STREAMS = {"world": 0, "train": 1, "test": 2}
MARKS = ("", ",", ".", "?", "!")
"""Punctuation after a word: none, comma, then the three end marks."""
END_MARK_CDF = np.cumsum([0.0, 0.0, 0.86, 0.08, 0.06])[:-1]
"""Cumulative probabilities of :data:`MARKS` at a sentence's end (never none or a comma)."""
LABEL_TEXT_OWN_WORDS = 4
"""A label's text: its first this many own words, then its topic's and its domain's first."""


@dataclass(frozen=True)
class SyntheticSpec:
    """Parameters of a synthetic corpus; the defaults give ~6000/1500 docs and 960 labels.

    Sizes: ``n_domains * topics_per_domain`` topics, each with ``labels_per_topic`` labels.
    ``zipf_exponent`` shapes label popularity (``1 / rank**s``); ``mean_labels_per_doc`` is the
    approximate mean number of labels per document (at most ``max_labels_per_doc``).
    Document length is lognormal around ``median_doc_words`` (clipped to the min/max).
    ``noise_fraction`` is the mean share of background noise words in a document;
    ``distractor_fraction`` the share of its other words taken from an untagged label of the
    primary topic; ``label_salience_alpha`` the Dirichlet concentration spreading words over
    the document's labels (small: some labels barely show). The ``*_words`` fields are vocabulary
    sizes per node (``sibling_words`` are borrowed from a sibling label); ``label_share``,
    ``topic_share`` and ``domain_share`` weigh a label's own, topic and domain words.

    ``vectorized`` draws the documents a batch at a time with numpy (same model, its own random
    stream, about 10x faster, memory independent of the number of documents); the default
    per-document stream gives the same bytes as every earlier version. ``label_word_pool`` (only
    with ``vectorized``): when > 0, each label's ``label_words`` own words are drawn (uniformly,
    with replacement) from one shared pool of that many words instead of being its own, so the
    vocabulary stays bounded at a million labels and a label is told apart by its combination.
    """

    n_train: int = 6000
    n_test: int = 1500
    n_domains: int = 6
    topics_per_domain: int = 8
    labels_per_topic: int = 20
    seed: int = 0
    zipf_exponent: float = 1.0
    mean_labels_per_doc: float = 3.0
    max_labels_per_doc: int = 8
    second_topic_prob: float = 0.3
    same_domain_prob: float = 0.7
    median_doc_words: float = 75.0
    doc_words_sigma: float = 0.45
    min_doc_words: int = 12
    max_doc_words: int = 300
    noise_fraction: float = 0.6
    label_salience_alpha: float = 0.7
    distractor_fraction: float = 0.3
    domain_words: int = 40
    topic_words: int = 30
    label_words: int = 12
    sibling_words: int = 5
    noise_words: int = 2000
    label_share: float = 0.3
    topic_share: float = 0.45
    domain_share: float = 0.25
    punctuation: bool = True
    vectorized: bool = False
    label_word_pool: int = 0

    def __post_init__(self) -> None:
        positive = ("n_domains", "topics_per_domain", "labels_per_topic", "label_words")
        positive += ("max_labels_per_doc", "min_doc_words", "noise_words")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"SyntheticSpec.{name} must be >= 1, got {getattr(self, name)}")
        non_negative = ("n_train", "n_test", "seed", "domain_words", "topic_words")
        for name in (*non_negative, "sibling_words", "label_word_pool"):
            if getattr(self, name) < 0:
                raise ValueError(f"SyntheticSpec.{name} must be >= 0, got {getattr(self, name)}")
        if self.max_doc_words < self.min_doc_words:
            raise ValueError("SyntheticSpec.max_doc_words must be >= min_doc_words")
        if self.mean_labels_per_doc < 1.0:
            raise ValueError("SyntheticSpec.mean_labels_per_doc must be >= 1")
        for name in ("noise_fraction", "distractor_fraction", "second_topic_prob"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"SyntheticSpec.{name} must be in [0, 1)")
        if self.label_share <= 0 or self.topic_share < 0 or self.domain_share < 0:
            raise ValueError("SyntheticSpec shares must be >= 0 (label_share > 0)")
        if self.label_word_pool and not self.vectorized:
            raise ValueError("SyntheticSpec.label_word_pool needs vectorized=True")
        if 0 < self.label_word_pool < self.label_words:
            raise ValueError(
                f"SyntheticSpec.label_word_pool must be 0 or >= label_words ({self.label_words})"
            )

    @property
    def n_topics(self) -> int:
        """Total number of topics."""
        return self.n_domains * self.topics_per_domain

    @property
    def n_labels(self) -> int:
        """Total number of labels."""
        return self.n_topics * self.labels_per_topic

    def scaled(self, scale: float) -> SyntheticSpec:
        """Spec with ``scale`` times the documents and about ``sqrt(scale)`` times the labels.

        Topics per domain and labels per topic each grow by ``scale ** 0.25``; ``scale=1``
        returns an equal spec.
        """
        if not scale > 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        growth = scale**0.25
        return dataclasses.replace(
            self,
            n_train=max(1, round(self.n_train * scale)),
            n_test=max(1, round(self.n_test * scale)) if self.n_test else 0,
            topics_per_domain=max(1, round(self.topics_per_domain * growth)),
            labels_per_topic=max(1, round(self.labels_per_topic * growth)),
        )

    def sized(self, n_labels: int, n_train: int, n_test: int) -> SyntheticSpec:
        """Vectorized spec with about ``n_labels`` labels and exactly ``n_train``/``n_test`` docs.

        Topics keep ``labels_per_topic`` labels and domains ``topics_per_domain`` topics; the
        number of domains is ``n_labels / (labels_per_topic * topics_per_domain)``, rounded (at
        least 1), so the label count is a multiple of that product.
        """
        if n_labels < 1 or n_train < 1 or n_test < 0:
            raise ValueError(
                f"sized needs n_labels >= 1, n_train >= 1, n_test >= 0; got {n_labels}, "
                f"{n_train}, {n_test}"
            )
        per_domain = self.labels_per_topic * self.topics_per_domain
        return dataclasses.replace(
            self,
            n_train=n_train,
            n_test=n_test,
            n_domains=max(1, round(n_labels / per_domain)),
            vectorized=True,
        )


@dataclass(frozen=True)
class SyntheticDoc:
    """One document: ``labels`` are distinct label names, sorted."""

    doc_id: str
    text: str
    labels: tuple[str, ...]


def spec_rng(spec: SyntheticSpec, stream: str) -> np.random.Generator:
    """Independent generator for ``(seed, stream)``; never depends on ``hash()``."""
    seed_sequence = np.random.SeedSequence([spec.seed, _STREAMS[stream]])
    return np.random.Generator(np.random.PCG64(seed_sequence))


def cdf(weights: np.ndarray) -> np.ndarray:
    """Cumulative distribution of non-negative ``weights`` (last axis), ending exactly at 1."""
    out = np.cumsum(weights, axis=-1)
    out /= out[..., -1:]
    out[..., -1] = 1.0
    return out


def zipf(n: int, exponent: float) -> np.ndarray:
    """Weights ``1 / (rank + 1) ** exponent`` for ranks 0..n-1, shape (n,)."""
    return 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent


def label_name_list(spec: SyntheticSpec) -> tuple[str, ...]:
    """Names ``dDD/tTT/lLLLL`` (topic index within its domain, label index global).

    The widths are fixed per spec, so the names sort in label-id order.
    """
    wd = max(2, len(str(spec.n_domains - 1)))
    wt = max(2, len(str(spec.topics_per_domain - 1)))
    wl = max(4, len(str(spec.n_labels - 1)))
    names = []
    for label in range(spec.n_labels):
        topic = label // spec.labels_per_topic
        d, t = divmod(topic, spec.topics_per_domain)
        names.append(f"d{d:0{wd}d}/t{t:0{wt}d}/l{label:0{wl}d}")
    return tuple(names)


def _group_weights(n: int, share: float) -> np.ndarray:
    """Zipf-ish weights (exponent 0.7) over ``n`` words, summing to ``share``; shape (n,)."""
    weights = zipf(n, 0.7)
    return share * weights / weights.sum() if n else weights


@dataclass(frozen=True)
class Vocabulary:
    """The corpus's words (:func:`make_vocabulary`) and the ids of each group's."""

    words: list[str]  # noise words (shortest first), domains', topics', labels' own words
    n_noise: int
    domain_ids: np.ndarray  # (n_domains, domain_words) int32
    topic_ids: np.ndarray  # (n_topics, topic_words) int32
    own_ids: np.ndarray  # (n_labels, label_words) int32


def make_vocabulary(spec: SyntheticSpec, rng: np.random.Generator) -> Vocabulary:
    """Distinct words for noise, domains, topics and labels; a label's own words are its own,
    or drawn from a shared pool of ``spec.label_word_pool`` words when set."""
    seen: set[str] = set()
    noise = sorted(make_words(rng, spec.noise_words, (1, 2), seen), key=len)
    n_domain, n_topic = spec.n_domains * spec.domain_words, spec.n_topics * spec.topic_words
    words = noise + make_words(rng, n_domain, (2, 3), seen)
    words += make_words(rng, n_topic, (2, 3), seen)
    n_own = spec.label_word_pool or spec.n_labels * spec.label_words
    words += make_words(rng, n_own, (2, 3), seen)
    start = np.cumsum([0, len(noise), n_domain, n_topic])
    shape = (spec.n_labels, spec.label_words)
    if spec.label_word_pool:
        own_ids = start[3] + rng.integers(spec.label_word_pool, size=shape, dtype=np.int32)
    else:
        own_ids = start[3] + np.arange(shape[0] * shape[1], dtype=np.int32).reshape(shape)
    return Vocabulary(
        words=words,
        n_noise=len(noise),
        domain_ids=(start[1] + np.arange(n_domain, dtype=np.int32)).reshape(
            spec.n_domains, spec.domain_words
        ),
        topic_ids=(start[2] + np.arange(n_topic, dtype=np.int32)).reshape(
            spec.n_topics, spec.topic_words
        ),
        own_ids=own_ids.astype(np.int32, copy=False),
    )


def label_word_table(spec: SyntheticSpec, rng: np.random.Generator, own: np.ndarray) -> np.ndarray:
    """Each label's own words then ``sibling_words`` borrowed from its next sibling label.

    ``own``: (n_labels, label_words) word ids; returns (n_labels, label_words + n_borrow).
    """
    n_labels, per_topic = spec.n_labels, spec.labels_per_topic
    labels = np.arange(n_labels)
    sibling = (labels // per_topic) * per_topic + (labels % per_topic + 1) % per_topic
    n_borrow = min(spec.sibling_words, spec.label_words)
    borrow_at = np.argsort(rng.random((n_labels, spec.label_words)), axis=1)[:, :n_borrow]
    borrowed = np.take_along_axis(own[sibling], borrow_at, axis=1)
    return np.concatenate([own, borrowed], axis=1)


def word_cdf(spec: SyntheticSpec) -> np.ndarray:
    """Cumulative probabilities (k,) of a label's word columns, shared by every label: its
    ``label_words`` own and borrowed words, then ``topic_words``, then ``domain_words``."""
    n_borrow = min(spec.sibling_words, spec.label_words)
    own_w = zipf(spec.label_words, 0.7)
    label_w = np.concatenate([own_w, np.full(n_borrow, 0.35 * own_w.mean())])
    label_w *= spec.label_share / label_w.sum()
    weights = np.concatenate(
        [
            label_w,
            _group_weights(spec.topic_words, spec.topic_share),
            _group_weights(spec.domain_words, spec.domain_share),
        ]
    )
    return cdf(weights)
