"""A factory model whose readout is a plain nn.Linear with its default bias and no
`readout_mult`: the parameterization's 1/m multiplier goes on a forward hook, and it scales
W·x only, as the mup library's MuReadout does (its forward is Linear(x · output_mult / m):
the bias is added as is). The hook used to multiply the whole output, bias included, so a
readout bias (role vector: Adam LR η at every width) started and moved 1/m times as much as
at the base width."""

from __future__ import annotations

import torch
import torch.nn as nn

from mutransfer.config import TrialConfig
from mutransfer.data.base import DataSpec
from mutransfer.models.build import build_model

VOCAB = 32
SPEC = DataSpec(kind="tokens", vocab_size=VOCAB, input_dim=None, output_dim=VOCAB, loss="ce")


class BiasedHead(nn.Module):
    """Embedding -> nn.Linear readout with a bias (PyTorch's default), no readout_mult."""

    def __init__(self, width: int, vocab_size: int = VOCAB) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab_size, width)
        self.hid = nn.Linear(width, width, bias=False)
        self.head = nn.Linear(width, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.hid(self.emb(ids)))


def built(width: int) -> nn.Module:
    cfg = TrialConfig(width=width, param={"name": "mup"},
                      model={"arch": "tests.test_param_readout_hook_bias:BiasedHead",
                             "base_width": 32})
    torch.manual_seed(0)
    return build_model(cfg, SPEC)


def test_the_readout_hook_multiplies_w_x_by_one_over_m_and_adds_the_bias_as_is():
    model = built(128)  # m = 4
    ids = torch.randint(0, VOCAB, (2, 5))
    with torch.no_grad():
        features = model.hid(model.emb(ids))
        expected = features @ model.head.weight.t() / 4 + model.head.bias
        assert torch.allclose(model(ids), expected, atol=1e-6)


def test_a_change_of_the_readout_bias_moves_the_logits_by_as_much_at_every_width():
    ids = torch.randint(0, VOCAB, (1, 3))
    for width in (32, 128):
        model = built(width)
        with torch.no_grad():
            before = model(ids)
            model.head.bias.add_(0.5)
            assert torch.allclose(model(ids) - before, torch.full_like(before, 0.5),
                                  atol=1e-5), width
