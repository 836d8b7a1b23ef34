"""One trial: a config in, losses out. Knows nothing of Ray or sweeps.

Divergence is a result: the rule of mutransfer/divergence.py (a non-finite loss stops the
trial at once; a finite one only under `train.diverge_rule: patience`; otherwise the trial is
judged at its end: diverged if it did not recover) returns status "diverged" with the step; no
exception escapes for it, and a diverged trial reports no final or best loss. Every trial
reports its spike: `max_excursion` and `steps_above_bound`.

Resuming: given a `Checkpointer`, the loop saves its whole state at eval points (model,
optimizer, RNG, step, history, divergence monitor; the LR schedule and the data stream are
functions of the step) and a later call with the same config resumes from the last one, with
the losses an uninterrupted run would have had.

Branch points (horizon branching, mutransfer/sweep/run/horizon.py): a checkpointer that has
`branch_steps` (a set of steps) and `save_branch(step, state)` is also handed the full state
right after each of those steps, eval point or not (the train losses of the unfinished eval
window go with it), so that a run of another length can go on from there.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import torch
import torch.nn.functional as F

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.data.base import IGNORE_INDEX, DataSource, DataSpec
from mutransfer.denormals import flush_denormals
from mutransfer.divergence import DivergenceMonitor
from mutransfer.errors import UserError
from mutransfer.models.build import build_model
from mutransfer.models.data_init import init_sample
from mutransfer.models.factory import check_output
from mutransfer.ops.mamba_ssm_scan import load_selective_scan_fn
from mutransfer.optim import decay_timescales, make_optimizer, schedule_factor, set_lr
from mutransfer.results.later_fields import same_trial_text

EVAL_SEED = 0  # every trial evaluates on the same held-out batches, whatever its seed
STATE_FORMAT = 2  # version of the checkpointed loop state; another version is not resumed

Report = Callable[[dict[str, Any]], None]


class Checkpointer(Protocol):
    """Where a trial's loop state goes (mutransfer/results/checkpoints.py for sweeps). `save`
    must serialize or copy the state before it returns: its tensors are the live ones."""

    def load(self) -> dict[str, Any] | None: ...

    def save(self, state: dict[str, Any]) -> bool: ...


@dataclass
class TrialResult:
    status: str  # "complete" or "diverged"
    diverged: bool
    diverge_step: int | None
    final_eval_loss: float | None  # None for a diverged trial: it reached no final loss
    best_eval_loss: float | None  # None for a diverged trial
    initial_loss: float
    steps_done: int
    tokens: int
    wall_time_s: float
    tokens_per_s: float
    history: list[dict] = field(default_factory=list)
    last_finite_loss: float = float("nan")  # last finite loss before divergence; else final
    diverge_reason: str | None = None
    max_excursion: float = 0.0  # largest rise of the smoothed train loss over the initial (nats)
    steps_above_bound: int = 0  # steps the smoothed train loss spent above initial + delta
    resumed_from: int | None = None  # the step a checkpoint restored, when one did
    params: int = 0  # trainable parameters of the model
    tau: dict[str, float | None] = field(default_factory=dict)  # role -> 1/(η·λ) in steps

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("train.device: cuda requested but no CUDA device is available")
    return torch.device(name)


def loss_fn(kind: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Cross-entropy over tokens (targets IGNORE_INDEX ignored) or mean squared error."""
    if kind == "ce":
        return lambda out, y: F.cross_entropy(out.float().reshape(-1, out.shape[-1]),
                                              y.reshape(-1), ignore_index=IGNORE_INDEX)
    return lambda out, y: F.mse_loss(out.float(), y.float())


def _check_output_shape(arch: str, out, targets: torch.Tensor, kind: str,
                        classes: int | None) -> None:
    """UserError (one line) unless the model's output lines up with the targets: logits
    (b, L, classes) for targets (b, L) under cross-entropy (classes: the data's output_dim),
    the targets' own shape under mse.
    Flattened for the loss, a transposed (L, b, ...) output would otherwise be scored against
    the wrong targets, silently."""
    want = (*targets.shape, classes) if kind == "ce" else tuple(targets.shape)
    check_output(arch, out, want, f"a batch of {targets.shape[0]} sequences of length "
                 f"{targets.shape[1]}")


def _scalar_loss(arch: str, loss) -> torch.Tensor:
    """A `loss: custom` model's return value, which must be a scalar tensor (UserError)."""
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        what = (f"shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor)
                else type(loss).__name__)
        raise UserError(f"model.arch {arch}: with loss: custom, model(inputs, targets) must "
                        f"return a scalar loss; it returned {what}")
    return loss


class _Stepper:
    """Forward/backward of one batch, with bf16 autocast on CUDA (fp32 params and scan state)."""

    def __init__(self, model, opt, cfg: TrialConfig, device: torch.device, loss,
                 spec: DataSpec | None = None) -> None:
        self.model, self.opt, self.cfg, self.device, self.loss = model, opt, cfg, device, loss
        # what the output must look like (checked at every forward: a few tuple compares)
        self.loss_kind = spec.loss if spec is not None else "ce"
        self.classes = spec.output_dim if spec is not None else None
        self.autocast = device.type == "cuda"

    def _forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        inputs, targets = inputs.to(self.device), targets.to(self.device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.autocast):
            if self.cfg.model.loss == "custom":  # the model returns its own loss
                return _scalar_loss(self.cfg.model.arch, self.model(inputs, targets)).float()
            out = self.model(inputs)
            if self.classes is not None:
                _check_output_shape(self.cfg.model.arch, out, targets, self.loss_kind,
                                    self.classes)
            return self.loss(out, targets)

    def train_loss(self, inputs, targets) -> torch.Tensor:
        """The loss of one training batch, its graph kept for `update`."""
        self.model.train()
        return self._forward(inputs, targets)

    def update(self, loss: torch.Tensor) -> torch.Tensor:
        """One optimizer step on `loss` (finite); returns the total grad norm before clipping.

        The norm stays a 0-d device tensor (no sync per step) since only the last one of an
        eval window is reported.
        """
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        clip = self.cfg.train.grad_clip or float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.opt.step()
        return norm

    @torch.no_grad()
    def evaluate(self, batches: list) -> float:
        self.model.eval()
        losses = [self._forward(x, y).item() for x, y in batches]
        return sum(losses) / len(losses)


@dataclass
class _Trial:
    """What one trial trains with, built from its config and seed."""

    config: TrialConfig
    source: DataSource
    model: torch.nn.Module
    opt: torch.optim.Optimizer
    stepper: _Stepper
    eval_set: list
    tau: dict[str, float | None] = field(default_factory=dict)


def _build(config: TrialConfig) -> _Trial:
    t = config.train
    torch.manual_seed(t.seed)
    device = resolve_device(t.device)
    if getattr(config.model, "scan_backend", None) == "mamba_ssm":
        # a missing optional backend is a one-line error before the data is read or cached
        load_selective_scan_fn()
    source = load_data(config.data)
    # What the data-dependent init schemes see of the data, handed from the source to the model:
    # a sample from its own stream (so training data is untouched), and the source's spec, with
    # the task's own memory function where the task has one (model.imag_init memory: task).
    model = build_model(config, source.spec, sample=init_sample(config, source, t.seq_len))
    model = model.to(device)
    opt = make_optimizer(model, config)
    stepper = _Stepper(model, opt, config, device, loss_fn(source.spec.loss),
                       source.spec)
    it: Iterator = source.batches("eval", t.batch_size, t.seq_len, seed=EVAL_SEED)
    eval_set = [next(it) for _ in range(t.eval_batches)]
    return _Trial(config, source, model, opt, stepper, eval_set, decay_timescales(opt))


@dataclass
class _Loop:
    """What the training loop carries from one eval point to the next."""

    step: int  # the last eval point reached (0 before training)
    history: list[dict]
    monitor: DivergenceMonitor
    initial: float
    train_s: float = 0.0  # seconds spent training, not evaluating: the throughput's clock
    earlier_wall_s: float = 0.0  # wall time of earlier attempts, up to their checkpoint
    pending: list[float] = field(default_factory=list)  # train losses since the last eval


def _monitor(config: TrialConfig, initial: float) -> DivergenceMonitor:
    t = config.train
    return DivergenceMonitor(initial, t.diverge_delta, t.diverge_smoothing, t.diverge_patience,
                             t.diverge_rule)


def _first_point(trial: _Trial) -> _Loop:
    """Step 0: the initial eval loss, which the divergence bound is measured from."""
    t = trial.config.train
    initial = trial.stepper.evaluate(trial.eval_set)
    point = {"step": 0, "tokens": 0, "train_loss": float("nan"), "eval_loss": initial,
             "lr": t.lr * schedule_factor(t, 0),
             "grad_norm": float("nan"), "tokens_per_s": 0.0}
    return _Loop(step=0, history=[point], monitor=_monitor(trial.config, initial),
                 initial=initial)


def _config_text(config: TrialConfig) -> str:
    return config.model_dump_json()


def _snapshot(trial: _Trial, loop: _Loop, wall_s: float, step: int | None = None
              ) -> dict[str, Any]:
    """The full loop state as plain containers of tensors and numbers (`weights_only` loads);
    `step`: the step it was taken after when that is not the last eval point (a branch
    point), whose unfinished window's train losses it then carries."""
    rng = {"torch": torch.get_rng_state()}
    device = trial.stepper.device
    if device.type == "cuda":  # only then: querying CUDA would start a context on a CPU trial
        rng["cuda"] = torch.cuda.get_rng_state(device)
    return {"format": STATE_FORMAT, "config": _config_text(trial.config),
            "step": loop.step if step is None else step, "pending": list(loop.pending),
            "model": trial.model.state_dict(), "optimizer": trial.opt.state_dict(), "rng": rng,
            "history": [dict(p) for p in loop.history], "initial": loop.initial,
            "monitor": loop.monitor.state_dict(), "train_s": loop.train_s, "wall_s": wall_s}


def _restore(trial: _Trial, state: dict[str, Any]) -> _Loop:
    """Load `state` into `trial`; raises ValueError (or a torch error) when it does not fit."""
    if state.get("format") != STATE_FORMAT:
        raise ValueError(f"state format {state.get('format')!r}, expected {STATE_FORMAT}")
    if not same_trial_text(state.get("config"), _config_text(trial.config)):
        raise ValueError("saved by a different trial config")
    trial.model.load_state_dict(state["model"])
    trial.opt.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"]["torch"])
    if trial.stepper.device.type == "cuda" and "cuda" in state["rng"]:
        torch.cuda.set_rng_state(state["rng"]["cuda"], trial.stepper.device)
    monitor = _monitor(trial.config, float(state["initial"]))
    monitor.load_state_dict(state["monitor"])
    return _Loop(step=int(state["step"]), history=list(state["history"]), monitor=monitor,
                 initial=float(state["initial"]), train_s=float(state["train_s"]),
                 earlier_wall_s=float(state["wall_s"]),
                 pending=[float(x) for x in state.get("pending", [])])


def _start(config: TrialConfig, checkpoint: Checkpointer | None) -> tuple[_Trial, _Loop, bool]:
    """The trial and its loop state: resumed from the checkpoint when there is a usable one,
    else built from the seed; the flag says whether it resumed."""
    saved = checkpoint.load() if checkpoint is not None else None
    trial = _build(config)
    if saved is not None:
        try:
            return trial, _restore(trial, saved), True
        except Exception as exc:  # unusable: start over from a clean build (it may be half-set)
            warnings.warn(f"checkpoint not resumed ({type(exc).__name__}: {exc}); "
                          f"the trial starts from step 0", stacklevel=3)
            trial = _build(config)
    return trial, _first_point(trial), False


def run_trial(config: TrialConfig, report: Report | None = None,
              checkpoint: Checkpointer | None = None) -> TrialResult:
    """Train one model as `config` says; call `report` at every eval (step 0 included).

    With `checkpoint`, resume from its saved state if it holds one (the eval points before it
    are reported again first, so `report` always sees every eval point of the trial once, in
    order) and offer it the loop state at every eval point but the last.
    """
    if not isinstance(config, TrialConfig):  # before: AttributeError 'dict' ... 'train'
        raise UserError(f"run_trial: expected a TrialConfig, got {type(config).__name__} "
                        f"(mutransfer.TrialConfig(**fields) builds one)")
    flush_denormals()  # before the first parallel op: threads created later inherit it
    start = time.perf_counter()
    trial, loop, resumed = _start(config, checkpoint)
    resumed_from = loop.step if resumed else None
    for point in loop.history:
        if report:
            report(point)
    _train(trial, loop, report, checkpoint, start)
    result = _result(trial.config, loop, loop.earlier_wall_s + time.perf_counter() - start,
                     resumed_from)
    result.params = sum(p.numel() for p in trial.model.parameters())
    result.tau = trial.tau
    return result


def _train(trial: _Trial, loop: _Loop, report: Report | None, checkpoint: Checkpointer | None,
           start: float) -> None:
    """Steps loop.step + 1 ... total, or until the monitor stops the trial (then judges it
    at its end: `DivergenceMonitor.finish`). `start`: when
    this call of run_trial began (the checkpoint's wall time adds the earlier attempts')."""
    t = trial.config.train
    total = t.total_steps
    branch_steps = getattr(checkpoint, "branch_steps", None) or set()
    # batch i of the stream is drawn from (seed, i): starting at loop.step costs nothing
    batches = trial.source.batches("train", t.batch_size, t.seq_len, seed=t.seed, start=loop.step)
    # the throughput's window: its clock and the step before its first (loop.pending may
    # also hold train losses of steps before a branch point, trained by another call)
    window_start, window_from = time.perf_counter(), loop.step
    for step in range(loop.step + 1, total + 1):
        lr = set_lr(trial.opt, t.lr, schedule_factor(t, step - 1))
        loss_t = trial.stepper.train_loss(*next(batches))
        loss = loss_t.item()  # a float: divergence is checked at every step
        # judged before the update: a step whose train loss stops the trial is not taken, so
        # the trial has done diverge_step - 1 updates (docs/results-format.md, "Divergence")
        if loop.monitor.train_loss(step, loss):
            loop.train_s += time.perf_counter() - window_start  # the throughput's clock too
            return
        norm = trial.stepper.update(loss_t)
        loop.pending.append(loss)
        if step % t.eval_every == 0 or step == total:
            if _eval_point(trial, loop, report, checkpoint, start, step, lr, norm,
                           (window_start, window_from)):
                return
            window_start, window_from = time.perf_counter(), step
        if step in branch_steps:
            wall_s = loop.earlier_wall_s + time.perf_counter() - start
            checkpoint.save_branch(step, _snapshot(trial, loop, wall_s, step=step))


def _eval_point(trial: _Trial, loop: _Loop, report: Report | None,
                checkpoint: Checkpointer | None, start: float, step: int, lr: float,
                norm: torch.Tensor, window: tuple[float, int]) -> bool:
    """Evaluate at `step`, record and report the point, checkpoint; True when diverged.
    `window`: when this call's training since the last point began, and the step before it."""
    window_start, window_from = window
    t = trial.config.train
    per_step = t.batch_size * t.seq_len
    grad_norm = norm.item()  # before the clock: it waits for the step's backward
    now = time.perf_counter()
    loop.train_s += now - window_start
    ev = trial.stepper.evaluate(trial.eval_set)
    losses = loop.pending
    point = {"step": step, "tokens": step * per_step,
             "train_loss": sum(losses) / len(losses), "eval_loss": ev, "lr": lr,
             "grad_norm": grad_norm,
             "tokens_per_s": (step - window_from) * per_step / max(now - window_start, 1e-9)}
    loop.history.append(point)
    if report:
        report(point)
    if loop.monitor.eval_loss(step, ev):
        return True
    if step == t.total_steps:
        loop.monitor.finish(step, ev)  # the final rule judges the run at its end
    loop.step, loop.pending = step, []
    if checkpoint is not None and step < t.total_steps:
        wall_s = loop.earlier_wall_s + time.perf_counter() - start
        checkpoint.save(_snapshot(trial, loop, wall_s))
    return False


def _updates_done(loop: _Loop, total: int) -> int:
    """The optimizer steps the trial took: all of them unless the monitor stopped it; a stop
    on a train loss comes before that step's update (diverge_step - 1 done), a stop on a
    non-finite eval loss after it (its eval point's row, which counts diverge_step steps and
    their tokens, is the history's last)."""
    monitor = loop.monitor
    if not monitor.stopped:
        return total
    at = monitor.diverged_at
    return at if loop.history[-1]["step"] == at else at - 1


def _result(config: TrialConfig, loop: _Loop, wall: float, resumed_from: int | None
            ) -> TrialResult:
    t, monitor = config.train, loop.monitor
    per_step = t.batch_size * t.seq_len
    diverged = monitor.diverged
    steps_done = _updates_done(loop, t.total_steps)
    evals = [h["eval_loss"] for h in loop.history]
    tokens = steps_done * per_step
    return TrialResult(
        status="diverged" if diverged else "complete", diverged=diverged,
        diverge_step=monitor.diverged_at,
        final_eval_loss=None if diverged else evals[-1],
        best_eval_loss=None if diverged else min(evals), initial_loss=loop.initial,
        steps_done=steps_done, tokens=tokens, wall_time_s=wall,
        tokens_per_s=tokens / loop.train_s if loop.train_s > 0 else 0.0, history=loop.history,
        last_finite_loss=monitor.last_finite if diverged else evals[-1],
        diverge_reason=monitor.reason, resumed_from=resumed_from,
        max_excursion=monitor.max_excursion, steps_above_bound=monitor.steps_above)
