"""Config of a parameterization: its name and per-role overrides of the table."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, model_validator

from mutransfer.configbase import StrictModel

Role = Literal["embedding", "hidden", "vector", "ssm_B", "ssm_C", "readout"]
ROLES: tuple[str, ...] = get_args(Role)
ParamName = Literal["sp", "mup", "spectral", "mup_ssm"]
PARAMETERIZATIONS: tuple[str, ...] = get_args(ParamName)
DepthName = Literal["none", "depth_mup", "completep"]
DEPTHS: tuple[str, ...] = get_args(DepthName)
# the in-block tensors a depth rule gives their own exponents (mutransfer/param/depth.py says
# which parameter is which); "norm": the other in-block vectors (the block's norm gain)
DepthTensor = Literal["hidden", "out_proj", "ssm_B", "ssm_C", "conv", "A_log", "dt", "D",
                      "norm"]
DEPTH_TENSORS: tuple[str, ...] = get_args(DepthTensor)
# the tensors whose init is a random draw a depth exponent can rescale (their weights only)
DEPTH_INIT_TENSORS = ("hidden", "out_proj", "ssm_B", "ssm_C", "conv", "dt")


class RoleOverride(StrictModel):
    """Any entry of a role's rule; unset entries keep the table's value (see param/tables.py)."""

    init_m: float | None = None
    init_n: float | None = None
    init_mult: float | None = Field(None, gt=0)
    lr_adam_m: float | None = None
    lr_adam_n: float | None = None
    lr_sgd_m: float | None = None
    lr_sgd_n: float | None = None
    lr_mult: float | None = Field(None, gt=0)
    mult_m: float | None = None
    wd: Literal["scaled", "independent", "none"] | None = None


class DepthExponents(StrictModel):
    """Powers of r = n_layer / base_n_layer on one in-block tensor's LR and init (unset: the
    preset's, from α: Adam α-1, SGD 2α-1, init 0)."""

    lr_adam: float | None = Field(None, description=(
        "LR x r^this under Adam/AdamW, on top of the width rule (default: alpha - 1)"))
    lr_sgd: float | None = Field(None, description=(
        "LR x r^this under SGD, on top of the width rule (default: 2 alpha - 1)"))
    init: float | None = Field(None, description=(
        "weight init x r^this, relative to its value at base_n_layer (default: 0); only the "
        "weights of hidden, out_proj, ssm_B, ssm_C, conv and dt"))


class ParamConfig(StrictModel):
    name: ParamName = "sp"
    overrides: dict[Role, RoleOverride] = {}
    depth: DepthName = Field("none", description=(
        "depth parameterization (mutransfer/param/depth.py): none (today's model at every "
        "depth), depth_mup (each residual branch x (L/L_base)^-1/2) or completep (x "
        "(L/L_base)^-1), with their LR, init and Adam eps rules; L_base is "
        "model.base_n_layer"))
    depth_alpha: float | None = Field(None, description=(
        "the residual exponent alpha of the depth parameterization (CompleteP's "
        "depth_alpha_exp): each residual branch x (L/L_base)^-alpha; default the preset's "
        "(depth_mup 0.5, completep 1); needs param.depth depth_mup or completep"))
    depth_exponents: dict[DepthTensor, DepthExponents] = Field({}, description=(
        "per in-block tensor (hidden, out_proj, ssm_B, ssm_C, conv, A_log, dt, D, norm): "
        "powers of "
        "L/L_base on its LR and init, replacing the preset's; needs param.depth depth_mup or "
        "completep"))

    @model_validator(mode="after")
    def _depth_fields_need_a_depth_parameterization(self) -> ParamConfig:
        given = [f for f in ("depth_alpha", "depth_exponents") if getattr(self, f)]
        if self.depth == "none" and given:
            raise ValueError(f"param.{given[0]} needs a depth parameterization: set "
                             f"param.depth to depth_mup or completep (whose values it replaces)")
        for tensor, exps in self.depth_exponents.items():
            if exps.init not in (None, 0.0) and tensor not in DEPTH_INIT_TENSORS:
                raise ValueError(f"param.depth_exponents.{tensor}.init: {tensor} keeps its "
                                 f"module's init (an init exponent applies to "
                                 f"{', '.join(DEPTH_INIT_TENSORS)})")
        return self
