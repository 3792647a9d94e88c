"""The encoder split at a layer boundary and the cache of its lower half's states
(:mod:`xmc_core.transformer.states`): the same embeddings as the whole encoder, whatever the
cache held, and a cache that checks what it reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from xmc_core.config import EncoderConfig, MatcherConfig
from xmc_core.errors import ArtifactError
from xmc_core.transformer import states as st
from xmc_core.transformer.encoder import TextEncoder, embed, load_tokenizer
from xmc_core.transformer.tokens import TokenizedTexts, tokenize_texts

TEXTS = [
    "label trees and beams",
    "a second, longer document of several words",
    "beams",
    "label trees and beams",  # a duplicate: one key, one cached entry
    "trees of labels, words of documents and beams of trees",
]
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def encoder(tx_encoder_dir: Path) -> TextEncoder:
    return TextEncoder.load(EncoderConfig(path=tx_encoder_dir)).eval()


@pytest.fixture(scope="module")
def tokens(tx_encoder_dir: Path) -> TokenizedTexts:
    import pyarrow as pa

    return tokenize_texts(load_tokenizer(tx_encoder_dir), pa.array(TEXTS), 16)


def test_the_boundary_counts_trainable_layers_from_the_top(encoder: TextEncoder) -> None:
    assert st.boundary(encoder, MatcherConfig(warm_trainable_layers=1)) == 1
    assert st.boundary(encoder, MatcherConfig(warm_trainable_layers=2)) is None  # all of them
    assert st.boundary(encoder, MatcherConfig()) is None


def test_upper_over_lower_is_the_encoder(encoder: TextEncoder, tokens: TokenizedTexts) -> None:
    rows = np.arange(tokens.n_docs)
    ids, mask = tokens.batch(rows, CPU)  # padded: the mask matters
    with torch.no_grad():
        whole = encoder(ids, mask)
        split = st.upper(encoder, st.lower(encoder, ids, mask, 1), mask, 1)
    torch.testing.assert_close(split, whole, rtol=0, atol=1e-6)


def test_embeddings_from_the_cache_do_not_depend_on_what_it_held(
    encoder: TextEncoder, tokens: TokenizedTexts, tmp_path: Path
) -> None:
    expected = embed(encoder, tokens, CPU, 2, False)
    cache = st.StateCache.open(tmp_path, encoder, 1)
    part = tokens.take(np.array([0, 2]))  # a first run fills two documents
    st.doc_states(encoder, part, cache, CPU, 2, "states")
    assert len(list(cache.folder.iterdir())) == 1
    (cache.folder / ".cut.1234.tmp").mkdir()  # a killed writer's temporary: not read
    cache = st.StateCache.open(tmp_path, encoder, 1)  # read back from disk
    states = st.doc_states(encoder, tokens, cache, CPU, 2, "states")
    assert len(st._finished(cache.folder)) == 2  # the two new distinct documents only
    got = st.embed(encoder, tokens, states, CPU, 2, "embedding")
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    # the same whatever its batch (batch sizes change the kernels' rounding on some CPUs:
    # the tolerance of test_onnx_int8's batch test)
    np.testing.assert_allclose(got[0], got[3], rtol=0, atol=1e-6)
    one_by_one = st.embed(encoder, tokens, states, CPU, 1, "embedding")
    np.testing.assert_allclose(one_by_one, got, rtol=0, atol=1e-6)
    four = np.array([4])
    alone = st.embed(encoder, tokens.take(four), states.take(four), CPU, 1, "embedding")
    np.testing.assert_allclose(alone[0], got[4], rtol=0, atol=1e-6)


def test_another_lineage_is_another_folder_and_old_ones_are_removed(
    encoder: TextEncoder, tmp_path: Path
) -> None:
    first = st.StateCache.open(tmp_path, encoder, 1).folder
    other = TextEncoder.load(encoder.cfg)
    with torch.no_grad():
        other.layers()[0].output.dense.weight.add_(1.0)  # below the boundary: another lineage
    second = st.StateCache.open(tmp_path, other, 1).folder
    assert second != first and first.is_dir()
    with torch.no_grad():
        other.layers()[0].output.dense.weight.add_(1.0)
    third = st.StateCache.open(tmp_path, other, 1).folder
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([second.name, third.name])
    with torch.no_grad():
        other.layers()[1].output.dense.weight.add_(1.0)  # above it: the same states
    assert st.StateCache.open(tmp_path, other, 1).folder == third


@pytest.mark.parametrize("name", ["index.npz", "states.npz"])
def test_a_corrupt_cache_file_is_refused(
    encoder: TextEncoder, tokens: TokenizedTexts, tmp_path: Path, name: str
) -> None:
    """The index is checked when the cache opens, the states when first read."""
    cache = st.StateCache.open(tmp_path, encoder, 1)
    keys = st.doc_states(encoder, tokens, cache, CPU, 8, "states").keys
    (chunk,) = list(cache.folder.iterdir())
    data = bytearray((chunk / name).read_bytes())
    data[-200] ^= 0xFF
    (chunk / name).write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="checksum mismatch") as err:
        st.StateCache.open(tmp_path, encoder, 1).get(keys[0])
    assert name in str(err.value) and "delete" in str(err.value)
