"""Monotone maps from a ranker's score to a probability: isotonic regression and Platt scaling.

Both are fitted on (score, outcome) pairs, an outcome being 1 when the predicted label is
relevant, and both are non-decreasing in the score, so they never reorder a document's labels.

- :class:`IsotonicMap`: the pool-adjacent-violators fit (weighted least squares under a
  non-decreasing constraint, SciPy's); equal scores are pooled first. It is applied by linear
  interpolation between its blocks' centres (their pairs' weighted mean score), clipped to the
  first and last block's values outside them: centred isotonic regression (Oron and Flournoy
  2017), smoother than interpolating between the blocks' ends (scikit-learn's
  ``IsotonicRegression``), which holds a block's value flat across it. On validation carves of
  the shared datasets it had the lower Brier score in 11 of 12 comparisons
  (``benchmarks/notes/2026-11-29-issue-37-calibration.md``).
- :class:`PlattMap`: ``sigmoid(a * t + b)`` with ``t`` the score's log (scores of every family
  here are products or averages of probabilities in [0, 1], and their log spreads the small
  ones), fitted by Newton's method on the log loss with Platt's smoothed targets
  ``(n+ + 1) / (n+ + 2)`` and ``1 / (n- + 2)`` (Lin, Lin and Weng 2007), ``a >= 0``.

A map is a few arrays; it saves as part of a :class:`~xmc_core.calibration.calibrator.Calibrator`
(JSON, no pickle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

LOG_FLOOR = 1e-12
"""Scores below this (zero included) are read as this before Platt's log."""
NEWTON_ITERS = 100
NEWTON_TOL = 1e-10


@dataclass(frozen=True)
class IsotonicMap:
    """A non-decreasing piecewise-linear map: ``x`` float64 (n_knots,) ascending, ``y`` float64
    (n_knots,) non-decreasing in [0, 1] (a fitted map's knots: its blocks' centres and
    values)."""

    x: np.ndarray
    y: np.ndarray

    kind = "isotonic"

    @classmethod
    def fit(
        cls, scores: np.ndarray, outcomes: np.ndarray, weights: np.ndarray | None = None
    ) -> IsotonicMap:
        """Pool adjacent violators over ``scores`` (n,) with ``outcomes`` (n,) in {0, 1}
        (``weights``: (n,) positive, default 1); a knot at each block's centre."""
        from scipy.optimize import isotonic_regression  # 0.4 s to import: only where fitted

        s, o, w = _pairs(scores, outcomes, weights)
        xs, inverse = np.unique(s, return_inverse=True)  # equal scores pooled first
        sw = np.bincount(inverse, weights=w)
        swy = np.bincount(inverse, weights=w * o)
        swx = np.bincount(inverse, weights=w * s)
        fit = isotonic_regression(swy / sw, weights=sw, increasing=True)
        starts = fit.blocks[:-1]
        centre = np.add.reduceat(swx, starts) / fit.weights
        # centres of consecutive blocks ascend; rounding may not keep a one-score block's
        # centre exactly on its score, so it is clipped into the block's range
        centre = np.clip(centre, xs[starts], xs[fit.blocks[1:] - 1])
        return cls(centre, np.clip(fit.x[starts], 0.0, 1.0))

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        """Probabilities of ``scores`` (any shape), float64."""
        return np.interp(np.asarray(scores, dtype=np.float64), self.x, self.y)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "x": self.x.tolist(), "y": self.y.tolist()}


@dataclass(frozen=True)
class PlattMap:
    """``sigmoid(a * log(max(score, LOG_FLOOR)) + b)``, ``a >= 0``."""

    a: float
    b: float

    kind = "platt"

    @classmethod
    def fit(
        cls, scores: np.ndarray, outcomes: np.ndarray, weights: np.ndarray | None = None
    ) -> PlattMap:
        """Newton's method with a backtracking line search on the weighted log loss."""
        s, o, w = _pairs(scores, outcomes, weights)
        n_pos, n_neg = float(w[o > 0].sum()), float(w[o == 0].sum())
        target = np.where(o > 0, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
        prior = float(np.log((n_pos + 1.0) / (n_neg + 1.0)))
        a, b = _newton(_log(s), target, w, prior)
        if a < 0.0:  # scores that fall as relevance rises: no monotone map but the prior
            return cls(0.0, prior)
        return cls(a, b)

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        return _sigmoid(self.a * _log(np.asarray(scores, dtype=np.float64)) + self.b)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "a": self.a, "b": self.b}


ScoreMap = IsotonicMap | PlattMap


def map_from_dict(value: dict[str, Any]) -> ScoreMap:
    """The map :meth:`to_dict` wrote; ValueError on anything else (read from disk: checked)."""
    kind = value.get("kind")
    if kind == "platt":
        a, b = float(value["a"]), float(value["b"])
        if not (np.isfinite(a) and np.isfinite(b) and a >= 0.0):
            raise ValueError(f"Platt map a={a}, b={b}: a must be finite and >= 0, b finite")
        return PlattMap(a, b)
    if kind == "isotonic":
        x = np.asarray(value["x"], dtype=np.float64)
        y = np.asarray(value["y"], dtype=np.float64)
        if x.ndim != 1 or x.shape != y.shape or not len(x):
            raise ValueError("isotonic map: x and y must be equal-length non-empty lists")
        if not (np.all(np.isfinite(x)) and np.all(np.diff(x) >= 0) and np.all(np.diff(y) >= 0)):
            raise ValueError("isotonic map: x must be finite and ascending, y non-decreasing")
        if y[0] < 0.0 or y[-1] > 1.0:
            raise ValueError("isotonic map: y must lie in [0, 1]")
        return IsotonicMap(x, y)
    raise ValueError(f"unknown score map kind {kind!r} (isotonic or platt)")


def _newton(t: np.ndarray, target: np.ndarray, w: np.ndarray, b0: float) -> tuple[float, float]:
    """(a, b) minimizing the weighted log loss of ``sigmoid(a * t + b)`` against ``target``,
    from (0, ``b0``): Newton steps, halved until the loss falls enough (Armijo), until the
    Newton decrement is below ``NEWTON_TOL`` of the loss."""
    a, b = 0.0, b0
    loss = _log_loss(a * t + b, target, w)
    for _ in range(NEWTON_ITERS):
        p = _sigmoid(a * t + b)
        g = np.array([np.dot(w * (p - target), t), np.dot(w, p - target)])
        d = w * p * (1.0 - p)
        H = np.array([[np.dot(d, t * t), np.dot(d, t)], [np.dot(d, t), d.sum()]])
        step = np.linalg.solve(H + 1e-12 * np.eye(2), g)
        decrement = float(g @ step)
        if decrement < NEWTON_TOL * max(1.0, loss):
            break
        rate = 1.0
        while rate > 1e-10:
            new = _log_loss((a - rate * step[0]) * t + b - rate * step[1], target, w)
            if new <= loss - 1e-4 * rate * decrement:
                break
            rate /= 2.0
        else:
            break
        a, b, loss = a - rate * step[0], b - rate * step[1], new
    return float(a), float(b)


def _pairs(
    scores: np.ndarray, outcomes: np.ndarray, weights: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fit's inputs as float64 vectors, checked."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    o = np.asarray(outcomes, dtype=np.float64).ravel()
    w = np.ones_like(s) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    if not (len(s) == len(o) == len(w)) or not len(s):
        raise ValueError(f"{len(s)} scores, {len(o)} outcomes, {len(w)} weights: need equal, > 0")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite")
    if not np.all((o == 0) | (o == 1)):
        raise ValueError("outcomes must be 0 or 1")
    if not np.all(np.isfinite(w) & (w > 0)):
        raise ValueError("weights must be finite and positive")
    return s, o, w


def _log(s: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(s, LOG_FLOOR))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def _log_loss(z: np.ndarray, target: np.ndarray, w: np.ndarray) -> float:
    """Weighted cross entropy of ``sigmoid(z)`` against soft ``target``."""
    return float(np.dot(w, target * np.logaddexp(0.0, -z) + (1.0 - target) * np.logaddexp(0.0, z)))
