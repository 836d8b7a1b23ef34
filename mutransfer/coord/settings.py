"""What a coordinate check runs: widths (or depths), parameterizations, optimizer, steps, seeds,
model size, and how it is judged.

The one place for its defaults: `mutransfer coord-check` takes its option defaults from
`CoordSettings()`, and `mutransfer.coord_check(settings)` runs one. No heavy imports, so
building the CLI parser stays light.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ConfigDict, with_config

from mutransfer.analysis_defaults import COORD_ALPHA, COORD_TOLERANCE
from mutransfer.param.config import PARAMETERIZATIONS

DEFAULT_LR = {"adam": 3e-3, "sgd": 0.1}
SEEDS = 8  # seeds 0..SEEDS-1: verdicts agree across disjoint sets (docs/parameterizations.md)
WIDTHS = [64, 128, 256, 512, 1024]  # the widths the seed-set table was measured at
DEPTH_WIDTH = 64  # the width a depth check (`depths`) holds fixed by default
MIN_WIDTH = 8


# the field types are checked (coord/check.py) as pydantic reads them, strictly: a width "64",
# seeds 3 or params "sp" are refused, not run as the string's letters
@with_config(ConfigDict(strict=True, revalidate_instances="always"))
@dataclass
class CoordSettings:
    widths: list[int] = field(default_factory=lambda: list(WIDTHS))
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
    # a depth check: slopes against log2 n_layer over `depths`, at the one width `widths[0]`
    depths: list[int] | None = None
    depth_param: str | None = None  # sets param.depth, where the config has that field
    # further param fields of the depth rule, dotted: {"depth_alpha": 0.75,
    # "depth_exponents.conv.lr_adam": 0.2}
    depth_fields: dict | None = None
    tolerance: float = COORD_TOLERANCE  # largest |slope| that counts as flat
    alpha: float = COORD_ALPHA  # family-wise error rate of the violations (Holm)

    def __post_init__(self) -> None:
        # an optimizer that is no name (a list: unhashable) is refused by check_settings
        if self.lr is None and isinstance(self.optimizer, str) and self.optimizer in DEFAULT_LR:
            self.lr = DEFAULT_LR[self.optimizer]

    @property
    def axis(self) -> str:
        """The column the slopes are taken against: `width`, or `n_layer` in a depth check."""
        return "n_layer" if self.depths else "width"

    def points(self) -> list[tuple[int, int]]:
        """The (width, n_layer) of every model the check builds, per parameterization and seed."""
        if self.depths:
            return [(self.widths[0], d) for d in sorted(set(self.depths))]
        return [(w, self.n_layer) for w in sorted(set(self.widths))]
