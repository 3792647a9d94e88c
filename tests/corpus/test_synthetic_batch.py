"""The vectorized synthetic corpus (``SyntheticSpec(vectorized=True)``, ``SyntheticSpec.sized``):
pinned output, the same model as the per-document corpus, bounded vocabularies, exact draws."""

from __future__ import annotations

import collections
import dataclasses
import hashlib

import numpy as np
import pytest

from xmc_core.corpus import synthetic_batch
from xmc_core.corpus.synthetic import (
    SyntheticDoc,
    SyntheticSpec,
    generate_split,
    label_names,
    label_texts,
)

TINY = SyntheticSpec(
    n_train=300, n_test=100, n_domains=3, topics_per_domain=4, labels_per_topic=8, vectorized=True
)


def _digest(spec: SyntheticSpec) -> str:
    """sha256 over every document of both splits and the label texts."""
    h = hashlib.sha256()
    for split in ("train", "test"):
        for doc in generate_split(spec, split):
            h.update(f"{doc.doc_id}\t{doc.text}\t{','.join(doc.labels)}\n".encode())
    for name, text in sorted(label_texts(spec).items()):
        h.update(f"{name}\t{text}\n".encode())
    return h.hexdigest()


def _topic(label: str) -> str:
    return label.rsplit("/", 1)[0]


def test_output_is_pinned() -> None:
    """The vectorized stream is part of what a benchmark's corpus is: a change shows here."""
    assert _digest(TINY) == "b2f3dbe86bfd45d23c79cc42581acaded6f8535a931b1a3dfa352bc19f1dffe4"
    first = next(generate_split(TINY, "train"))
    assert first.doc_id == "train-000000"
    assert first.labels == (
        "d02/t00/l0066", "d02/t01/l0072", "d02/t01/l0073", "d02/t01/l0075", "d02/t01/l0077",
    )  # fmt: skip
    assert first.text.startswith("Ri nus fle wa zeafliostir jushi. Nagrerou")
    pooled = dataclasses.replace(TINY, label_word_pool=20)
    assert _digest(pooled) == "7920afcbfae976d9bd6cd4752f4ac7295607aa41fdba275554ac31f636b1fe15"


def test_same_world_as_the_per_document_corpus() -> None:
    """Without a word pool the world (vocabulary, label texts, names) is the per-document one;
    only the documents are drawn differently."""
    per_doc = dataclasses.replace(TINY, vectorized=False)
    assert label_texts(TINY) == label_texts(per_doc)
    assert label_names(TINY) == label_names(per_doc)
    texts = [d.text for d in generate_split(TINY, "train")]
    assert texts != [d.text for d in generate_split(per_doc, "train")]


def test_documents_are_well_formed_across_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synthetic_batch, "BATCH_DOCS", 64)  # 300 docs: 5 batches, the last short
    docs = list(generate_split(TINY, "train"))
    names = set(label_names(TINY))
    assert [d.doc_id for d in docs] == [f"train-{i:06d}" for i in range(300)]
    for doc in docs:
        assert doc.labels == tuple(sorted(set(doc.labels))) and set(doc.labels) <= names
        assert 1 <= len(doc.labels) <= TINY.max_labels_per_doc
        words = doc.text.split()
        assert TINY.min_doc_words <= len(words) <= TINY.max_doc_words
        assert words[0][0].isupper() and words[-1][-1] in ".?!"
    assert len({d.text for d in docs}) == 300


@pytest.fixture(scope="module")
def both_paths() -> dict[str, list[SyntheticDoc]]:
    spec = SyntheticSpec(n_train=6000, n_test=0)
    vectorized = dataclasses.replace(spec, vectorized=True)
    return {
        "per_doc": list(generate_split(spec, "train")),
        "vectorized": list(generate_split(vectorized, "train")),
    }


def _stats(docs: list[SyntheticDoc]) -> dict[str, float]:
    one_topic = [len({_topic(x) for x in d.labels}) == 1 for d in docs]
    text = " ".join(d.text for d in docs[:500]).split()
    return {
        "labels_per_doc": float(np.mean([len(d.labels) for d in docs])),
        "words_per_doc": float(np.mean([len(d.text.split()) for d in docs])),
        "one_topic": float(np.mean(one_topic)),
        "capitals": sum(t[0].isupper() for t in text) / len(text),
        "commas": sum(t.endswith(",") for t in text) / len(text),
    }


def test_same_model_as_the_per_document_corpus(both_paths: dict[str, list[SyntheticDoc]]) -> None:
    a, b = _stats(both_paths["per_doc"]), _stats(both_paths["vectorized"])
    assert a["labels_per_doc"] == pytest.approx(b["labels_per_doc"], abs=0.1)
    assert a["words_per_doc"] == pytest.approx(b["words_per_doc"], abs=2.0)
    assert a["one_topic"] == pytest.approx(b["one_topic"], abs=0.03)
    assert a["capitals"] == pytest.approx(b["capitals"], abs=0.01)
    assert a["commas"] == pytest.approx(b["commas"], abs=0.01)
    names = label_names(SyntheticSpec())
    counts = [
        collections.Counter(x for d in docs for x in d.labels) for docs in both_paths.values()
    ]
    per_label = np.array([[c.get(n, 0) for n in names] for c in counts], dtype=np.float64)
    assert np.corrcoef(per_label)[0, 1] > 0.95  # the same labels are popular
    words = [
        collections.Counter(w.strip(",.?!") for d in docs for w in d.text.lower().split())
        for docs in both_paths.values()
    ]
    top = [w for w, _ in words[0].most_common(50)]
    assert np.corrcoef([[c[w] for w in top] for c in words])[0, 1] > 0.95


def test_sized_reaches_the_asked_label_count() -> None:
    spec = SyntheticSpec(zipf_exponent=0.75).sized(50_000, 1000, 10)
    assert (spec.n_labels, spec.n_train, spec.n_test, spec.vectorized) == (
        49_920,
        1000,
        10,
        True,
    )  # 312 domains of 160
    assert spec.zipf_exponent == 0.75 and spec.labels_per_topic == 20
    assert SyntheticSpec().sized(10, 5, 0).n_labels == 160  # at least one domain
    with pytest.raises(ValueError, match="n_labels >= 1"):
        SyntheticSpec().sized(0, 5, 0)


def test_word_pool_bounds_the_vocabulary() -> None:
    spec = dataclasses.replace(SyntheticSpec().sized(2000, 200, 0), label_word_pool=300)
    world = synthetic_batch.build_world(spec)
    n_other = spec.noise_words + spec.n_domains * spec.domain_words
    n_other += spec.n_topics * spec.topic_words
    assert len(world.vocab) == n_other + 300
    assert world.label_words.max() < len(world.vocab)
    own = world.label_words[:, : spec.label_words]
    assert own.min() >= n_other  # own words come from the pool, after the other words
    assert len({tuple(sorted(row)) for row in own.tolist()}) == spec.n_labels  # told apart
    docs = list(generate_split(spec, "train"))
    assert {w.strip(",.?!").lower() for d in docs for w in d.text.split()} <= set(world.vocab)


def test_bad_pool_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="needs vectorized=True"):
        SyntheticSpec(label_word_pool=100)
    with pytest.raises(ValueError, match="0 or >= label_words"):
        SyntheticSpec(vectorized=True, label_word_pool=5)


def test_guided_draw_equals_a_binary_search() -> None:
    rng = np.random.default_rng(0)
    weights = np.concatenate([rng.random(50), [0.0, 0.0], 1.0 / np.arange(1, 3000)])
    cdf = np.cumsum(weights) / weights.sum()
    cdf[-1] = 1.0
    u = np.concatenate([rng.random(100_000), [0.0, cdf[3], cdf[51], np.nextafter(1.0, 0.0)]])
    for size in (4, 1 << 16):
        guide = synthetic_batch.guide_table(cdf, size)
        got = synthetic_batch.draw(guide, cdf, u)
        np.testing.assert_array_equal(got, np.searchsorted(cdf, u, side="right"))
