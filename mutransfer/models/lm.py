"""The backbone shared by every mixer: embedding, pre-norm residual blocks, final norm, head.

As `mamba_ssm.models.mixer_seq_simple.MixerModel`: x = x + mixer(norm(x)) per block, then
norm_f and a readout tied to the embedding by default. For real-valued inputs (synthetic
regression tasks) a linear encoder replaces the embedding and the readout is untied.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn

from mutransfer.models.layers import RMSNorm, ScaledEmbedding, ScaledLinear
from mutransfer.models.trace import record


class Block(nn.Module):
    """x + branch_mult · mixer(norm(x)): one residual branch (Mamba's block has no MLP).

    `branch_mult` is set by a depth parameterization (mutransfer/param/depth.py): (L/L_base)^-α;
    1 without one, and then the branch is added as is.
    """

    def __init__(self, d_model: int, mixer: nn.Module) -> None:
        super().__init__()
        self.norm = RMSNorm(d_model)
        self.mixer = mixer
        self.branch_mult = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.mixer(self.norm(x))
        return x + (y * self.branch_mult if self.branch_mult != 1.0 else y)


class SequenceModel(nn.Module):
    """Embedding (or linear encoder) -> blocks -> norm_f -> readout."""

    def __init__(self, d_model: int, base_d_model: int, n_layer: int,
                 make_mixer: Callable[[int], nn.Module], *, vocab_size: int | None = None,
                 input_dim: int | None = None, output_dim: int, tie_embeddings: bool = True,
                 embedding_std: float = ScaledEmbedding.REF_STD) -> None:
        super().__init__()
        if (vocab_size is None) == (input_dim is None):
            raise ValueError("give exactly one of vocab_size (tokens) or input_dim (real inputs)")
        self.d_model = d_model
        if vocab_size is not None:
            self.embedding: nn.Module = ScaledEmbedding(vocab_size, d_model, embedding_std)
        else:
            self.embedding = ScaledLinear(input_dim, d_model, role="embedding", base_in=input_dim)
        self.layers = nn.ModuleList(Block(d_model, make_mixer(i)) for i in range(n_layer))
        self.norm_f = RMSNorm(d_model)
        self.tied = tie_embeddings and vocab_size is not None and output_dim == vocab_size
        self.lm_head = None if self.tied else ScaledLinear(d_model, output_dim, role="readout",
                                                           base_in=base_d_model)
        self.readout_mult = 1.0  # logits multiplier (muP's 1/m), set by the parameterization

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        x = self.embedding(inputs)
        record("embedding", x)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            record(f"layer{i}.block_out", x)
        x = self.norm_f(x)
        if self.tied:
            logits = x @ self.embedding.weight.t()
        else:
            logits = x @ self.lm_head.weight.t()
        logits = logits * self.readout_mult
        record("logits", logits)
        return logits
