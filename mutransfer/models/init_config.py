"""Config of SSM initialization schemes (Liu & Li, ICLR 2025) and of the S4D mixer."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mutransfer.configbase import StrictModel


class DtInit(StrictModel):
    scheme: Literal["log_uniform", "autocorr"] = "log_uniform"
    kappa: float = Field(1.0, gt=0)
    spread: float = Field(10.0, ge=1)


class ImagInit(StrictModel):
    scheme: Literal["default", "memory"] = "default"
    min_separation: float = Field(0.0, ge=0)


class S4DOptions(StrictModel):
    init: Literal["lin", "inv", "legs", "real"] = "lin"
    discretization: Literal["zoh", "bilinear"] = "zoh"
    output: Literal["glu", "gated"] = "glu"
