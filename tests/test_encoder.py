"""The lean encoder must compute what PyTorch's reference encoder computes on the same weights (so
models saved before it load and score the same), and padding must not change a program's score."""

import numpy as np
import torch
from torch import nn

from crosstune import tokens
from crosstune.features import OP_FEATURES, SUMMARY_FEATURES
from crosstune.hardware.registry import FEATURE_NAMES
from crosstune.models.crossfeat import CrossFeatConfig, CrossFeatNet
from crosstune.models.encoder import Encoder


def test_encoder_matches_pytorch_reference_with_the_same_weights():
    torch.manual_seed(0)
    reference = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(32, 4, 64, 0.0, activation="gelu", batch_first=True, norm_first=True),
        2, enable_nested_tensor=False).eval()
    ours = Encoder(32, 4, 64, 0.0, 2).eval()
    ours.load_state_dict(reference.state_dict())  # strict: every parameter name must match
    x = torch.randn(6, 11, 32)
    keep = torch.ones(6, 11, dtype=torch.bool)
    keep[2, 7:] = False
    keep[5, 3:] = False
    with torch.no_grad():
        expected = reference(x, src_key_padding_mask=~keep)
        got = ours(x, keep)
    assert torch.allclose(got[keep], expected[keep], atol=1e-5)


def _inputs(batch: int, length: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    return {
        "kinds": torch.randint(1, len(tokens.KINDS), (batch, length), generator=generator),
        "cats": torch.zeros(batch, length, dtype=torch.long),
        "args": torch.randn(batch, length, tokens.NUM_ARGS, generator=generator),
        "mask": torch.ones(batch, length, dtype=torch.bool),
        "ordinal": torch.zeros(batch, length, dtype=torch.long),
        "summary": torch.randn(batch, SUMMARY_FEATURES, generator=generator),
        "op_kind": torch.zeros(batch, dtype=torch.long),
        "op": torch.randn(batch, OP_FEATURES, generator=generator),
        "hw": torch.randn(batch, len(FEATURE_NAMES), generator=generator),
        "twos": torch.randint(0, 7, (batch, length, tokens.NUM_ARGS), generator=generator, dtype=torch.uint8),
    }


def test_padding_does_not_change_a_programs_score():
    torch.manual_seed(0)
    net = CrossFeatNet(CrossFeatConfig(d_model=32, ff_dim=64)).eval()
    inputs = _inputs(4, 9, torch.Generator().manual_seed(1))
    padded = dict(inputs)
    for key in ("kinds", "cats", "ordinal"):
        padded[key] = torch.cat([inputs[key], torch.zeros(4, 5, dtype=torch.long)], dim=1)
    padded["args"] = torch.cat([inputs["args"], torch.full((4, 5, tokens.NUM_ARGS), 7.0)], dim=1)
    padded["twos"] = torch.cat([inputs["twos"], torch.full((4, 5, tokens.NUM_ARGS), 5, dtype=torch.uint8)], dim=1)
    padded["mask"] = torch.cat([inputs["mask"], torch.zeros(4, 5, dtype=torch.bool)], dim=1)
    with torch.no_grad():
        assert np.allclose(net(**inputs).numpy(), net(**padded).numpy(), atol=1e-5)


def test_length_buckets_cover_every_row_once_and_cut_at_the_slack():
    from crosstune.train import length_buckets

    lengths = np.sort(np.random.default_rng(0).integers(8, 49, size=1300))
    slices = length_buckets(lengths, max_batch=512, slack=0.25, min_batch=16)
    assert slices[0][0] == 0 and slices[-1][1] == len(lengths)
    assert all(a[1] == b[0] for a, b in zip(slices, slices[1:]))  # contiguous, no row twice
    for start, stop in slices:
        assert 0 < stop - start <= 512
        if stop - start > 16:  # past the minimum size, no program longer than the slack allows
            assert lengths[stop - 1] <= lengths[start] * 1.25
    assert len(slices) > 3  # 8 to 48 tokens cannot share one bucket at 25%
    assert length_buckets(np.full(1200, 25)) == [(0, 512), (512, 1024), (1024, 1200)]
    assert length_buckets(np.array([], dtype=int)) == []


class _Programs:
    """What predict_scores reads of Features: each row's length, and the row count."""

    def __init__(self, lengths):
        self.lengths = lengths

    def __len__(self):
        return len(self.lengths)


def test_bucketed_prediction_scores_like_one_padded_batch(monkeypatch):
    """200 programs of 3 to 30 tokens: bucketed by length or all padded together, the scores agree."""
    from crosstune import train

    torch.manual_seed(0)
    net = CrossFeatNet(CrossFeatConfig(d_model=32, ff_dim=64)).eval()
    lengths = np.random.default_rng(2).integers(3, 31, size=200)
    generator = torch.Generator().manual_seed(3)
    programs = [_inputs(1, int(n), generator) for n in lengths]
    per_token = ("kinds", "cats", "args", "mask", "ordinal", "twos")

    def batch_tensors(_feats, rows, _device):
        width = int(lengths[rows].max())
        out = {}
        for key in programs[0]:
            parts = [programs[r][key] for r in rows]
            if key in per_token:  # pad the token axis (dim 1) to the batch's longest
                parts = [torch.nn.functional.pad(t, [0, 0] * (t.dim() - 2) + [0, width - t.shape[1]]) for t in parts]
            out[key] = torch.cat(parts, dim=0)
        return out

    with torch.no_grad():
        bucketed = train.predict_scores(net, batch_tensors, _Programs(lengths))
        monkeypatch.setattr(train, "length_buckets", lambda s: [(0, len(s))])
        together = train.predict_scores(net, batch_tensors, _Programs(lengths))
    assert np.allclose(bucketed, together, atol=1e-5)
