"""A small causal transformer (GPT-style, pre-LayerNorm) for mutransfer's any-model seam.

    model: {arch: "examples.tiny_gpt:tiny_gpt", base_width: 64, options: {n_layer: 2}}

`tiny_gpt(width, vocab_size, ...)` returns a module mapping token ids (b, L) to logits
(b, L, vocab). Heads are `head_dim` wide, so their number grows with width. Every layer keeps
PyTorch's default init (Linear: std ∝ 1/√fan_in), which is what mutransfer's tables expect of a
factory's model; the token and position embeddings are N(0, 1), width-independent. The readout
multiplier hook: `readout_mult` (1.0), which the forward multiplies the logits by and the
parameterization sets (1/m under mup). Roles need not be given: mutransfer infers them by
building the model at two widths (`mutransfer roles examples/tiny_gpt.yaml` prints them).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, width: int, head_dim: int) -> None:
        super().__init__()
        self.n_head = width // head_dim
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width, bias=False)
        self.fc_out = nn.Linear(4 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, length, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=-1)
        q, k, v = (t.view(b, length, self.n_head, -1).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, length, width))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    """Token + position embedding -> blocks -> LayerNorm -> untied readout (× readout_mult)."""

    def __init__(self, width: int, vocab_size: int, n_layer: int, head_dim: int,
                 max_len: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab_size, width)
        self.pos = nn.Embedding(max_len, width)
        self.blocks = nn.ModuleList(Block(width, head_dim) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size, bias=False)
        self.readout_mult = 1.0  # the parameterization sets it (muP: 1/m)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.tok(ids) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x)) * self.readout_mult


def tiny_gpt(width: int, vocab_size: int = 256, n_layer: int = 2, head_dim: int = 16,
             max_len: int = 1024) -> TinyGPT:
    """The factory mutransfer calls: `model.arch: examples.tiny_gpt:tiny_gpt`."""
    if width % head_dim:
        raise ValueError(f"width {width} is not a multiple of head_dim {head_dim}")
    return TinyGPT(width, vocab_size, n_layer, head_dim, max_len)
