"""Pronounceable pseudo-words for the synthetic corpus, built from weighted syllables."""

from __future__ import annotations

import numpy as np

_ONSETS = (
    *"bcdfghjklmnprstvwz",
    *("bl", "br", "ch", "cr", "dr", "fl", "fr", "gl", "gr"),
    *("pl", "pr", "sh", "sk", "sl", "sp", "st", "th", "tr"),
)
_NUCLEI = ("a", "e", "i", "o", "u", "ai", "ea", "ou", "io", "y")
_NUCLEUS_P = (0.18, 0.16, 0.14, 0.14, 0.1, 0.06, 0.06, 0.06, 0.05, 0.05)
_CODAS = ("", "n", "r", "s", "l", "m", "nd", "x")
_FINAL_CODA_P = (0.5, 0.12, 0.1, 0.08, 0.07, 0.05, 0.05, 0.03)
_INNER_CODA_P = (0.82, 0.05, 0.05, 0.03, 0.03, 0.02, 0.0, 0.0)


def make_words(
    rng: np.random.Generator, n: int, syllables: tuple[int, int], seen: set[str]
) -> list[str]:
    """``n`` new distinct pseudo-words of ``syllables`` (min, max) syllables, added to ``seen``."""
    words: list[str] = []
    max_syl = syllables[1]
    while len(words) < n:
        batch = max(64, 2 * (n - len(words)))
        counts = rng.integers(syllables[0], max_syl + 1, size=batch)
        onsets = rng.integers(0, len(_ONSETS), size=(batch, max_syl))
        nuclei = rng.choice(len(_NUCLEI), size=(batch, max_syl), p=_NUCLEUS_P)
        inner = rng.choice(len(_CODAS), size=(batch, max_syl), p=_INNER_CODA_P)
        final = rng.choice(len(_CODAS), size=batch, p=_FINAL_CODA_P)
        for i in range(batch):
            last = counts[i] - 1
            parts = [
                _ONSETS[onsets[i, j]]
                + _NUCLEI[nuclei[i, j]]
                + _CODAS[final[i] if j == last else inner[i, j]]
                for j in range(counts[i])
            ]
            word = "".join(parts)
            if word not in seen and len(words) < n:
                seen.add(word)
                words.append(word)
    return words
