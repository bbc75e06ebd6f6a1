"""Fitting the graph-attention ranker (`kg_mcp.kg_reasoner.gnn_ranker`) to hops whose gold candidates are known.

Adam on the listwise loss, in shuffled mini-batches; the epoch with the lowest validation loss is
kept. Numpy only, a few minutes on two cores for thousands of hops.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kg_mcp.kg_reasoner.gnn_ranker import Hop, Params, gather, loss_and_grads


@dataclass
class FitReport:
    epochs: int
    train_loss: float
    validation_loss: float
    best_epoch: int
    seconds: float


def mean_loss(params: Params, vectors: np.ndarray, hops: Sequence[Hop], batch_size: int = 64) -> float:
    total = 0.0
    for start in range(0, len(hops), batch_size):
        chunk = hops[start : start + batch_size]
        total += loss_and_grads(params, gather(vectors, chunk))[0] * len(chunk)
    return total / max(1, len(hops))


def fit(
    vectors: np.ndarray,
    train: Sequence[Hop],
    validation: Sequence[Hop],
    *,
    seed: int = 0,
    epochs: int = 8,
    batch_size: int = 32,
    learning_rate: float = 3e-3,
    max_seconds: float = 420.0,
) -> tuple[Params, FitReport]:
    """Parameters fitted to `train` (text vectors in `vectors`), chosen by their loss on `validation`."""
    started = time.monotonic()
    rng = np.random.default_rng(seed)
    params = Params.initial(seed)
    names = list(params.arrays())
    moments = {n: np.zeros_like(getattr(params, n)) for n in names}
    squares = {n: np.zeros_like(getattr(params, n)) for n in names}
    best = (mean_loss(params, vectors, validation), params_copy(params), 0)
    step = 0
    train_loss = float("nan")
    epoch = 0
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(train))
        losses = []
        for start in range(0, len(order), batch_size):
            loss, grads = loss_and_grads(params, gather(vectors, [train[i] for i in order[start : start + batch_size]]))
            losses.append(loss)
            step += 1
            for n in names:  # Adam (beta1 0.9, beta2 0.999)
                g = getattr(grads, n)
                moments[n] = 0.9 * moments[n] + 0.1 * g
                squares[n] = 0.999 * squares[n] + 0.001 * g * g
                m_hat = moments[n] / (1 - 0.9**step)
                v_hat = squares[n] / (1 - 0.999**step)
                setattr(params, n, getattr(params, n) - learning_rate * m_hat / (np.sqrt(v_hat) + 1e-8))
        train_loss = float(np.mean(losses)) if losses else float("nan")
        validation_loss = mean_loss(params, vectors, validation)
        if validation_loss < best[0]:
            best = (validation_loss, params_copy(params), epoch)
        if time.monotonic() - started > max_seconds:
            break
    report = FitReport(epoch, train_loss, best[0], best[2], time.monotonic() - started)
    return best[1], report


def params_copy(params: Params) -> Params:
    return Params(**{n: a.copy() for n, a in params.arrays().items()})
