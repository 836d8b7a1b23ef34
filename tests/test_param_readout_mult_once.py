"""A user model whose readout is mutransfer's own ScaledLinear, called through its forward,
and which multiplies its logits by `readout_mult` as docs/models.md asks: the readout
multiplier (1/m under muP) is applied once, on readout_mult. It was also put on the module's
own `mult`, so such a model's logits were multiplied by 1/m²."""

from __future__ import annotations

import torch
import torch.nn as nn

from mutransfer.config import TrialConfig
from mutransfer.data.base import DataSpec
from mutransfer.models.build import build_model
from mutransfer.models.layers import ScaledEmbedding, ScaledLinear

VOCAB, BASE = 32, 32
SPEC = DataSpec(kind="tokens", vocab_size=VOCAB, input_dim=None, output_dim=VOCAB, loss="ce")


class OwnReadout(nn.Module):
    """Embedding -> ScaledLinear readout called as a module, logits times readout_mult."""

    def __init__(self, width: int, vocab_size: int = VOCAB) -> None:
        super().__init__()
        self.emb = ScaledEmbedding(vocab_size, width)
        self.head = ScaledLinear(width, vocab_size, role="readout", base_in=BASE)
        self.readout_mult = 1.0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(ids)) * self.readout_mult


def test_the_logits_are_multiplied_by_one_over_m_once():
    cfg = TrialConfig(width=4 * BASE, param={"name": "mup"},
                      model={"arch": "tests.test_param_readout_mult_once:OwnReadout",
                             "base_width": BASE})
    torch.manual_seed(0)
    model = build_model(cfg, SPEC)
    ids = torch.randint(0, VOCAB, (2, 5))
    with torch.no_grad():
        expected = model.emb(ids) @ model.head.weight.t() / 4
        assert torch.allclose(model(ids), expected, atol=1e-6)
