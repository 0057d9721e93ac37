"""Ranking losses computed within groups of the same (task, hardware), never across groups."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def lambda_rank_loss(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, sigma: float = 1.0) -> torch.Tensor:
    """LambdaRank (NDCG-weighted pairwise logistic loss).

    ``scores``, ``labels`` and ``mask`` are (groups, programs) tensors; each row is one group, padded
    where ``mask`` is False. A pair (i, j) with label_i > label_j contributes
    ``|dNDCG_ij| * log(1 + exp(-sigma (s_i - s_j)))``, where dNDCG is the NDCG change of swapping
    the two in the current ranking (gains 2^label - 1, discounts log2(1 + rank)).
    """
    masked_scores = scores.detach().masked_fill(~mask, float("-inf"))
    order = masked_scores.argsort(dim=1, descending=True)
    positions = torch.arange(1, scores.shape[1] + 1, device=scores.device, dtype=scores.dtype).expand_as(scores)
    ranks = torch.empty_like(scores).scatter_(1, order, positions)
    gains = torch.where(mask, torch.pow(2.0, labels) - 1.0, torch.zeros_like(labels))
    ideal = gains.sort(dim=1, descending=True).values
    idcg = (ideal / torch.log2(1.0 + positions)).sum(dim=1, keepdim=True).clamp_min(1e-9)
    gain = gains / idcg
    inv_discount = 1.0 / torch.log2(1.0 + ranks)
    delta = (gain[:, :, None] - gain[:, None, :]).abs() * (inv_discount[:, :, None] - inv_discount[:, None, :]).abs()
    pairs = (labels[:, :, None] > labels[:, None, :]) & mask[:, :, None] & mask[:, None, :]
    diff = scores[:, :, None] - scores[:, None, :]
    loss = delta * F.softplus(-sigma * diff)
    count = pairs.sum()
    if count == 0:
        return scores.sum() * 0.0
    return (loss * pairs).sum() / count * 1000.0  # rescaled: NDCG deltas are tiny


def pairwise_logistic_loss(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """RankNet: log(1 + exp(-(s_i - s_j))) over every pair with label_i > label_j, equally weighted
    (optimises pairwise order, i.e. PCA, directly)."""
    pairs = (labels[:, :, None] > labels[:, None, :]) & mask[:, :, None] & mask[:, None, :]
    diff = scores[:, :, None] - scores[:, None, :]
    count = pairs.sum()
    if count == 0:
        return scores.sum() * 0.0
    return (F.softplus(-diff) * pairs).sum() / count


def mse_loss(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Squared error against the label (min latency of the group / latency)."""
    diff = (scores - labels) * mask
    return (diff * diff).sum() / mask.sum().clamp_min(1)


LOSSES = {"lambdarank": lambda_rank_loss, "pairwise": pairwise_logistic_loss, "mse": mse_loss}
