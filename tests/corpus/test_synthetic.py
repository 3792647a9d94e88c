"""Tests for the deterministic synthetic multi-label corpus."""

import collections
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xmc_core.corpus.synthetic import (
    SyntheticDoc,
    SyntheticSpec,
    generate_split,
    label_names,
    label_texts,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SMALL = SyntheticSpec(n_train=300, n_test=100, n_domains=3, topics_per_domain=4, labels_per_topic=8)
NAME_RE = re.compile(r"^d\d{2}/t\d{2}/l\d{4}$")
WORD_RE = re.compile(r"[a-z]+")


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


@pytest.fixture(scope="module")
def default_train() -> list[SyntheticDoc]:
    return list(generate_split(SyntheticSpec(), "train"))


@pytest.fixture(scope="module")
def default_test() -> list[SyntheticDoc]:
    return list(generate_split(SyntheticSpec(), "test"))


def test_same_spec_gives_identical_output() -> None:
    first = list(generate_split(SMALL, "train"))
    second = list(generate_split(SyntheticSpec(**vars(SMALL)), "train"))
    assert first == second
    assert label_texts(SMALL) == label_texts(SyntheticSpec(**vars(SMALL)))


def test_output_is_identical_in_another_process() -> None:
    code = (
        f"import runpy, sys; g = runpy.run_path({str(Path(__file__).resolve())!r}); "
        "sys.stdout.write(g['_digest'](g['SMALL']))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == _digest(SMALL)


def test_per_document_output_is_pinned() -> None:
    """The per-document stream is what every earlier corpus was: unchanged, byte for byte."""
    assert _digest(SMALL) == "bf985df803e7b9bf1619f45a934c0a78ec98f7b4d8cb832a27cc0104feb1ec69"


def test_different_seeds_differ() -> None:
    other = SyntheticSpec(**{**vars(SMALL), "seed": 1})
    docs_a = list(generate_split(SMALL, "train"))
    docs_b = list(generate_split(other, "train"))
    assert [d.text for d in docs_a] != [d.text for d in docs_b]
    assert label_texts(SMALL) != label_texts(other)
    assert label_names(SMALL) == label_names(other)


def test_train_and_test_differ() -> None:
    train = list(generate_split(SMALL, "train"))
    test = list(generate_split(SMALL, "test"))
    assert len(train) == SMALL.n_train and len(test) == SMALL.n_test
    assert all(d.doc_id.startswith("train-") for d in train)
    assert all(d.doc_id.startswith("test-") for d in test)
    assert not {d.text for d in train} & {d.text for d in test}


def test_unknown_split_and_bad_spec_are_rejected() -> None:
    with pytest.raises(ValueError):
        list(generate_split(SMALL, "valid"))
    with pytest.raises(ValueError):
        SyntheticSpec(labels_per_topic=0)
    with pytest.raises(ValueError):
        SyntheticSpec(noise_fraction=1.0)
    with pytest.raises(ValueError):
        SMALL.scaled(0)


def test_generation_is_lazy() -> None:
    stream = generate_split(SyntheticSpec().scaled(100), "train")
    first = next(stream)
    assert first.doc_id == "train-000000" and first.labels


def test_every_doc_is_well_formed(default_train: list[SyntheticDoc]) -> None:
    names = set(label_names(SyntheticSpec()))
    ids = [d.doc_id for d in default_train]
    assert len(set(ids)) == len(ids) == 6000
    for doc in default_train:
        assert doc.text.strip()
        assert doc.labels and len(set(doc.labels)) == len(doc.labels)
        assert set(doc.labels) <= names


def test_text_is_pseudo_words_with_light_punctuation(default_train: list[SyntheticDoc]) -> None:
    text = " ".join(d.text for d in default_train[:200])
    assert set(text) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ .,?!")
    tokens = text.split()
    assert any(t[0].isupper() for t in tokens) and any(t[-1] in ".,?!" for t in tokens)
    assert sum(t[0].isupper() for t in tokens) < 0.3 * len(tokens)


def test_label_frequencies_are_heavy_tailed(default_train: list[SyntheticDoc]) -> None:
    counts = collections.Counter(label for d in default_train for label in d.labels)
    freqs = np.sort([counts.get(n, 0) for n in label_names(SyntheticSpec())])[::-1]
    top_decile = freqs[: len(freqs) // 10].sum() / freqs.sum()
    assert top_decile > 0.3
    assert np.mean(freqs <= 5) > 0.2
    assert freqs[0] > 20 * np.median(freqs)


def test_corpus_size_and_density(default_train: list[SyntheticDoc]) -> None:
    spec = SyntheticSpec()
    assert 900 <= spec.n_labels <= 1200
    labels_per_doc = np.mean([len(d.labels) for d in default_train])
    words_per_doc = np.mean([len(d.text.split()) for d in default_train])
    assert 2.0 <= labels_per_doc <= 5.0
    assert 50 <= words_per_doc <= 120
    assert np.std([len(d.text.split()) for d in default_train]) > 10


def test_scale_changes_counts() -> None:
    spec = SyntheticSpec()
    assert spec.scaled(1) == spec
    big = spec.scaled(4)
    assert (big.n_train, big.n_test) == (24000, 6000)
    assert 1.6 * spec.n_labels < big.n_labels < 2.5 * spec.n_labels
    small = SMALL.scaled(0.5)
    assert len(list(generate_split(small, "train"))) == 150
    assert len(list(generate_split(small, "test"))) == 50


def test_label_names_are_hierarchical_and_clean() -> None:
    names = label_names(SyntheticSpec())
    assert len(set(names)) == len(names) == SyntheticSpec().n_labels
    assert all(NAME_RE.match(n) for n in names)
    assert not any("," in n or any(c.isspace() for c in n) for n in names)
    assert len({_topic(n) for n in names}) == SyntheticSpec().n_topics


def test_label_texts_cover_all_labels() -> None:
    spec = SyntheticSpec()
    texts = label_texts(spec)
    assert set(texts) == set(label_names(spec))
    for text in texts.values():
        words = text.split()
        assert 3 <= len(words) <= 6 and all(WORD_RE.fullmatch(w) for w in words)
    own_words = [w for text in texts.values() for w in text.split()[:4]]
    assert len(set(own_words)) == len(own_words)


def test_labels_of_a_doc_mostly_share_a_topic(default_train: list[SyntheticDoc]) -> None:
    single_topic = [len({_topic(x) for x in d.labels}) == 1 for d in default_train]
    majority = [
        collections.Counter(map(_topic, d.labels)).most_common(1)[0][1] / len(d.labels)
        for d in default_train
    ]
    assert np.mean(single_topic) > 0.55
    assert np.mean(majority) > 0.8


def test_label_words_are_informative_but_not_trivial(default_test: list[SyntheticDoc]) -> None:
    word_labels: dict[str, list[str]] = collections.defaultdict(list)
    for name, text in label_texts(SyntheticSpec()).items():
        for word in text.split()[:4]:
            word_labels[word].append(name)
    hits = []
    for doc in default_test:
        votes = collections.Counter(
            label for w in WORD_RE.findall(doc.text.lower()) for label in word_labels.get(w, ())
        )
        hits.append(bool(votes) and votes.most_common(1)[0][0] in doc.labels)
    assert 0.5 < np.mean(hits) < 0.97
