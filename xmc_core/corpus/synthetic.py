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
one at a time: memory is constant in the number of documents. A spec with ``vectorized=True``
(``SyntheticSpec.sized``, up to millions of labels and documents) is drawn from the same model a
batch of documents at a time, by :mod:`xmc_core.corpus.synthetic_batch`.
"""

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from xmc_core.corpus import synthetic_batch
from xmc_core.corpus.synthetic_spec import (
    END_MARK_CDF,
    LABEL_TEXT_OWN_WORDS,
    MARKS,
    SyntheticDoc,
    SyntheticSpec,
    cdf,
    label_name_list,
    label_word_table,
    make_vocabulary,
    spec_rng,
    word_cdf,
    zipf,
)

__all__ = ["SyntheticDoc", "SyntheticSpec", "generate_split", "label_names", "label_texts"]


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


@functools.lru_cache(maxsize=4)
def _build_world(spec: SyntheticSpec) -> _World:
    """Vocabulary, label popularity and word distributions of ``spec`` (cached per spec)."""
    rng = spec_rng(spec, "world")
    vocabulary = make_vocabulary(spec, rng)
    vocab = tuple(vocabulary.words)
    domain_ids, topic_ids, own_ids = (
        vocabulary.domain_ids,
        vocabulary.topic_ids,
        vocabulary.own_ids,
    )
    popularity = zipf(spec.n_labels, spec.zipf_exponent)[rng.permutation(spec.n_labels)]
    label_topic = np.arange(spec.n_labels) // spec.labels_per_topic
    word_ids = np.concatenate(
        [
            label_word_table(spec, rng, own_ids),
            topic_ids[label_topic],
            domain_ids[label_topic // spec.topics_per_domain],
        ],
        axis=1,
    )
    texts = []
    for label in range(spec.n_labels):
        ids = list(own_ids[label, :LABEL_TEXT_OWN_WORDS])
        topic_index = label // spec.labels_per_topic
        ids += list(topic_ids[topic_index, :1])
        ids += list(domain_ids[topic_index // spec.topics_per_domain, :1])
        texts.append(" ".join(vocab[i] for i in ids))
    return _World(
        vocab=vocab,
        capitalized=tuple(word.capitalize() for word in vocab),
        names=label_name_list(spec),
        label_texts=tuple(texts),
        label_cdf=cdf(popularity),
        label_popularity=popularity,
        topic_popularity=popularity.reshape(spec.n_topics, -1).sum(axis=1),
        word_ids=word_ids.astype(np.int64),
        word_cdf=word_cdf(spec),
        noise_cdf=cdf(zipf(vocabulary.n_noise, 1.0)),
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
    marks[ends] = np.searchsorted(END_MARK_CDF, rng.random(len(ends)), side="right")
    words = [
        (world.capitalized[w] if cap else world.vocab[w]) + MARKS[m]
        for w, cap, m in zip(word_ids.tolist(), capital.tolist(), marks.tolist(), strict=True)
    ]
    return " ".join(words)


def generate_split(spec: SyntheticSpec, split: str) -> Iterator[SyntheticDoc]:
    """Stream the ``split`` ("train" or "test") documents of ``spec``, lazily and deterministically.

    Doc ids are ``f"{split}-{i:06d}"``. Train and test use independent random streams drawn
    from the same distribution; the same spec always yields identical documents. A
    ``vectorized`` spec is drawn by :mod:`xmc_core.corpus.synthetic_batch`.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if spec.vectorized:
        yield from synthetic_batch.generate_split(spec, split)
        return
    world = _build_world(spec)
    rng = spec_rng(spec, split)
    n_docs = spec.n_train if split == "train" else spec.n_test
    for i in range(n_docs):
        labels = _sample_labels(spec, world, rng)
        word_ids = _sample_word_ids(spec, world, rng, labels)
        text = _render(rng, world, word_ids, spec.punctuation)
        names = tuple(sorted(world.names[label] for label in labels))
        yield SyntheticDoc(doc_id=f"{split}-{i:06d}", text=text, labels=names)


def label_names(spec: SyntheticSpec) -> tuple[str, ...]:
    """All label names of ``spec`` in label-id order, shape (n_labels,)."""
    if spec.vectorized:
        return synthetic_batch.build_world(spec).names
    return _build_world(spec).names


def label_texts(spec: SyntheticSpec) -> dict[str, str]:
    """Label name -> short text: its 4 top own words, its topic's and its domain's top word."""
    world = synthetic_batch.build_world(spec) if spec.vectorized else _build_world(spec)
    return dict(zip(world.names, world.label_texts, strict=True))
