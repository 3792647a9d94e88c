"""The synthetic corpus drawn a batch of documents at a time (``SyntheticSpec.vectorized``).

The generative model is the one of :mod:`xmc_core.corpus.synthetic` (label hierarchy, Zipf
popularity, same-topic and second-topic labels, Dirichlet salience, a distractor label, noise
words, sentences with capitals and punctuation); here every draw for ``BATCH_DOCS`` documents is
one numpy call, so a million documents take minutes, not hours, and memory is the world
(``O(n_labels)``) plus one batch. The random stream is its own: a vectorized spec gives other
documents than the same spec drawn per document, and changing ``BATCH_DOCS`` changes them too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

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

BATCH_DOCS = 4096
"""Documents per batch; part of the random stream (changing it changes the corpus)."""
_MARKS = np.array(MARKS, dtype=object)


@dataclass(frozen=True)
class BatchWorld:
    """The generative model of a vectorized spec.

    ``vocab``/``capitalized``: object (n_words,) of str; ``names``: (n_labels,) label names and
    ``name_array`` the same as an object array; ``label_cdf``/``label_popularity``: (n_labels,);
    ``topic_cum``: (n_topics,) cumulative topic popularity (not normalized); word ids (int32):
    ``label_words`` (n_labels, own + borrowed), ``topic_words`` (n_topics, topic_words),
    ``domain_words`` (n_domains, domain_words), drawn with ``word_cdf`` over those columns in
    that order; noise words are ids ``0..noise_words-1``, drawn with ``noise_cdf``.
    ``all_words``: the three word tables flattened one after the other; ``word_guide`` and
    ``noise_guide``: :func:`guide_table` of ``word_cdf`` and ``noise_cdf``.
    """

    vocab: np.ndarray
    capitalized: np.ndarray
    names: tuple[str, ...]
    name_array: np.ndarray
    label_texts: tuple[str, ...]
    label_cdf: np.ndarray
    label_popularity: np.ndarray
    topic_cum: np.ndarray
    label_words: np.ndarray
    topic_words: np.ndarray
    domain_words: np.ndarray
    word_cdf: np.ndarray
    noise_cdf: np.ndarray
    all_words: np.ndarray
    word_guide: np.ndarray
    noise_guide: np.ndarray


@functools.lru_cache(maxsize=2)
def build_world(spec: SyntheticSpec) -> BatchWorld:
    """Vocabulary, popularity and word tables of ``spec`` (cached per spec)."""
    rng = spec_rng(spec, "world")
    vocabulary = make_vocabulary(spec, rng)
    vocab = np.array(vocabulary.words, dtype=object)
    domain_ids, topic_ids, own_ids = (
        vocabulary.domain_ids,
        vocabulary.topic_ids,
        vocabulary.own_ids,
    )
    n_noise = vocabulary.n_noise
    del vocabulary  # its word list: vocab holds the words now
    popularity = zipf(spec.n_labels, spec.zipf_exponent)[rng.permutation(spec.n_labels)]
    label_words = label_word_table(spec, rng, own_ids).astype(np.int32)
    names = label_name_list(spec)
    words, noise_cdf = word_cdf(spec), cdf(zipf(n_noise, 1.0))
    world = BatchWorld(
        vocab=vocab,
        capitalized=np.array([w.capitalize() for w in vocab.tolist()], dtype=object),
        names=names,
        name_array=np.array(names, dtype=object),
        label_texts=(),
        label_cdf=cdf(popularity),
        label_popularity=popularity,
        topic_cum=np.cumsum(popularity.reshape(spec.n_topics, -1).sum(axis=1)),
        label_words=label_words,
        topic_words=topic_ids,
        domain_words=domain_ids,
        word_cdf=words,
        noise_cdf=noise_cdf,
        all_words=np.concatenate([label_words.ravel(), topic_ids.ravel(), domain_ids.ravel()]),
        word_guide=guide_table(words),
        noise_guide=guide_table(noise_cdf),
    )
    return _with_label_texts(spec, world)


def _with_label_texts(spec: SyntheticSpec, world: BatchWorld) -> BatchWorld:
    """``world`` with each label's text: its first own words, its topic's and domain's first."""
    label_topic = np.arange(spec.n_labels) // spec.labels_per_topic
    parts = [world.label_words[:, : min(LABEL_TEXT_OWN_WORDS, spec.label_words)]]
    if spec.topic_words:
        parts.append(world.topic_words[label_topic, :1])
    if spec.domain_words:
        parts.append(world.domain_words[label_topic // spec.topics_per_domain, :1])
    rows = world.vocab[np.concatenate(parts, axis=1)].tolist()
    texts = tuple(" ".join(row) for row in rows)
    return BatchWorld(**{**vars(world), "label_texts": texts})


def _top_by_popularity(
    spec: SyntheticSpec,
    world: BatchWorld,
    rng: np.random.Generator,
    topics: np.ndarray,
    counts: np.ndarray,
    exclude: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """For each row r: ``counts[r]`` distinct labels of topic ``topics[r]`` (not ``exclude[r]``),
    drawn without replacement with probability ~ popularity. Returns (rows, labels), by row."""
    per_topic = spec.labels_per_topic
    items = topics[:, None] * per_topic + np.arange(per_topic)
    keys = rng.exponential(size=items.shape) / world.label_popularity[items]
    if exclude is not None:
        keys[items == exclude[:, None]] = np.inf
    order = np.argsort(keys, axis=1, kind="stable")
    rows, cols = np.nonzero(np.arange(per_topic) < counts[:, None])
    return rows, items[rows, order[rows, cols]]


def _other_topics(
    spec: SyntheticSpec, world: BatchWorld, rng: np.random.Generator, topics: np.ndarray
) -> np.ndarray:
    """A second topic per row, not ``topics[r]``: from the same domain with ``same_domain_prob``,
    else from any domain, with probability ~ topic popularity (drawn until it differs)."""
    per_domain = spec.topics_per_domain
    same = rng.random(len(topics)) < spec.same_domain_prob
    same &= per_domain > 1
    lo = np.where(same, (topics // per_domain) * per_domain, 0)
    hi = np.where(same, lo + per_domain, spec.n_topics)
    below = np.concatenate([[0.0], world.topic_cum])
    out, todo = topics.copy(), np.arange(len(topics))
    while todo.size:
        first, last = lo[todo], hi[todo]
        u = below[first] + rng.random(todo.size) * (below[last] - below[first])
        pick = np.clip(np.searchsorted(world.topic_cum, u, side="right"), first, last - 1)
        ok = pick != topics[todo]
        out[todo[ok]] = pick[ok]
        todo = todo[~ok]
    return out


def _label_sets(
    spec: SyntheticSpec, world: BatchWorld, rng: np.random.Generator, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels of ``n`` documents: a Zipf-drawn primary label, labels of its topic, sometimes
    labels of a second topic. Returns primary (n,) and the (doc, label) assignments (m,), sorted
    by doc then label."""
    per_topic = spec.labels_per_topic
    wanted = 1 + rng.poisson(spec.mean_labels_per_doc - 1, n)
    wanted = np.minimum(spec.max_labels_per_doc, wanted)
    primary = np.searchsorted(world.label_cdf, rng.random(n), side="right")
    topic = primary // per_topic
    second = np.flatnonzero((rng.random(n) < spec.second_topic_prob) & (spec.n_topics > 1))
    other = _other_topics(spec, world, rng, topic[second])
    n_other = np.zeros(n, dtype=np.int64)
    n_other[second] = np.minimum(per_topic, np.maximum(1, rng.binomial(wanted[second] - 1, 0.4)))
    wanted = np.maximum(wanted, n_other + 1)
    n_same = np.clip(wanted - 1 - n_other, 0, per_topic - 1)
    same_doc, same = _top_by_popularity(spec, world, rng, topic, n_same, primary)
    other_row, others = _top_by_popularity(spec, world, rng, other, n_other[second], None)
    doc = np.concatenate([np.arange(n), same_doc, second[other_row]])
    label = np.concatenate([primary, same, others])
    order = np.lexsort((label, doc))
    return primary, doc[order], label[order]


def _tagged_owners(
    spec: SyntheticSpec,
    rng: np.random.Generator,
    doc: np.ndarray,
    label: np.ndarray,
    n_tagged: np.ndarray,
) -> np.ndarray:
    """The label behind each tagged word: ``n_tagged[d]`` (n,) words of doc d spread over its
    labels by a Dirichlet(``label_salience_alpha``) salience. ``doc``/``label``: (m,) sorted by
    doc. Returns (sum n_tagged,) label ids, grouped by doc."""
    n = len(n_tagged)
    gamma = rng.gamma(spec.label_salience_alpha, size=len(doc))
    first = np.searchsorted(doc, np.arange(n + 1))
    total = np.cumsum(gamma)
    before = np.concatenate([[0.0], total])[first[:-1]]
    sums = np.maximum(np.bincount(doc, weights=gamma, minlength=n), 1e-300)
    within = (total - before[doc]) / sums[doc]
    within[first[1:] - 1] = 1.0
    word_doc = np.repeat(np.arange(n), n_tagged)
    slot = np.searchsorted(doc + within, word_doc + rng.random(len(word_doc)), side="right")
    return label[np.minimum(slot, first[1:][word_doc] - 1)]


def _word_ids(
    spec: SyntheticSpec, world: BatchWorld, rng: np.random.Generator, owners: np.ndarray
) -> np.ndarray:
    """A word of each owner label's distribution (own, borrowed, topic or domain word)."""
    column = draw(world.word_guide, world.word_cdf, rng.random(len(owners)))
    n_label, n_topic = world.label_words.shape[1], spec.topic_words
    per_domain = spec.labels_per_topic * spec.topics_per_domain
    topic_at = world.label_words.size - n_label
    domain_at = topic_at + world.topic_words.size - n_topic
    flat = np.where(
        column < n_label,
        owners * n_label,
        np.where(
            column < n_label + n_topic,
            topic_at + (owners // spec.labels_per_topic) * n_topic,
            domain_at + (owners // per_domain) * spec.domain_words,
        ),
    )
    return world.all_words[flat + column]


def guide_table(cdf_: np.ndarray, size: int = 1 << 16) -> np.ndarray:
    """Where to start looking for ``u`` in ``cdf_`` for each of ``size`` equal buckets of [0, 1):
    ``searchsorted(cdf_, j / size, "right")``, shape (size,)."""
    return np.searchsorted(cdf_, np.arange(size) / size, side="right")


def draw(guide: np.ndarray, cdf_: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``searchsorted(cdf_, u, "right")`` for ``u`` in [0, 1) (``cdf_`` ending at 1), found from
    ``guide`` (:func:`guide_table`) in a step or two: several times faster than a binary search."""
    at = guide[(u * len(guide)).astype(np.int64)]
    behind = np.flatnonzero(cdf_[at] <= u)
    while behind.size:
        at[behind] += 1
        behind = behind[cdf_[at[behind]] <= u[behind]]
    return at


def _doc_words(
    spec: SyntheticSpec,
    world: BatchWorld,
    rng: np.random.Generator,
    primary: np.ndarray,
    assignments: tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Word ids of the documents: lognormal lengths; noise words, words of their labels and of
    a distractor label of the primary topic, shuffled within each document. ``primary``: (n,);
    ``assignments``: (doc, label) sorted by doc. Returns words per doc (n,) and word ids,
    grouped by doc."""
    n, per_topic = len(primary), spec.labels_per_topic
    length = rng.lognormal(np.log(spec.median_doc_words), spec.doc_words_sigma, n)
    n_words = np.clip(np.rint(length), spec.min_doc_words, spec.max_doc_words).astype(np.int64)
    concentration = 12.0
    noise_share = rng.beta(
        spec.noise_fraction * concentration + 1e-9, (1 - spec.noise_fraction) * concentration, n
    )
    n_noise = rng.binomial(n_words, noise_share)
    n_distractor = rng.binomial(n_words - n_noise, spec.distractor_fraction)
    distractor = (primary // per_topic) * per_topic + rng.integers(per_topic, size=n)
    tagged = _tagged_owners(spec, rng, *assignments, n_words - n_noise - n_distractor)
    owners = np.concatenate([tagged, np.repeat(distractor, n_distractor)])
    noise = draw(world.noise_guide, world.noise_cdf, rng.random(int(n_noise.sum())))
    words = np.concatenate([_word_ids(spec, world, rng, owners), noise.astype(np.int32)])
    n_tagged = n_words - n_noise - n_distractor
    word_doc = np.concatenate(
        [np.repeat(np.arange(n), x) for x in (n_tagged, n_distractor, n_noise)]
    )
    shuffle = rng.integers(0, 1 << 32, size=len(word_doc), dtype=np.int64)
    order = np.argsort((word_doc.astype(np.int64) << 32) | shuffle, kind="stable")
    return n_words, words[order]


def _render(
    rng: np.random.Generator, world: BatchWorld, n_words: np.ndarray, words: np.ndarray, punct: bool
) -> list[str]:
    """Texts of the documents (``n_words`` (n,) words each, ``words`` grouped by doc): sentences
    of 6-18 words, capitals at sentence starts and 1% elsewhere, commas on 5% of the words."""
    ends = np.cumsum(n_words)
    starts = ends - n_words
    tokens = world.vocab[words]
    if punct:
        n_sentences = n_words // 6 + 1
        sentence_doc = np.repeat(np.arange(len(n_words)), n_sentences)
        total = np.cumsum(rng.integers(6, 19, size=int(n_sentences.sum())))
        offset = np.concatenate([[0], total])[np.cumsum(n_sentences) - n_sentences]
        within = total - offset[sentence_doc]
        inside = within < n_words[sentence_doc]
        bounds = starts[sentence_doc[inside]] + within[inside]
        capital = rng.random(len(words)) < 0.01
        capital[starts] = True
        capital[bounds] = True
        marks = (rng.random(len(words)) < 0.05).astype(np.int64)
        last = np.concatenate([bounds - 1, ends - 1])
        marks[last] = np.searchsorted(END_MARK_CDF, rng.random(len(last)), side="right")
        capital = np.flatnonzero(capital)
        tokens[capital] = world.capitalized[words[capital]]
        marked = np.flatnonzero(marks)
        tokens[marked] = tokens[marked] + _MARKS[marks[marked]]
    flat = tokens.tolist()
    return [" ".join(flat[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def generate_split(spec: SyntheticSpec, split: str) -> Iterator[SyntheticDoc]:
    """Stream the ``split`` ("train" or "test") documents of a vectorized ``spec``, drawn
    ``BATCH_DOCS`` at a time; doc ids ``f"{split}-{i:06d}"``."""
    world = build_world(spec)
    rng = spec_rng(spec, split)
    n_docs = spec.n_train if split == "train" else spec.n_test
    for first in range(0, n_docs, BATCH_DOCS):
        n = min(BATCH_DOCS, n_docs - first)
        primary, doc, label = _label_sets(spec, world, rng, n)
        n_words, words = _doc_words(spec, world, rng, primary, (doc, label))
        texts = _render(rng, world, n_words, words, spec.punctuation)
        names = world.name_array[label].tolist()
        bounds = np.searchsorted(doc, np.arange(n + 1)).tolist()
        for i in range(n):
            labels = tuple(names[bounds[i] : bounds[i + 1]])
            yield SyntheticDoc(doc_id=f"{split}-{first + i:06d}", text=texts[i], labels=labels)
