"""What a parameterization may change in a module: the std of its `weight`, by rescaling.

Model layers (mutransfer/models/layers.py, models/s4d.py) implement it; mutransfer/param/apply.py
acts on it. It lives here, below the models, so that param/ never imports models/.
"""

from __future__ import annotations

import torch
import torch.nn as nn


class RescalableWeight:
    """A module's `weight` whose std a parameterization sets by rescaling it (never re-drawing).

    `init_scale` is the weight's std over the reference std at the base shape (the module
    starts it at its own reference init); `width_mult(m)` is the width ratio its init rule
    follows; `depth_init_exp` the power of n_layer in its reference init, which a depth
    parameterization takes back to its value at the base depth. Nothing else of the module is
    touched: every other parameter keeps the init its module gave it (mutransfer/param/apply.py
    checks that).
    """

    weight: nn.Parameter
    init_scale: float = 1.0
    depth_init_exp: float = 0.0  # its reference init ∝ n_layer^this (param/depth.py undoes it)

    def width_mult(self, m: float) -> float:
        return m

    def rescale_init(self, scale: float) -> None:
        """Make the weight's std the base-shape reference std times `scale`, by multiplying."""
        with torch.no_grad():
            self.weight.mul_(scale / self.init_scale)
        self.init_scale = scale
