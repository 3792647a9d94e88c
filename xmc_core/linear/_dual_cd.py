"""Dual coordinate descent for a group of sibling nodes, in lockstep (numba kernels).

The children of one parent are trained on the same rows (the parent's documents), so
:mod:`xmc_core.linear._solver_kernels` solves up to ``LANES`` of them together: lane c is node
c's binary problem, with its own dual variables, shrinking and stopping test, exactly as
liblinear solves one problem (Hsieh et al. 2008 for the L2-loss SVM, ``solve_l2r_l1l2_svc``;
Yu, Huang and Lin 2011 for logistic regression, ``solve_l2r_lr_dual``). What the lanes share
is the visiting order of the rows (one shuffle per epoch) and the pass over each row's entries:
the weights are a (d + 1, P) float32 matrix W (a row per local feature, the bias weight last),
so one row's dot products with every lane are one sweep over the row's entries, each reading
one contiguous W row; the updates are a second sweep. A lane that has converged stops
updating; a row that every live lane has shrunk is skipped.

Rows of a lane whose cost is 0 are not part of its problem (padding lanes have cost 0
everywhere). The weights are float32, as PECOS keeps them; the dual variables are float64.
"""

from __future__ import annotations

import numpy as np
from numba import njit

Array = np.ndarray
Block = tuple[Array, Array, Array, Array]  # (indptr, idx, val, sqnorm) of a batch's local rows

_INF = np.inf
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_STAR = np.uint64(0x2545F4914F6CDD1D)


@njit(cache=True)
def seed_state(seed: int, node: int) -> np.uint64:
    """Non-zero xorshift64* state for stream ``node`` (splitmix64 of seed and node)."""
    z = np.uint64(seed) + np.uint64(node + 1) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z = z ^ (z >> np.uint64(31))
    return z if z != np.uint64(0) else _GOLDEN


@njit(cache=True)
def _shuffle(index: Array, n: int, state: np.uint64) -> np.uint64:
    """Fisher-Yates shuffle of ``index[:n]`` in place; returns the advanced RNG state."""
    for k in range(n - 1, 0, -1):
        state ^= state >> np.uint64(12)
        state ^= state << np.uint64(25)
        state ^= state >> np.uint64(27)
        r = np.int64(((state * _STAR) >> np.uint64(11)) % np.uint64(k + 1))
        index[k], index[r] = index[r], index[k]
    return state


@njit(cache=True, error_model="numpy")
def _dots(W: Array, data: Block, r: int, bias: np.float32, out: Array) -> None:
    """out[c] = W[:, c] . (x_r, bias) for every lane (the lane loop has a runtime length,
    so LLVM vectorizes it instead of unrolling it)."""
    indptr, idx, val, _ = data
    lanes = W.shape[1]
    wb = W[W.shape[0] - 1]
    for c in range(lanes):
        out[c] = wb[c] * bias
    for e in range(indptr[r], indptr[r + 1]):
        v = val[e]
        wr = W[idx[e]]
        for c in range(lanes):
            out[c] += wr[c] * v


@njit(cache=True, error_model="numpy")
def _update(W: Array, data: Block, r: int, bias: np.float32, step: Array) -> None:
    """W[:, c] += step[c] * (x_r, bias) for every lane."""
    indptr, idx, val, _ = data
    lanes = W.shape[1]
    for e in range(indptr[r], indptr[r + 1]):
        v = val[e]
        wr = W[idx[e]]
        for c in range(lanes):
            wr[c] += step[c] * v
    wb = W[W.shape[0] - 1]
    for c in range(lanes):
        wb[c] += step[c] * bias


@njit(cache=True, error_model="numpy")
def l2_svm(
    data: Block, r0: int, y: Array, cost: Array, bias: float, W: Array,
    max_iter: int, eps: float, state: np.uint64,
) -> None:  # fmt: skip
    """L2-regularized L2-loss SVMs by dual CD with shrinking, one per lane.

    Rows ``r0 .. r0 + n`` of ``data``; ``y``: int8 (n, P) +-1; ``cost``: float32 (n, P), 0
    where the row is not in the lane's problem; ``W``: float32 (d + 1, P), zeros on entry, the
    weights on exit. A lane stops when its max - min projected gradient over an epoch <= eps
    (then, if it had shrunk rows, it checks all of them once more), or after ``max_iter``
    epochs.
    """
    n, lanes = cost.shape
    b32 = np.float32(bias)
    alpha = np.zeros((n, lanes))
    qd = np.empty((n, lanes), dtype=np.float32)
    shrunk = cost <= 0.0
    live = np.zeros(n, dtype=np.int64)  # lanes still visiting each row
    sqnorm = data[3]
    for k in range(n):
        for c in range(lanes):
            if not shrunk[k, c]:
                qd[k, c] = sqnorm[r0 + k] + bias * bias + 0.5 / cost[k, c]
                live[k] += 1
    done = np.zeros(lanes, dtype=np.bool_)
    for c in range(lanes):
        done[c] = not np.any(cost[:, c] > 0.0)
    n_shrunk = np.zeros(lanes, dtype=np.int64)
    pg_max_old = np.full(lanes, _INF)
    pg_max, pg_min = np.empty(lanes), np.empty(lanes)
    wx = np.empty(lanes, dtype=np.float32)
    step = np.empty(lanes, dtype=np.float32)
    index = np.arange(n)
    for _ in range(max_iter):
        state = _shuffle(index, n, state)
        pg_max[:] = -_INF
        pg_min[:] = _INF
        for s in range(n):
            k = index[s]
            if live[k] == 0:
                continue
            _dots(W, data, r0 + k, b32, wx)
            changed = False
            for c in range(lanes):
                step[c] = 0.0
                if done[c] or shrunk[k, c]:
                    continue
                a = alpha[k, c]
                g = y[k, c] * wx[c] - 1.0 + a * (0.5 / cost[k, c])
                pg = g
                if a == 0.0:
                    if g > pg_max_old[c]:  # shrink: this row stays at alpha = 0
                        shrunk[k, c] = True
                        live[k] -= 1
                        n_shrunk[c] += 1
                        continue
                    pg = min(g, 0.0)
                pg_max[c] = max(pg_max[c], pg)
                pg_min[c] = min(pg_min[c], pg)
                if abs(pg) > 1.0e-12:
                    alpha[k, c] = max(a - g / qd[k, c], 0.0)
                    step[c] = (alpha[k, c] - a) * y[k, c]
                    changed = True
            if changed:
                _update(W, data, r0 + k, b32, step)
        if not _l2_epoch_end(pg_max, pg_min, pg_max_old, eps, cost, shrunk, live, done, n_shrunk):
            break


@njit(cache=True)
def _l2_epoch_end(
    pg_max: Array, pg_min: Array, pg_max_old: Array, eps: float, cost: Array,
    shrunk: Array, live: Array, done: Array, n_shrunk: Array,
) -> bool:  # fmt: skip
    """liblinear's end-of-epoch test, lane by lane; False once every lane is done."""
    n, lanes = shrunk.shape
    running = False
    for c in range(lanes):
        if done[c]:
            continue
        if pg_max[c] - pg_min[c] <= eps:
            if n_shrunk[c] == 0:  # converged on every row: the lane is done
                done[c] = True
                for k in range(n):
                    if not shrunk[k, c]:
                        shrunk[k, c] = True
                        live[k] -= 1
                continue
            for k in range(n):  # converged on the active rows: check every row again
                if shrunk[k, c] and cost[k, c] > 0.0:
                    shrunk[k, c] = False
                    live[k] += 1
            n_shrunk[c] = 0
            pg_max_old[c] = _INF
        else:
            pg_max_old[c] = pg_max[c] if pg_max[c] > 0.0 else _INF
        running = True
    return running


@njit(cache=True, error_model="numpy")
def _newton_1d(
    a: float, b: float, c: float, z0: float, innereps: float
) -> tuple[float, int, float]:
    """Minimize z log z + (c-z) log(c-z) + a/2 (z-z0)^2 + b (z-z0) over (0, c) from z0.

    Returns (z, Newton steps taken (at most 101, as liblinear), |gradient| at the start point).
    """
    z = z0
    if c - z < 0.5 * c:
        z = 0.1 * z
    gp = a * (z - z0) + b + np.log(z / (c - z))
    g_start = abs(gp)
    steps = 0
    while steps <= 100 and abs(gp) >= innereps:
        gpp = a + c / (c - z) / z
        trial = z - gp / gpp
        z = z * 0.1 if trial <= 0.0 else trial
        gp = a * (z - z0) + b + np.log(z / (c - z))
        steps += 1
    return z, steps, g_start


@njit(cache=True, error_model="numpy")
def logistic(
    data: Block, r0: int, y: Array, cost: Array, bias: float, W: Array,
    max_iter: int, eps: float, state: np.uint64,
) -> None:  # fmt: skip
    """L2-regularized logistic regressions by dual CD, one per lane (same arguments as
    :func:`l2_svm`). Dual variables alpha + alpha_c = cost, both in (0, cost); each
    coordinate step is a 1-D Newton solve. A lane stops when the largest |gradient| of an
    epoch is below eps, or after ``max_iter`` epochs."""
    n, lanes = cost.shape
    b32 = np.float32(bias)
    alpha = np.minimum(0.001 * cost.astype(np.float64), 1e-8)
    alpha_c = cost - alpha
    step = np.empty(lanes, dtype=np.float32)
    for k in range(n):
        for c in range(lanes):
            step[c] = y[k, c] * alpha[k, c] if cost[k, c] > 0.0 else 0.0
        _update(W, data, r0 + k, b32, step)
    members = np.zeros(lanes, dtype=np.int64)
    for c in range(lanes):
        members[c] = np.count_nonzero(cost[:, c] > 0.0)
    done = members == 0
    innereps = np.full(lanes, 1e-2)
    innereps_min = min(1e-8, eps)
    g_max, newton_steps = np.empty(lanes), np.empty(lanes, dtype=np.int64)
    wx = np.empty(lanes, dtype=np.float32)
    index = np.arange(n)
    sqnorm = data[3]
    for _ in range(max_iter):
        state = _shuffle(index, n, state)
        g_max[:] = 0.0
        newton_steps[:] = 0
        for s in range(n):
            k = index[s]
            _dots(W, data, r0 + k, b32, wx)
            changed = False
            for c in range(lanes):
                step[c] = 0.0
                ck = np.float64(cost[k, c])
                if done[c] or ck <= 0.0:
                    continue
                a = sqnorm[r0 + k] + bias * bias
                b = y[k, c] * np.float64(wx[c])
                sign = 1.0  # minimize over alpha (sign 1) or over alpha_c (sign -1)
                z0 = alpha[k, c]
                if 0.5 * a * (alpha_c[k, c] - alpha[k, c]) + b < 0.0:
                    sign = -1.0
                    z0 = alpha_c[k, c]
                z, steps, g_start = _newton_1d(a, sign * b, ck, z0, innereps[c])
                g_max[c] = max(g_max[c], g_start)
                newton_steps[c] += steps
                if steps > 0:
                    if sign > 0.0:
                        alpha[k, c], alpha_c[k, c] = z, ck - z
                    else:
                        alpha_c[k, c], alpha[k, c] = z, ck - z
                    step[c] = sign * (z - z0) * y[k, c]
                    changed = True
            if changed:
                _update(W, data, r0 + k, b32, step)
        running = False
        for c in range(lanes):
            if done[c]:
                continue
            if g_max[c] < eps:
                done[c] = True
                continue
            running = True
            if newton_steps[c] <= members[c] // 10:
                innereps[c] = max(innereps_min, 0.1 * innereps[c])
        if not running:
            break
