"""Numba kernels of the per-level linear rankers (used by :mod:`xmc_core.linear.solver`).

Two kernels work on one *batch* of parents:

- :func:`gather_parents` copies the rows of each parent into a local CSR block whose features
  are renumbered 0..d_p-1 (in order of first appearance), with the rows' squared norms;
- :func:`solve_jobs` trains one binary problem per child node on its parent's block, in
  parallel over nodes, with liblinear's dual coordinate descent (Hsieh et al. 2008 for the
  L2-loss SVM, Yu, Huang and Lin 2011 for logistic regression), each with one dense float64
  weight vector of length d_p + 1, then writes the kept weights as (global row, value) pairs.

Every job draws its own random stream from (seed, node), so results do not depend on the
number of threads or on how parents are batched.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

Array = np.ndarray
Block = tuple[Array, Array, Array, Array]  # (indptr, idx, val, sqnorm) of a batch's local rows

SQUARED_HINGE = 0
LOGISTIC = 1

_INF = np.inf
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_STAR = np.uint64(0x2545F4914F6CDD1D)


@njit(cache=True)
def _seed_state(seed: int, node: int) -> np.uint64:
    """Non-zero xorshift64* state for job ``node`` (splitmix64 of seed and node)."""
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


@njit(cache=True)
def gather_parents(
    row_start: Array,
    docs: Array,
    indptr: Array,
    x_indptr: Array,
    x_indices: Array,
    x_data: Array,
    feat_start: Array,
    marker: Array,
    idx: Array,
    val: Array,
    sqnorm: Array,
    feat_map: Array,
    n_local: Array,
) -> None:
    """Fill the local CSR blocks of a batch of parents (one pass over their entries).

    Parent slot b owns rows ``row_start[b]:row_start[b+1]`` (documents ``docs``, entries
    ``indptr[r]:indptr[r+1]`` of ``idx``/``val``) and the feature map
    ``feat_map[feat_start[b]:feat_start[b] + n_local[b]]`` (local -> global, in order of
    first appearance). ``marker``: int32 (n_features,), all -1 on entry and on exit.
    """
    for b in range(row_start.size - 1):
        fs = feat_start[b]
        nd = 0
        for r in range(row_start[b], row_start[b + 1]):
            i = docs[r]
            pos = indptr[r]
            sq = 0.0
            for e in range(x_indptr[i], x_indptr[i + 1]):
                f = x_indices[e]
                if marker[f] < 0:
                    marker[f] = nd
                    feat_map[fs + nd] = f
                    nd += 1
                idx[pos] = marker[f]
                v = np.float64(x_data[e])
                val[pos] = x_data[e]
                sq += v * v
                pos += 1
            sqnorm[r] = sq
        for k in range(nd):
            marker[feat_map[fs + k]] = -1
        n_local[b] = nd


@njit(cache=True, error_model="numpy")
def _examples(
    docs: Array,
    r0: int,
    r1: int,
    pos_docs: Array,
    weight_docs: Array,
    weights: Array,
    cp: float,
    cn: float,
) -> tuple[Array, Array, Array]:
    """Training examples of one node among rows ``r0:r1`` (``docs`` sorted within them).

    ``pos_docs``: sorted documents labelled +1; ``weight_docs``/``weights``: sorted documents
    with an importance weight. Returns (rows, y, cost), each (n_kept,): rows with cost > 0.
    """
    n = r1 - r0
    y = np.empty(n)
    cost = np.empty(n)
    for k in range(n):
        y[k] = -1.0
        cost[k] = cn
    k = 0
    for t in range(pos_docs.size):
        while k < n and docs[r0 + k] < pos_docs[t]:
            k += 1
        if k < n and docs[r0 + k] == pos_docs[t]:
            y[k] = 1.0
            cost[k] = cp
    k = 0
    for t in range(weight_docs.size):
        while k < n and docs[r0 + k] < weight_docs[t]:
            k += 1
        if k < n and docs[r0 + k] == weight_docs[t]:
            cost[k] *= weights[t]
    rows = np.empty(n, dtype=np.int64)
    kept = 0
    for k in range(n):
        if cost[k] > 0.0:
            rows[kept] = r0 + k
            y[kept] = y[k]
            cost[kept] = cost[k]
            kept += 1
    return rows[:kept], y[:kept], cost[:kept]


@njit(cache=True, error_model="numpy")
def _dot(w: Array, indptr: Array, idx: Array, val: Array, r: int) -> float:
    """w . x_r over the stored entries of local row r (4 accumulators: no add-latency chain)."""
    e, end = indptr[r], indptr[r + 1]
    s0 = s1 = s2 = s3 = 0.0
    while e + 3 < end:
        s0 += w[idx[e]] * val[e]
        s1 += w[idx[e + 1]] * val[e + 1]
        s2 += w[idx[e + 2]] * val[e + 2]
        s3 += w[idx[e + 3]] * val[e + 3]
        e += 4
    while e < end:
        s0 += w[idx[e]] * val[e]
        e += 1
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, error_model="numpy")
def _axpy(a: float, w: Array, indptr: Array, idx: Array, val: Array, r: int) -> None:
    """w += a * x_r over the stored entries of local row r."""
    for e in range(indptr[r], indptr[r + 1]):
        w[idx[e]] += a * val[e]


@njit(cache=True, error_model="numpy")
def _solve_l2_svm(
    data: Block, rows: Array, y: Array, cost: Array, bias: float, w: Array,
    max_iter: int, eps: float, state: np.uint64,
) -> None:  # fmt: skip
    """L2-regularized L2-loss SVM by dual CD with shrinking (liblinear solve_l2r_l1l2_svc).

    ``rows``: int64 (n,) local rows of the examples; ``y``: (n,) +-1; ``cost``: (n,) > 0;
    ``w``: float64 (d_p + 1,), zeros on entry, the weights on exit (bias weight last).
    Stops when max - min projected gradient <= eps, or after ``max_iter`` epochs.
    """
    indptr, idx, val, sqnorm = data
    n = rows.size
    d = w.size - 1
    alpha = np.zeros(n)
    diag = 0.5 / cost
    qd = np.empty(n)
    for k in range(n):
        qd[k] = sqnorm[rows[k]] + bias * bias + diag[k]
    index = np.arange(n)
    pg_max_old = _INF  # alpha has no upper bound (L2 loss): only alpha = 0 can be shrunk
    active = n
    it = 0
    while it < max_iter:
        pg_max_new, pg_min_new = -_INF, _INF
        state = _shuffle(index, active, state)
        s = 0
        while s < active:
            k = index[s]
            r = rows[k]
            g = y[k] * (_dot(w, indptr, idx, val, r) + bias * w[d]) - 1.0 + alpha[k] * diag[k]
            pg = g
            if alpha[k] == 0.0:
                if g > pg_max_old:  # shrink: this example stays at alpha = 0
                    active -= 1
                    index[s], index[active] = index[active], index[s]
                    continue
                pg = min(g, 0.0)
            pg_max_new = max(pg_max_new, pg)
            pg_min_new = min(pg_min_new, pg)
            if abs(pg) > 1.0e-12:
                old = alpha[k]
                alpha[k] = max(old - g / qd[k], 0.0)
                step = (alpha[k] - old) * y[k]
                _axpy(step, w, indptr, idx, val, r)
                w[d] += step * bias
            s += 1
        it += 1
        if pg_max_new - pg_min_new <= eps:
            if active == n:
                break
            active = n
            pg_max_old = _INF
            continue
        pg_max_old = pg_max_new if pg_max_new > 0.0 else _INF


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
def _solve_logistic(
    data: Block, rows: Array, y: Array, cost: Array, bias: float, w: Array,
    max_iter: int, eps: float, state: np.uint64,
) -> None:  # fmt: skip
    """L2-regularized logistic regression by dual CD (liblinear solve_l2r_lr_dual).

    Same arguments as :func:`_solve_l2_svm`. Dual variables alpha[k] + alpha_c[k] = cost[k],
    both in (0, cost[k]); each coordinate step is a 1-D Newton solve. Stops when the largest
    |gradient| of an epoch is below eps, or after ``max_iter`` epochs.
    """
    indptr, idx, val, sqnorm = data
    n = rows.size
    d = w.size - 1
    alpha = np.minimum(0.001 * cost, 1e-8)
    alpha_c = cost - alpha
    xtx = np.empty(n)
    for k in range(n):
        xtx[k] = sqnorm[rows[k]] + bias * bias
        step = y[k] * alpha[k]
        _axpy(step, w, indptr, idx, val, rows[k])
        w[d] += step * bias
    index = np.arange(n)
    innereps, innereps_min = 1e-2, min(1e-8, eps)
    for _ in range(max_iter):
        state = _shuffle(index, n, state)
        newton_steps = 0
        g_max = 0.0
        for s in range(n):
            k = index[s]
            r = rows[k]
            a = xtx[k]
            b = y[k] * (_dot(w, indptr, idx, val, r) + bias * w[d])
            c = cost[k]
            sign = 1.0  # minimize over alpha[k] (sign 1) or over alpha_c[k] (sign -1)
            z0 = alpha[k]
            if 0.5 * a * (alpha_c[k] - alpha[k]) + b < 0.0:
                sign = -1.0
                z0 = alpha_c[k]
            z, steps, g_start = _newton_1d(a, sign * b, c, z0, innereps)
            g_max = max(g_max, g_start)
            newton_steps += steps
            if steps > 0:
                if sign > 0.0:
                    alpha[k], alpha_c[k] = z, c - z
                else:
                    alpha_c[k], alpha[k] = z, c - z
                step = sign * (z - z0) * y[k]
                _axpy(step, w, indptr, idx, val, r)
                w[d] += step * bias
        if g_max < eps:
            break
        if newton_steps <= n // 10:
            innereps = max(innereps_min, 0.1 * innereps)


@njit(cache=True)
def _emit(
    w: Array, feat_map: Array, fs: int, bias: float, threshold: float, n_features: int,
    out_idx: Array, out_val: Array, start: int,
) -> int:  # fmt: skip
    """Write the weights with |w| >= threshold (and w != 0) from ``start``; return their count.

    Local feature k maps to global row ``feat_map[fs + k]``; the bias weight to ``n_features``.
    """
    d = w.size - 1
    pos = start
    for k in range(d):
        v = w[k]
        if v != 0.0 and abs(v) >= threshold:
            out_idx[pos] = feat_map[fs + k]
            out_val[pos] = v
            pos += 1
    if bias > 0.0 and w[d] != 0.0 and abs(w[d]) >= threshold:
        out_idx[pos] = n_features
        out_val[pos] = w[d]
        pos += 1
    return pos - start


@njit(cache=True, parallel=True)
def solve_jobs(
    jobs: tuple[Array, Array, Array],
    local: tuple[Array, ...],
    labels: tuple[Array, ...],
    params: tuple[int, int, int, int, float, float, float, float, float],
    out_idx: Array,
    out_val: Array,
    out_count: Array,
) -> None:
    """Train the child nodes of a batch of parents, in parallel over nodes.

    ``jobs`` = (node, parent slot, output start), each (n_jobs,) int64;
    ``local`` = (row_start, docs, indptr, idx, val, sqnorm, feat_start, n_local, feat_map)
    from :func:`gather_parents`; ``labels`` = csc arrays of Y then R, (y_indptr, y_indices,
    r_indptr, r_indices, r_data), all (n_docs, K); ``params`` = (loss, max_iter, seed,
    n_features, cp, cn, eps, bias, threshold). Job q writes ``out_count[q]`` (global row,
    value) pairs into ``out_idx``/``out_val`` from ``jobs[2][q]``.
    """
    node, slot, start = jobs
    row_start, docs, indptr, idx, val, sqnorm, feat_start, n_local, feat_map = local
    y_indptr, y_indices, r_indptr, r_indices, r_data = labels
    loss, max_iter, seed, n_features, cp, cn, eps, bias, threshold = params
    for q in prange(node.size):
        j, b = node[q], slot[q]
        rows, y, cost = _examples(
            docs,
            row_start[b],
            row_start[b + 1],
            y_indices[y_indptr[j] : y_indptr[j + 1]],
            r_indices[r_indptr[j] : r_indptr[j + 1]],
            r_data[r_indptr[j] : r_indptr[j + 1]],
            cp,
            cn,
        )
        w = np.zeros(n_local[b] + 1)
        state = _seed_state(seed, j)
        data = (indptr, idx, val, sqnorm)
        if rows.size > 0 and loss == LOGISTIC:
            _solve_logistic(data, rows, y, cost, bias, w, max_iter, eps, state)
        elif rows.size > 0:
            _solve_l2_svm(data, rows, y, cost, bias, w, max_iter, eps, state)
        out_count[q] = _emit(
            w, feat_map, feat_start[b], bias, threshold, n_features, out_idx, out_val, start[q]
        )
