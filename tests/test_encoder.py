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
