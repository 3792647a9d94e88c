"""Metrics of the labels a model never saw a training document of (zero-shot labels).

``R@k unseen``: the share of the test split's assignments of labels without a training
document (those in the label index, zero-shot labels, plus ``n_unknown``, the assignments of
labels outside it) found in their document's top k: 0 for a model that cannot predict them.
``P@k seen``: precision at k counting only labels with training documents as relevant: what
the zero-shot labels cost the others (they take places in the top k).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xmc_core.evaluation.metrics import Predictions, _precision, _rank_against

RECALL_KS = (5, 10)
PRECISION_KS = (1, 5)


def unseen_metrics(
    Y_true: sp.spmatrix, Y_pred: Predictions, train_label_counts: np.ndarray, n_unknown: int
) -> dict[str, float]:
    """``R@5 unseen``, ``R@10 unseen`` (when the split has assignments of unseen labels),
    ``P@1 seen`` and ``P@5 seen``. ``Y_true``: csr (n_docs, n_labels) over the label index;
    ``train_label_counts``: (n_labels,) training documents per label."""
    Y = sp.csr_matrix(Y_true)
    unseen = sp.diags((np.asarray(train_label_counts) == 0).astype(np.float32))
    seen = sp.diags((np.asarray(train_label_counts) > 0).astype(np.float32))
    kmax = max(*RECALL_KS, *PRECISION_KS)
    out = {
        f"P@{k} seen": _precision(_rank_against(Y @ seen, Y_pred, kmax), k) for k in PRECISION_KS
    }
    Y_unseen = sp.csr_matrix(Y @ unseen)
    Y_unseen.eliminate_zeros()
    total = Y_unseen.nnz + n_unknown
    if total:
        hits = _rank_against(Y_unseen, Y_pred, kmax).hits
        out |= {f"R@{k} unseen": float(hits[:, :k].sum() / total) for k in RECALL_KS}
    return out
