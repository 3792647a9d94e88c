"""Deterministic synthetic multi-label text corpus (the embedded default dataset).

The corpus imitates an extreme multi-label dataset with a label hierarchy::

    domain (d00..)  ->  topic (dXX/t00..)  ->  label (dXX/tYY/l0000..)

Every level owns a set of pronounceable pseudo-words (built from syllables, lowercase ASCII,
never shared between levels), plus one pool of background noise words. A label's word
distribution mixes its own words, a few words borrowed from a sibling label, its topic's words
and its domain's words. A document picks a primary label from a Zipf-like popularity, more
labels from the same topic and sometimes from a second topic, then draws its words from the
chosen labels' distributions (weighted by a per-document salience), an untagged "distractor"
label of the same topic and noise words. The text is rendered as sentences with occasional
capitals and punctuation.

Everything is derived from ``numpy.random.Generator`` objects seeded from ``(seed, stream)``, so
the same ``SyntheticSpec`` gives byte-identical output in every process. Documents are streamed
one at a time: memory is constant in the number of documents.
"""

import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from xmc_core.corpus.synthetic_words import make_words

_MARKS = ("", ",", ".", "?", "!")
_END_MARK_CDF = np.cumsum([0.0, 0.0, 0.86, 0.08, 0.06])[:-1]
_STREAMS = {"world": 0, "train": 1, "test": 2}
_LABEL_TEXT_OWN_WORDS = 4


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

    def __post_init__(self) -> None:
        positive = ("n_domains", "topics_per_domain", "labels_per_topic", "label_words")
        positive += ("max_labels_per_doc", "min_doc_words", "noise_words")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"SyntheticSpec.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("n_train", "n_test", "seed", "domain_words", "topic_words", "sibling_words"):
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

    @property
    def n_topics(self) -> int:
        """Total number of topics."""
        return self.n_domains * self.topics_per_domain

    @property
    def n_labels(self) -> int:
        """Total number of labels."""
        return self.n_topics * self.labels_per_topic

    def scaled(self, scale: float) -> "SyntheticSpec":
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


@dataclass(frozen=True)
class SyntheticDoc:
    """One document: ``labels`` are distinct label names, sorted."""

    doc_id: str
    text: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class _World:
    """The generative model of a spec (everything except the documents).

    ``vocab``: (n_words,) words; ``label_cdf``: (n_labels,) cumulative label popularity;
    ``label_popularity``: (n_labels,); ``topic_popularity``: (n_topics,);
    ``word_ids``: (n_labels, k) each label's word ids, drawn with cumulative probabilities
    ``word_cdf``: (k,); noise words are ids ``0..noise_words-1``, drawn with ``noise_cdf``.
    """

    vocab: tuple[str, ...]
    capitalized: tuple[str, ...]
    names: tuple[str, ...]
    label_texts: tuple[str, ...]
    label_cdf: np.ndarray
    label_popularity: np.ndarray
    topic_popularity: np.ndarray
    word_ids: np.ndarray
    word_cdf: np.ndarray
    noise_cdf: np.ndarray


def _rng(spec: SyntheticSpec, stream: str) -> np.random.Generator:
    """Independent generator for ``(seed, stream)``; never depends on ``hash()``."""
    seed_sequence = np.random.SeedSequence([spec.seed, _STREAMS[stream]])
    return np.random.Generator(np.random.PCG64(seed_sequence))


def _cdf(weights: np.ndarray) -> np.ndarray:
    """Cumulative distribution of non-negative ``weights`` (last axis), ending exactly at 1."""
    cdf = np.cumsum(weights, axis=-1)
    cdf /= cdf[..., -1:]
    cdf[..., -1] = 1.0
    return cdf


def _zipf(n: int, exponent: float) -> np.ndarray:
    """Weights ``1 / (rank + 1) ** exponent`` for ranks 0..n-1, shape (n,)."""
    return 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent


def _label_names(spec: SyntheticSpec) -> tuple[str, ...]:
    """Names ``dDD/tTT/lLLLL`` (topic index within its domain, label index global)."""
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
    weights = _zipf(n, 0.7)
    return share * weights / weights.sum() if n else weights


def _label_distributions(
    spec: SyntheticSpec,
    rng: np.random.Generator,
    own: np.ndarray,
    topic: np.ndarray,
    domain: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-label word ids (n_labels, k) and their cumulative probabilities (k,), shared by all.

    ``own``: (n_labels, label_words), ``topic``: (n_topics, topic_words) and
    ``domain``: (n_domains, domain_words) word ids.
    """
    n_labels, per_topic = spec.n_labels, spec.labels_per_topic
    labels = np.arange(n_labels)
    sibling = (labels // per_topic) * per_topic + (labels % per_topic + 1) % per_topic
    n_borrow = min(spec.sibling_words, spec.label_words)
    borrow_at = np.argsort(rng.random((n_labels, spec.label_words)), axis=1)[:, :n_borrow]
    borrowed = np.take_along_axis(own[sibling], borrow_at, axis=1)
    label_topic = labels // per_topic
    ids = np.concatenate(
        [own, borrowed, topic[label_topic], domain[label_topic // spec.topics_per_domain]], axis=1
    )
    own_w = _zipf(spec.label_words, 0.7)
    label_w = np.concatenate([own_w, np.full(n_borrow, 0.35 * own_w.mean())])
    label_w *= spec.label_share / label_w.sum()
    weights = np.concatenate(
        [
            label_w,
            _group_weights(spec.topic_words, spec.topic_share),
            _group_weights(spec.domain_words, spec.domain_share),
        ]
    )
    return ids.astype(np.int64), _cdf(weights)


@functools.lru_cache(maxsize=4)
def _build_world(spec: SyntheticSpec) -> _World:
    """Vocabulary, label popularity and word distributions of ``spec`` (cached per spec)."""
    rng = _rng(spec, "world")
    seen: set[str] = set()
    noise = sorted(make_words(rng, spec.noise_words, (1, 2), seen), key=len)
    domain = make_words(rng, spec.n_domains * spec.domain_words, (2, 3), seen)
    topic = make_words(rng, spec.n_topics * spec.topic_words, (2, 3), seen)
    own = make_words(rng, spec.n_labels * spec.label_words, (2, 3), seen)
    vocab = tuple(noise + domain + topic + own)
    start = np.cumsum([0, len(noise), len(domain), len(topic)])
    domain_ids = (start[1] + np.arange(len(domain))).reshape(spec.n_domains, spec.domain_words)
    topic_ids = (start[2] + np.arange(len(topic))).reshape(spec.n_topics, spec.topic_words)
    own_ids = (start[3] + np.arange(len(own))).reshape(spec.n_labels, spec.label_words)
    popularity = _zipf(spec.n_labels, spec.zipf_exponent)[rng.permutation(spec.n_labels)]
    word_ids, word_cdf = _label_distributions(spec, rng, own_ids, topic_ids, domain_ids)
    texts = []
    for label in range(spec.n_labels):
        ids = list(own_ids[label, :_LABEL_TEXT_OWN_WORDS])
        topic_index = label // spec.labels_per_topic
        ids += list(topic_ids[topic_index, :1])
        ids += list(domain_ids[topic_index // spec.topics_per_domain, :1])
        texts.append(" ".join(vocab[i] for i in ids))
    return _World(
        vocab=vocab,
        capitalized=tuple(word.capitalize() for word in vocab),
        names=_label_names(spec),
        label_texts=tuple(texts),
        label_cdf=_cdf(popularity),
        label_popularity=popularity,
        topic_popularity=popularity.reshape(spec.n_topics, -1).sum(axis=1),
        word_ids=word_ids,
        word_cdf=word_cdf,
        noise_cdf=_cdf(_zipf(len(noise), 1.0)),
    )


def _weighted_sample(
    rng: np.random.Generator, items: np.ndarray, weights: np.ndarray, k: int
) -> np.ndarray:
    """``k`` distinct ``items`` drawn without replacement with probability ~ ``weights``."""
    keys = rng.exponential(size=len(items)) / weights
    return items[np.argsort(keys, kind="stable")[:k]]


def _other_topic(spec: SyntheticSpec, world: _World, rng: np.random.Generator, topic: int) -> int:
    """A second topic: from the same domain with ``same_domain_prob``, else from any domain."""
    per_domain = spec.topics_per_domain
    if per_domain > 1 and rng.random() < spec.same_domain_prob:
        first = (topic // per_domain) * per_domain
        candidates = np.arange(first, first + per_domain)
    else:
        candidates = np.arange(spec.n_topics)
    candidates = candidates[candidates != topic]
    picked = _weighted_sample(rng, candidates, world.topic_popularity[candidates], 1)
    return int(picked[0])


def _sample_labels(spec: SyntheticSpec, world: _World, rng: np.random.Generator) -> np.ndarray:
    """Distinct label ids of one doc: a Zipf-drawn primary label, siblings, maybe a 2nd topic."""
    per_topic = spec.labels_per_topic
    n_wanted = min(spec.max_labels_per_doc, 1 + int(rng.poisson(spec.mean_labels_per_doc - 1)))
    primary = int(np.searchsorted(world.label_cdf, rng.random(), side="right"))
    topic = primary // per_topic
    chosen = [np.array([primary])]
    if spec.n_topics > 1 and rng.random() < spec.second_topic_prob:
        other = _other_topic(spec, world, rng, topic)
        n_other = min(per_topic, max(1, int(rng.binomial(n_wanted - 1, 0.4))))
        items = np.arange(other * per_topic, (other + 1) * per_topic)
        chosen.append(_weighted_sample(rng, items, world.label_popularity[items], n_other))
        n_wanted = max(n_wanted, n_other + 1)
    n_same = min(n_wanted - sum(len(c) for c in chosen), per_topic - 1)
    if n_same > 0:
        items = np.arange(topic * per_topic, (topic + 1) * per_topic)
        items = items[items != primary]
        chosen.append(_weighted_sample(rng, items, world.label_popularity[items], n_same))
    return np.concatenate(chosen)


def _sample_word_ids(
    spec: SyntheticSpec, world: _World, rng: np.random.Generator, labels: np.ndarray
) -> np.ndarray:
    """Shuffled word ids of one document.

    Noise words, words of its ``labels`` (spread by a Dirichlet salience) and words of a
    distractor: a label of the primary topic drawn uniformly, usually not among ``labels``.
    """
    length = rng.lognormal(np.log(spec.median_doc_words), spec.doc_words_sigma)
    n_words = min(max(round(length), spec.min_doc_words), spec.max_doc_words)
    concentration = 12.0
    noise_share = rng.beta(
        spec.noise_fraction * concentration + 1e-9, (1 - spec.noise_fraction) * concentration
    )
    n_noise = int(rng.binomial(n_words, noise_share))
    n_content = n_words - n_noise
    n_distractor = int(rng.binomial(n_content, spec.distractor_fraction))
    distractor = (labels[0] // spec.labels_per_topic) * spec.labels_per_topic
    distractor += int(rng.integers(spec.labels_per_topic))
    salience = rng.dirichlet(np.full(len(labels), spec.label_salience_alpha))
    tagged = np.repeat(labels, rng.multinomial(n_content - n_distractor, salience))
    owners = np.concatenate([tagged, np.full(n_distractor, distractor)])
    picks = np.searchsorted(world.word_cdf, rng.random(len(owners)), side="right")
    noise = np.searchsorted(world.noise_cdf, rng.random(n_noise), side="right")
    return rng.permutation(np.concatenate([noise, world.word_ids[owners, picks]]))


def _render(
    rng: np.random.Generator, world: _World, word_ids: np.ndarray, punctuation: bool
) -> str:
    """Text of ``word_ids`` (n,): sentences of 6-18 words, capitals, commas and end marks."""
    if not punctuation:
        return " ".join([world.vocab[w] for w in word_ids.tolist()])
    n = len(word_ids)
    bounds = np.cumsum(rng.integers(6, 19, size=n // 6 + 1))
    bounds = bounds[bounds < n]
    capital = rng.random(n) < 0.01
    capital[0] = True
    capital[bounds] = True
    marks = (rng.random(n) < 0.05).astype(np.int64)
    ends = np.append(bounds - 1, n - 1)
    marks[ends] = np.searchsorted(_END_MARK_CDF, rng.random(len(ends)), side="right")
    words = [
        (world.capitalized[w] if cap else world.vocab[w]) + _MARKS[m]
        for w, cap, m in zip(word_ids.tolist(), capital.tolist(), marks.tolist(), strict=True)
    ]
    return " ".join(words)


def generate_split(spec: SyntheticSpec, split: str) -> Iterator[SyntheticDoc]:
    """Stream the ``split`` ("train" or "test") documents of ``spec``, lazily and deterministically.

    Doc ids are ``f"{split}-{i:06d}"``. Train and test use independent random streams drawn
    from the same distribution; the same spec always yields identical documents.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    world = _build_world(spec)
    rng = _rng(spec, split)
    n_docs = spec.n_train if split == "train" else spec.n_test
    for i in range(n_docs):
        labels = _sample_labels(spec, world, rng)
        word_ids = _sample_word_ids(spec, world, rng, labels)
        text = _render(rng, world, word_ids, spec.punctuation)
        names = tuple(sorted(world.names[label] for label in labels))
        yield SyntheticDoc(doc_id=f"{split}-{i:06d}", text=text, labels=names)


def label_names(spec: SyntheticSpec) -> tuple[str, ...]:
    """All label names of ``spec`` in label-id order, shape (n_labels,)."""
    return _build_world(spec).names


def label_texts(spec: SyntheticSpec) -> dict[str, str]:
    """Label name -> short text: its 4 top own words, its topic's and its domain's top word."""
    world = _build_world(spec)
    return dict(zip(world.names, world.label_texts, strict=True))
