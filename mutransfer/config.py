"""The config of one trial: model, parameterization, width, training and data."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from mutransfer.configbase import StrictModel
from mutransfer.data.config import DataConfig
from mutransfer.param.config import ParamConfig, Role
from mutransfer.ssm_config import DtInit, ImagInit, S4DOptions

BUILTIN_ARCHS = ("mamba", "s4d")
FACTORY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
                             r":[A-Za-z_][A-Za-z0-9_]*$")


class ModelConfig(StrictModel):
    arch: str = Field("mamba", description=(
        "mamba, s4d, or any model: package.module:factory, called as factory(width, "
        "**options) (and vocab_size= when it takes one); see docs/models.md"))
    options: dict[str, Any] = Field({}, description=(
        "keyword arguments of a `package.module:factory` arch (not used by mamba and s4d)"))
    roles: dict[str, Role] | None = Field(None, description=(
        "parameter name glob -> role (first match wins); every parameter must match one. "
        "None: the roles the modules declare (param_roles), else inferred from two widths"))
    loss: Literal["lm", "custom"] = Field("lm", description=(
        "lm: the model maps token ids (b, L) to logits (b, L, vocab) and the data's loss "
        "applies; custom: model(inputs, targets) returns the loss itself"))
    n_layer: int = Field(2, ge=1)
    d_state: int = Field(16, ge=1)
    base_d_state: int | None = Field(None, ge=1)  # d_state at the base shape; default d_state
    expand: int = Field(2, ge=1)
    d_conv: int = Field(4, ge=1)
    base_width: int = Field(64, ge=8)
    tie_embeddings: bool = True  # readout = the token embedding (as the reference)
    embedding_std: float = Field(0.02, gt=0)  # token embedding init std (the reference: 0.02)
    dt_min: float = Field(0.001, gt=0)
    dt_max: float = Field(0.1, gt=0)
    dt_init_floor: float = Field(1e-4, gt=0)
    scan_backend: Literal["auto", "reference", "chunked", "triton", "mamba_ssm"] = "auto"
    dt_init: DtInit = DtInit()
    zero_real_fraction: float = Field(0.0, ge=0, le=1)
    keep_nonpositive: bool = False  # clamp Re(A) <= 0 during training
    imag_init: ImagInit = ImagInit()
    s4d: S4DOptions = S4DOptions()

    @field_validator("arch")
    @classmethod
    def _arch_name(cls, value: str) -> str:
        if value not in BUILTIN_ARCHS and not FACTORY_PATTERN.match(value):
            raise ValueError(f"{value!r} is neither a built-in arch ({', '.join(BUILTIN_ARCHS)}) "
                             "nor package.module:factory")
        return value

    @property
    def builtin(self) -> bool:
        """mamba or s4d (the package's own models), not a user factory."""
        return self.arch in BUILTIN_ARCHS

    @model_validator(mode="after")
    def _factory_fields(self) -> ModelConfig:
        if self.builtin and self.options:
            raise ValueError(f"options are the keyword arguments of a package.module:factory "
                             f"arch; {self.arch} takes its settings from the model fields")
        if self.builtin and self.loss == "custom":
            raise ValueError(f"loss: custom is for a package.module:factory arch; {self.arch} "
                             "returns logits")
        return self

    @model_validator(mode="after")
    def _dt_range(self) -> ModelConfig:
        if self.dt_min > self.dt_max:
            raise ValueError(f"dt_min ({self.dt_min}) is above dt_max ({self.dt_max})")
        return self


class TrainConfig(StrictModel):
    optimizer: Literal["adam", "adamw", "sgd"] = "adamw"
    lr: float = Field(1e-3, gt=0)
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = Field(1e-8, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    schedule: Literal["constant", "cosine", "linear"] = "constant"
    warmup: int = Field(0, ge=0)
    min_lr_ratio: float = Field(0.0, ge=0, le=1)
    steps: int | None = Field(200, ge=1)
    tokens: int | None = Field(None, ge=1)  # token budget; overrides steps when set
    batch_size: int = Field(8, ge=1)
    seq_len: int = Field(128, ge=2)
    eval_every: int = Field(50, ge=1)
    eval_batches: int = Field(4, ge=1)
    grad_clip: float | None = Field(1.0, gt=0)
    seed: int = 0
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    # Divergence (mutransfer/divergence.py; docs/results-format.md, "Divergence")
    diverge_delta: float = Field(1.0, gt=0, description=(
        "nats above the initial eval loss that count as worse than the start: a trial has "
        "diverged when its smoothed train loss stays above initial + this for "
        "diverge_patience steps (or an eval loss and the smoothed train loss are both above "
        "it); a non-finite loss is divergence at once"))
    diverge_smoothing: float = Field(0.9, ge=0, lt=1, description=(
        "EMA factor per step of the smoothed train loss (0: the raw minibatch loss); it starts "
        "at the initial eval loss"))
    diverge_patience: int = Field(10, ge=1, description=(
        "consecutive steps the smoothed train loss must stay above the bound before the trial "
        "counts as diverged (smoothing 0 and patience 1: one minibatch above it is enough)"))

    @property
    def total_steps(self) -> int:
        if self.tokens is not None:
            return max(1, self.tokens // (self.batch_size * self.seq_len))
        return self.steps or 1


class TrialConfig(StrictModel):
    width: int = Field(128, ge=8)
    model: ModelConfig = ModelConfig()
    param: ParamConfig = ParamConfig()
    train: TrainConfig = TrainConfig()
    data: DataConfig = DataConfig()

    @model_validator(mode="after")
    def _width_vs_base(self) -> TrialConfig:
        if self.width < self.model.base_width:
            raise ValueError(
                f"width {self.width} is below model.base_width {self.model.base_width}")
        return self
