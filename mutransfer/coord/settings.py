"""What a coordinate check runs: widths, parameterizations, optimizer, steps, seeds, model size.

The one place for its defaults: `mutransfer coord-check` takes its option defaults from
`CoordSettings()`. No heavy imports, so building the CLI parser stays light.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mutransfer.param.config import PARAMETERIZATIONS

DEFAULT_LR = {"adam": 3e-3, "sgd": 0.1}
SEEDS = 8  # seeds 0..SEEDS-1: verdicts agree across disjoint sets (docs/parameterizations.md)


@dataclass
class CoordSettings:
    widths: list[int] = field(default_factory=lambda: [64, 128, 256, 512, 1024])
    params: list[str] = field(default_factory=lambda: list(PARAMETERIZATIONS))
    optimizer: str = "adam"
    lr: float | None = None  # None: DEFAULT_LR of the optimizer
    steps: int = 3
    seeds: list[int] = field(default_factory=lambda: list(range(SEEDS)))
    base_width: int | None = None  # None: the smallest width
    n_layer: int = 2
    d_state: int = 16
    batch_size: int = 4
    seq_len: int = 32
    overrides: dict | None = None  # parameterization -> role -> entry -> value
    model: dict | None = None  # further ModelConfig fields, e.g. {"tie_embeddings": False}

    def __post_init__(self) -> None:
        if self.lr is None:
            self.lr = DEFAULT_LR[self.optimizer]
