"""One trial: a config in, losses out. Knows nothing of Ray or sweeps.

Divergence is a result: a non-finite loss, or one above the initial loss + `diverge_delta`,
stops the trial and returns status "diverged" with the step; no exception escapes for it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.data.base import IGNORE_INDEX
from mutransfer.models.build import build_model
from mutransfer.models.data_init import needs_sample
from mutransfer.optim import lr_factor, make_optimizer, set_lr

EVAL_SEED = 0  # every trial evaluates on the same held-out batches, whatever its seed
SAMPLE_SEED = 10_000  # stream of the batch that data-dependent init schemes look at

Report = Callable[[dict[str, Any]], None]


@dataclass
class TrialResult:
    status: str  # "complete" or "diverged"
    diverged: bool
    diverge_step: int | None
    final_eval_loss: float
    best_eval_loss: float
    initial_loss: float
    steps_done: int
    tokens: int
    wall_time_s: float
    tokens_per_s: float
    history: list[dict] = field(default_factory=list)
    last_finite_loss: float = float("nan")  # last finite train/eval loss (before divergence)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        from mutransfer.errors import UserError

        raise UserError("train.device: cuda requested but no CUDA device is available")
    return torch.device(name)


def loss_fn(kind: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Cross-entropy over tokens (targets IGNORE_INDEX ignored) or mean squared error."""
    if kind == "ce":
        return lambda out, y: F.cross_entropy(out.float().reshape(-1, out.shape[-1]),
                                              y.reshape(-1), ignore_index=IGNORE_INDEX)
    return lambda out, y: F.mse_loss(out.float(), y.float())


class _Stepper:
    """Forward/backward of one batch, with bf16 autocast on CUDA (fp32 params and scan state)."""

    def __init__(self, model, opt, cfg: TrialConfig, device: torch.device, loss) -> None:
        self.model, self.opt, self.cfg, self.device, self.loss = model, opt, cfg, device, loss
        self.autocast = device.type == "cuda"

    def _forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        inputs, targets = inputs.to(self.device), targets.to(self.device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.autocast):
            return self.loss(self.model(inputs), targets)

    def train_step(self, inputs, targets) -> tuple[float, torch.Tensor]:
        """(loss, grad norm); the update is skipped when the loss is not finite.

        The loss is a float because divergence is checked at every step; the norm stays a 0-d
        device tensor (no sync per step) since only the last one of an eval window is reported.
        """
        self.model.train()
        loss = self._forward(inputs, targets)
        value = loss.item()
        if not math.isfinite(value):
            return value, torch.tensor(float("nan"))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        clip = self.cfg.train.grad_clip or float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.opt.step()
        return value, norm

    @torch.no_grad()
    def evaluate(self, batches: list) -> float:
        self.model.eval()
        losses = [self._forward(x, y).item() for x, y in batches]
        return sum(losses) / len(losses)


def _eval_batches(source, cfg: TrialConfig) -> list:
    t = cfg.train
    it: Iterator = source.batches("eval", t.batch_size, t.seq_len, seed=EVAL_SEED)
    return [next(it) for _ in range(t.eval_batches)]


def run_trial(config: TrialConfig, report: Report | None = None) -> TrialResult:
    """Train one model as `config` says; call `report` at every eval (step 0 included)."""
    start = time.perf_counter()
    t = config.train
    torch.manual_seed(t.seed)
    device = resolve_device(t.device)
    source = load_data(config.data)
    # a sample for data-dependent init schemes, from its own stream so training data is untouched
    sample = (next(source.batches("train", 16, t.seq_len, seed=SAMPLE_SEED + t.seed))
              if needs_sample(config.model) else None)
    model = build_model(config, source.spec, sample=sample).to(device)
    opt = make_optimizer(model, config)
    stepper = _Stepper(model, opt, config, device, loss_fn(source.spec.loss))
    eval_set = _eval_batches(source, config)
    batches = source.batches("train", t.batch_size, t.seq_len, seed=t.seed)
    total = t.total_steps
    tokens_per_step = t.batch_size * t.seq_len

    history: list[dict] = []
    initial = stepper.evaluate(eval_set)
    bound = initial + t.diverge_delta
    point = {"step": 0, "tokens": 0, "train_loss": float("nan"), "eval_loss": initial,
             "lr": t.lr * lr_factor(0, total, t.warmup, t.schedule, t.min_lr_ratio),
             "grad_norm": float("nan"), "tokens_per_s": 0.0}
    history.append(point)
    if report:
        report(point)

    diverged_at, last_finite = None, initial
    losses, window_start, train_time, step = [], time.perf_counter(), 0.0, 0
    for step in range(1, total + 1):
        lr = set_lr(opt, t.lr, lr_factor(step - 1, total, t.warmup, t.schedule, t.min_lr_ratio))
        loss, norm = stepper.train_step(*next(batches))
        if not math.isfinite(loss) or loss > bound:
            diverged_at = step
            break
        last_finite = loss
        losses.append(loss)
        if step % t.eval_every == 0 or step == total:
            grad_norm = norm.item()  # before the clock: it waits for the step's backward
            now = time.perf_counter()
            train_time += now - window_start
            ev = stepper.evaluate(eval_set)
            point = {"step": step, "tokens": step * tokens_per_step,
                     "train_loss": sum(losses) / len(losses), "eval_loss": ev,
                     "lr": lr, "grad_norm": grad_norm,
                     "tokens_per_s": len(losses) * tokens_per_step / max(now - window_start, 1e-9)}
            history.append(point)
            if report:
                report(point)
            losses, window_start = [], time.perf_counter()
            if not math.isfinite(ev) or ev > bound:
                diverged_at = step
                break
            last_finite = ev

    evals = [h["eval_loss"] for h in history if math.isfinite(h["eval_loss"])]
    steps_done = (diverged_at - 1) if diverged_at else total
    final_eval = evals[-1]  # for a diverged trial: the last finite eval loss
    wall = time.perf_counter() - start
    tokens = steps_done * tokens_per_step
    return TrialResult(
        status="diverged" if diverged_at else "complete", diverged=diverged_at is not None,
        diverge_step=diverged_at, final_eval_loss=final_eval, best_eval_loss=min(evals),
        initial_loss=initial, steps_done=steps_done, tokens=tokens, wall_time_s=wall,
        tokens_per_s=tokens / train_time if train_time > 0 else 0.0, history=history,
        last_finite_loss=last_finite)
