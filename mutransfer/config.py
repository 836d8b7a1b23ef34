"""The config of one trial: model, parameterization, width, training and data."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from mutransfer.configbase import StrictModel, cooldown_steps
from mutransfer.data.config import DataConfig
from mutransfer.param.config import ParamConfig, Role
from mutransfer.ssm_config import DtInit, ImagInit, Mamba2Options, S4DOptions

BUILTIN_ARCHS = ("mamba", "mamba2", "s4d")
FACTORY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
                             r":[A-Za-z_][A-Za-z0-9_]*$")


class ModelConfig(StrictModel):
    arch: str = Field("mamba", description=(
        "mamba, mamba2, s4d, or any model: package.module:factory, called as factory(width, "
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
    base_n_layer: int | None = Field(None, ge=1, description=(
        "n_layer at the base shape, L_base of the depth parameterization (param.depth); "
        "default n_layer"))
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
    mamba2: Mamba2Options = Mamba2Options()

    @field_validator("arch")
    @classmethod
    def _arch_name(cls, value: str) -> str:
        if value not in BUILTIN_ARCHS and not FACTORY_PATTERN.match(value):
            raise ValueError(f"{value!r} is neither a built-in arch ({', '.join(BUILTIN_ARCHS)}) "
                             "nor package.module:factory")
        return value

    @property
    def builtin(self) -> bool:
        """mamba, mamba2 or s4d (the package's own models), not a user factory."""
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
    def _mamba2_fields(self) -> ModelConfig:
        if self.arch != "mamba2":
            return self
        m2 = self.mamba2
        if m2.A_init_min > m2.A_init_max:
            raise ValueError(f"mamba2.A_init_min ({m2.A_init_min}) is above A_init_max "
                             f"({m2.A_init_max})")
        if self.scan_backend == "triton":
            raise ValueError("scan_backend triton has no SSD kernel for arch mamba2; use auto, "
                             "chunked, reference or mamba_ssm")
        if self.dt_init.scheme != "log_uniform" or self.zero_real_fraction > 0:
            raise ValueError("dt_init autocorr and zero_real_fraction are not implemented for "
                             "arch mamba2 (its A and Δ are per head)")
        mamba2_layout(self, self.base_width)
        return self

    @model_validator(mode="after")
    def _s4d_fields(self) -> ModelConfig:
        """S4D's modes are N/2 conjugate pairs (models/s4d.py): an odd d_state builds no
        model, which every trial of a sweep would find only when it starts."""
        if self.arch == "s4d" and self.d_state % 2:
            raise ValueError(f"d_state {self.d_state}: S4D needs an even d_state >= 2 (N/2 "
                             f"conjugate pairs)")
        return self

    @model_validator(mode="after")
    def _fields_fit_arch(self) -> ModelConfig:
        """A field the arch does not read keeps its default: an axis over it (or a value in
        the file) would otherwise give cells whose models are all the same, silently."""
        arch = self.arch if self.builtin else "package.module:factory"
        for name in _NOT_READ_BY[arch]:
            if getattr(self, name) != type(self).model_fields[name].default:
                raise ValueError(f"model.{name} is not used by arch {self.arch}"
                                 + _NOT_READ_WHY.get((arch, name), ""))
        for section, scheme, needs in _SCHEME_FIELDS:
            opts = getattr(self, section)
            for name in needs:
                if opts.scheme != scheme and getattr(opts, name) != type(opts).model_fields[
                        name].default:
                    raise ValueError(f"model.{section}.{name} is used only by "
                                     f"{section}.scheme {scheme} (the scheme is {opts.scheme})")
        for name in _LOG_UNIFORM_ONLY:  # autocorr replaces the log-uniform draw they bound
            if self.dt_init.scheme == "autocorr" and getattr(self, name) != type(
                    self).model_fields[name].default:
                raise ValueError(f"model.{name} is not used under dt_init.scheme autocorr (Δ "
                                 f"comes from the data's autocorrelation); leave it out")
        im = self.imag_init
        for name in ("ridge", "max_lag"):
            if im.scheme == "memory" and im.memory != "ridge" and getattr(im, name) != \
                    type(im).model_fields[name].default:
                raise ValueError(f"model.imag_init.{name} is used only by imag_init.memory "
                                 f"ridge (it is {im.memory})")
        return self

    @model_validator(mode="after")
    def _dt_range(self) -> ModelConfig:
        if self.dt_min > self.dt_max:
            raise ValueError(f"dt_min ({self.dt_min}) is above dt_max ({self.dt_max})")
        return self


# model fields an arch never reads (their defaults are fine; another value is refused)
_FACTORY_UNREAD = ("d_state", "base_d_state", "expand", "d_conv", "tie_embeddings",
                   "embedding_std", "dt_min", "dt_max", "dt_init_floor", "scan_backend",
                   "dt_init", "zero_real_fraction", "keep_nonpositive", "imag_init", "s4d",
                   "mamba2")
_NOT_READ_BY: dict[str, tuple[str, ...]] = {
    "mamba": ("keep_nonpositive", "imag_init", "s4d", "mamba2"),
    "mamba2": ("keep_nonpositive", "imag_init", "s4d"),
    "s4d": ("expand", "d_conv", "dt_init_floor", "scan_backend", "mamba2"),
    "package.module:factory": _FACTORY_UNREAD,
}
_NOT_READ_WHY = {
    ("mamba", "imag_init"): " (imag_init sets the imaginary parts of a complex A: arch s4d)",
    ("mamba2", "imag_init"): " (imag_init sets the imaginary parts of a complex A: arch s4d)",
    ("mamba", "keep_nonpositive"): " (its A = -exp(A_log) is negative by construction)",
    ("mamba2", "keep_nonpositive"): " (its A = -exp(A_log) is negative by construction)",
    **{("package.module:factory", f): " (a factory takes its settings from model.options)"
       for f in _FACTORY_UNREAD},
}
# the range of dt_init log_uniform's draw, top-level fields that dt_init autocorr never reads
_LOG_UNIFORM_ONLY = ("dt_min", "dt_max")
# (section, the scheme that reads them, its fields)
_SCHEME_FIELDS = (("dt_init", "autocorr", ("kappa", "spread", "estimator")),
                  ("imag_init", "memory", ("min_separation", "memory", "ridge", "max_lag")))


class TrainConfig(StrictModel):
    optimizer: Literal["adam", "adamw", "sgd"] = "adamw"
    lr: float = Field(1e-3, gt=0)
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = Field(1e-8, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    weight_decay_mode: Literal["coupled", "independent"] = Field("coupled", description=(
        "coupled: torch AdamW, each step decays a group's weights by lr_group * "
        "weight_decay_group (so the decay moves with the LR); independent: by "
        "weight_decay_group per step (times the schedule's multiplier), whatever the LR "
        "(docs/schedules.md)"))
    schedule: Literal["constant", "cosine", "linear", "wsd"] = Field("constant", description=(
        "LR after the warmup: constant, cosine or linear decay to min_lr_ratio over the rest "
        "of the run, or wsd (warmup-stable-decay): constant, then a cooldown over the last "
        "`cooldown` fraction of the run to min_lr_ratio (docs/schedules.md)"))
    warmup: int = Field(0, ge=0)
    min_lr_ratio: float = Field(0.0, ge=0, le=1)
    steps: int | None = Field(200, ge=1)
    tokens: int | None = Field(None, ge=1)  # token budget; overrides steps when set
    batch_size: int = Field(8, ge=1)
    seq_len: int = Field(128, ge=2)
    eval_every: int = Field(50, ge=1)
    eval_batches: int = Field(4, ge=1)
    # validate_default: the warmup + cooldown check runs on the default 0.2 too
    cooldown: float = Field(0.2, gt=0, le=1, validate_default=True, description=(
        "wsd: the fraction of the run's steps spent cooling down (rounded to whole steps); "
        "other schedules ignore it"))
    cooldown_shape: Literal["linear", "cosine", "sqrt"] = Field("linear", description=(
        "wsd: the cooldown's curve from the peak LR to min_lr_ratio; sqrt is 1 - sqrt(progress) "
        "(Hägele et al. 2024)"))
    branch: bool | None = Field(None, description=(
        "horizon branching in sweeps: cells that differ only in train.steps (or train.tokens) "
        "with schedule wsd train one run and branch each shorter length's cooldown from its "
        "saved state (null: wherever possible; false: every length runs separately; true "
        "needs schedule wsd). Not part of the trial id: the results are the same"))
    grad_clip: float | None = Field(1.0, gt=0)
    seed: int = 0
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    # Divergence (mutransfer/divergence.py; docs/results-format.md, "Divergence")
    diverge_delta: float = Field(1.0, gt=0, description=(
        "nats above the initial eval loss that count as worse than the start (the bound): a "
        "trial has diverged when its final eval loss is above initial + this, or its smoothed "
        "train loss went above it and the final eval loss is not below the initial loss; a "
        "non-finite loss is divergence at once"))
    diverge_rule: Literal["final", "patience"] = Field("final", description=(
        "final: a finite loss never stops training; the trial is judged at its end, so a "
        "spike that recovers is a complete trial (with its max_excursion and "
        "steps_above_bound). patience: also stop as diverged once the smoothed train loss has "
        "stayed above the bound for diverge_patience consecutive steps (saves the compute of "
        "runs that blow up, at the price of stopping some that would recover)"))
    diverge_smoothing: float = Field(0.9, ge=0, lt=1, description=(
        "EMA factor per step of the smoothed train loss (0: the raw minibatch loss); it starts "
        "at the initial eval loss"))
    diverge_patience: int = Field(10, ge=1, description=(
        "diverge_rule patience only: consecutive steps the smoothed train loss must stay above "
        "the bound before the trial stops as diverged (smoothing 0 and patience 1: one "
        "minibatch above it is enough)"))

    @field_validator("cooldown")
    @classmethod
    def _cooldown_fits(cls, value: float, info: ValidationInfo) -> float:
        d = info.data
        if d.get("schedule") != "wsd" or "warmup" not in d or "batch_size" not in d \
                or "seq_len" not in d:
            return value
        total = _total_steps(d.get("steps"), d.get("tokens"), d["batch_size"], d["seq_len"])
        cool = cooldown_steps(total, value)
        if d["warmup"] + cool > total:
            raise ValueError(f"warmup ({d['warmup']} steps) + cooldown ({value:g} of the run: "
                             f"{cool} steps) exceed the run's {total} steps")
        return value

    @field_validator("weight_decay_mode")
    @classmethod
    def _independent_needs_adamw(cls, value: str, info: ValidationInfo) -> str:
        optimizer = info.data.get("optimizer")
        if value == "independent" and optimizer is not None and optimizer != "adamw":
            raise ValueError(f"independent needs optimizer: adamw (with {optimizer} the decay "
                             f"is an L2 term in the gradient)")
        return value

    @field_validator("branch")
    @classmethod
    def _branch_needs_wsd(cls, value: bool | None, info: ValidationInfo) -> bool | None:
        schedule = info.data.get("schedule")
        if value is True and schedule is not None and schedule != "wsd":
            raise ValueError(f"true needs schedule: wsd (the schedule is {schedule}: lengths "
                             f"share no stable phase); leave branch unset or false")
        return value

    @model_validator(mode="after")
    def _tokens_fill_a_step(self) -> TrainConfig:
        step = self.batch_size * self.seq_len
        if self.tokens is not None and self.tokens < step:
            raise ValueError(f"train.tokens {self.tokens} is less than one step's "
                             f"{step} tokens (batch_size {self.batch_size} x seq_len "
                             f"{self.seq_len}): the run would train {step}")
        return self

    @property
    def cooldown_start(self) -> int:
        """wsd: the first step (0-based) of the cooldown; other schedules: the run's end."""
        total = self.total_steps
        return total - cooldown_steps(total, self.cooldown) if self.schedule == "wsd" else total

    @property
    def total_steps(self) -> int:
        return _total_steps(self.steps, self.tokens, self.batch_size, self.seq_len)


def _total_steps(steps: int | None, tokens: int | None, batch_size: int, seq_len: int) -> int:
    if tokens is not None:
        return max(1, tokens // (batch_size * seq_len))
    return steps or 1


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
        if self.model.arch == "mamba2":
            mamba2_layout(self.model, self.width)
        return self

    @model_validator(mode="after")
    def _model_fits_data_and_param(self) -> TrialConfig:
        m, d = self.model, self.data
        if m.imag_init.scheme == "memory" and (d.source, d.task) != ("synthetic", "memory"):
            what = f"synthetic task {d.task}" if d.source == "synthetic" else d.source
            raise ValueError(f"model.imag_init memory ({m.imag_init.memory}) needs data source "
                             f"synthetic, task memory (scalar real inputs and targets, and "
                             f"the task's memory function); the data is {what}")
        if not m.builtin and self.param.depth == "none":
            for name in ("n_layer", "base_n_layer"):
                if getattr(m, name) != type(m).model_fields[name].default:
                    raise ValueError(f"model.{name} is not used by arch {m.arch} (a factory "
                                     f"takes its depth from model.options; model.{name} is "
                                     f"read only by a depth parameterization, param.depth)")
        return self


def trial_config_problem(data: dict[str, Any], path: str, wanted: str) -> str | None:
    """The one-line error for a trial config given where a sweep or check file belongs (its
    sections are all TrialConfig's and it has no `name`), else None: pydantic alone would say
    only "name: Field required"."""
    if not data or "name" in data or not set(data) <= set(TrialConfig.model_fields):
        return None
    needs = "a name and, for a grid, axes" if wanted == "sweep file" else "a name and check"
    return (f"{path} is a trial config (it has no name), not a {wanted}: run it with "
            f"`mutransfer train {path}`, or give a {wanted} ({needs})")


def mamba2_layout(m: ModelConfig, width: int) -> tuple[int, int]:
    """(nheads, head dim) of arch mamba2 at `width` (as models/mamba2.py `head_layout`);
    ValueError, one line naming the fields, when headdim or ngroups do not divide."""
    o = m.mamba2
    d_inner, base_inner = m.expand * width, m.expand * m.base_width
    if base_inner % o.headdim:
        raise ValueError(f"mamba2.headdim {o.headdim} does not divide d_inner {base_inner} "
                         f"(expand {m.expand} x base_width {m.base_width})")
    nheads = d_inner // o.headdim if o.widen == "heads" else base_inner // o.headdim
    if d_inner % nheads or (o.widen == "heads" and d_inner % o.headdim):
        what = f"headdim {o.headdim}" if o.widen == "heads" else f"{nheads} heads (widen headdim)"
        raise ValueError(f"mamba2: {what} does not divide d_inner {d_inner} (expand {m.expand} "
                         f"x width {width})")
    if nheads % o.ngroups:
        raise ValueError(f"mamba2.ngroups {o.ngroups} does not divide the {nheads} heads at "
                         f"width {width}")
    return nheads, d_inner // nheads
