"""A small combined scorer: logistic regression over fuzzy variants and length features.

No single similarity agrees well with a judge on open-ended answers; a few cheap signals together
do a little better. The model is fitted on a project's own labels by IRLS (Newton's method) in
pure Python, and is stored as a handful of named weights, so it is inspectable, needs no numpy or
scikit-learn, and scores a pair in microseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

FEATURES = ("token_sort", "ratio", "token_set", "length_ratio", "log_length_ratio")


def features(candidate: str, reference: str) -> list[float]:
    """The signals the model combines, each in a small range."""
    from rapidfuzz import fuzz, utils

    proc = utils.default_process
    c_len, r_len = max(len(candidate), 1), max(len(reference), 1)
    return [
        fuzz.token_sort_ratio(candidate, reference, processor=proc) / 100,
        fuzz.ratio(candidate, reference, processor=proc) / 100,
        fuzz.token_set_ratio(candidate, reference, processor=proc) / 100,
        min(c_len, r_len) / max(c_len, r_len),
        math.log(c_len / r_len),
    ]


@dataclass
class Logistic:
    """P(equivalent) = sigmoid(bias + sum(weight * standardized feature))."""

    weights: list[float]
    bias: float
    mean: list[float]
    scale: list[float]
    names: list[str] = field(default_factory=lambda: list(FEATURES))

    def probability(self, row: Sequence[float]) -> float:
        z = self.bias + sum(
            w * (x - m) / s
            for w, x, m, s in zip(self.weights, row, self.mean, self.scale, strict=True)
        )
        return 1 / (1 + math.exp(-max(-30.0, min(30.0, z))))

    def as_dict(self) -> dict[str, object]:
        return {
            "names": self.names,
            "weights": self.weights,
            "bias": self.bias,
            "mean": self.mean,
            "scale": self.scale,
        }


def _standardize(rows: Sequence[Sequence[float]]) -> tuple[list[float], list[float]]:
    cols = list(zip(*rows, strict=True))
    mean = [sum(c) / len(c) for c in cols]
    scale = [
        math.sqrt(sum((x - m) ** 2 for x in c) / len(c)) or 1.0
        for c, m in zip(cols, mean, strict=True)
    ]
    return mean, scale


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Solve a small dense system by Gaussian elimination with partial pivoting."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x


def fit(
    rows: Sequence[Sequence[float]], labels: Sequence[int], l2: float = 1.0, steps: int = 25
) -> Logistic:
    """Fit by IRLS with a small ridge penalty (so separable or collinear features stay finite)."""
    mean, scale = _standardize(rows)
    xs = [[1.0] + [(x - m) / s for x, m, s in zip(r, mean, scale, strict=True)] for r in rows]
    beta = [0.0] * len(xs[0])
    for _ in range(steps):
        p = [1 / (1 + math.exp(-max(-30.0, min(30.0, _dot(beta, x))))) for x in xs]
        grad = [
            sum((y - pi) * x[j] for x, y, pi in zip(xs, labels, p, strict=True))
            for j in range(len(beta))
        ]
        hess = [
            [
                sum(pi * (1 - pi) * x[i] * x[j] for x, pi in zip(xs, p, strict=True))
                for j in range(len(beta))
            ]
            for i in range(len(beta))
        ]
        for j in range(1, len(beta)):  # the bias is not penalised
            grad[j] -= l2 * beta[j]
            hess[j][j] += l2
        delta = _solve(hess, grad)
        beta = [b + d for b, d in zip(beta, delta, strict=True)]
        if max(abs(d) for d in delta) < 1e-8:
            break
    return Logistic(beta[1:], beta[0], mean, scale)


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))
