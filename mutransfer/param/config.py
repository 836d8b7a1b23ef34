"""Config of a parameterization: its name and per-role overrides of the table."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from mutransfer.configbase import StrictModel

Role = Literal["embedding", "hidden", "vector", "ssm_B", "ssm_C", "readout"]
ROLES: tuple[str, ...] = get_args(Role)
ParamName = Literal["sp", "mup", "spectral", "mup_ssm"]
PARAMETERIZATIONS: tuple[str, ...] = get_args(ParamName)
DepthName = Literal["none", "depth_mup", "completep"]
DEPTHS: tuple[str, ...] = get_args(DepthName)


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


class ParamConfig(StrictModel):
    name: ParamName = "sp"
    overrides: dict[Role, RoleOverride] = {}
    depth: DepthName = Field("none", description=(
        "depth parameterization (mutransfer/param/depth.py): none (today's model at every "
        "depth), depth_mup (each residual branch x (L/L_base)^-1/2) or completep (x "
        "(L/L_base)^-1), with their LR, init and Adam eps rules; L_base is "
        "model.base_n_layer"))
