"""`mutransfer check`'s verdict: the coordinate check and the lr* drift, as one answer.

PASS: no coordinate grows or vanishes robustly with width (coordverdict's noise model), every
parameter tensor's init and update scale as its role's rule implies (analysis/updates.py), and
the 95% interval of the lr* drift (log2 lr* per doubling of width) lies inside ±tolerance (an
equivalence test). FAIL: a robust violation, or a drift interval wholly outside ±tolerance.
The culprit is a parameter tensor whose own exponent is off when there is one (it names the
tensor, its role, measured and expected exponents), else the first robust activation violation
in the order the model computes (earliest step, then forward order): its quantity, the
parameters behind it and their roles, the direction and the slope, with what to change.
INCONCLUSIVE: no violation, and the drift interval straddles the bound when the budget ran out
(or is missing); it says how many seeds would decide it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mutransfer.analysis.coordverdict import excess, judge, label, undecided
from mutransfer.analysis.intervals import LEVEL
from mutransfer.analysis.tdist import t_quantile
from mutransfer.analysis.updates import GOVERNED, is_relative

# (role, kind, direction) -> what it usually means; kind h: size at init or after training,
# dh: the update's size; direction: grows / vanishes
ADVICE = {
    ("embedding", "h", "vanishes"): "the embedding's init shrinks with width (e.g. std "
    "1/√width); muP keeps it width-independent",
    ("embedding", "h", "grows"): "the embedding's init grows with width; keep its std fixed",
    ("embedding", "dh", "grows"): "the embedding's LR grows with width; under Adam it must "
    "stay fixed",
    ("embedding", "dh", "vanishes"): "the embedding's LR shrinks with width (scaled like a "
    "hidden weight?); under Adam it must stay fixed",
    ("hidden", "h", "grows"): "a hidden weight's init is not scaled as 1/√fan_in (a "
    "width-independent std?)",
    ("hidden", "h", "vanishes"): "a hidden weight's init shrinks faster than 1/√fan_in",
    ("hidden", "dh", "grows"): "the hidden weights' Adam LR is not scaled as 1/width (SGD: "
    "their LR grows with width)",
    ("hidden", "dh", "vanishes"): "the hidden weights' LR shrinks too fast with width",
    ("readout", "h", "grows"): "the readout lacks its 1/m multiplier (or its init is too "
    "large)",
    ("readout", "dh", "grows"): "the readout lacks its 1/m multiplier, or its LR is not "
    "scaled",
    ("readout", "h", "vanishes"): "the readout's output shrinks with width: a 1/m multiplier "
    "applied twice?",
    ("readout", "dh", "vanishes"): "the readout's updates shrink with width: its multiplier "
    "or LR is scaled twice",
    ("ssm_B", "dh", "grows"): "W_B's LR is not scaled with width (classed vector-like?); "
    "give it role ssm_B under mup_ssm",
    ("ssm_C", "dh", "grows"): "W_C's LR is not scaled with width (classed vector-like?); "
    "give it role ssm_C under mup_ssm",
    ("vector", "dh", "grows"): "a vector parameter's LR grows with width, or a weight "
    "feeding it is classed vector (W_B/W_C?)",
    ("vector", "h", "grows"): "a vector-like parameter's init grows with width",
    ("vector", "h", "vanishes"): "a vector-like parameter's init shrinks with width",
}


@dataclass
class Culprit:
    """The first robust coordinate violation, with the parameters behind it."""

    label: str  # e.g. ΔL0.B@t1
    quantity: str
    kind: str
    step: int
    slope: float
    se: float
    direction: str  # grows / vanishes
    params: dict[str, str] = field(default_factory=dict)  # name -> role
    expected: float = math.nan  # a parameter's exponent the table implies (NaN: activation)
    relative: bool = True  # a parameter's update: over ‖W_0‖ (False: its RMS, e.g. zero init)

    @property
    def is_param(self) -> bool:
        """A parameter tensor's own size (init or update), not an activation."""
        return self.kind in ("init", "update")

    @property
    def roles(self) -> list[str]:
        return sorted(set(self.params.values()))

    @property
    def role(self) -> str:
        """The role it names: the logits are the readout's output (tied to the embedding or
        not); else a matrix role behind it when there is one, else the first."""
        if self.quantity in ("logits", "loss"):
            return "readout"
        for r in ("readout", "embedding", "ssm_B", "ssm_C", "hidden"):
            if r in self.params.values():
                return r
        return self.roles[0] if self.roles else "?"

    def text(self) -> str:
        if self.is_param:
            return self._param_text()
        what = "its update " if self.kind == "dh" else ""
        when = f"after step {self.step}" if self.step else "at init"
        names = ", ".join(f"{n} ({r})" for n, r in list(self.params.items())[:4])
        more = f" +{len(self.params) - 4} more" if len(self.params) > 4 else ""
        advice = ADVICE.get((self.role, self.kind, self.direction), "")
        return (f"{self.quantity}: {what}{self.direction} as width^{self.slope:+.2f} "
                f"(± {self.se:.2f}) {when}; behind it: {names or '?'}{more}"
                + (f": {advice}" if advice else ""))

    def _param_text(self) -> str:
        role = self.role
        if self.kind == "init":
            what, fix = "its init's RMS", "init"
        elif self.relative:
            what, fix = "its relative update ‖ΔW‖/‖W‖", "LR (Adam)"
        else:  # a vector, or a governed tensor initialised to zero (‖W_0‖ = 0): its own RMS
            what = "its update's RMS" + (" (its init is zero)" if role in GOVERNED else "")
            fix = "LR (Adam)"
        when = "at init" if self.kind == "init" else f"after step {self.step}"
        off = self.slope - self.expected
        return (f"parameter {self.quantity} ({role}): {what} scales as width^{self.slope:+.2f}"
                f" (± {self.se:.2f}) {when}, the {role} rule implies width^"
                f"{self.expected:+.2f}: its {fix} exponent is off by {off:+.2f}")


@dataclass
class Verdict:
    verdict: str  # PASS / FAIL / INCONCLUSIVE
    reason: str
    culprit: Culprit | None = None
    drift: float = math.nan
    drift_low: float = math.nan
    drift_high: float = math.nan
    robust: int = 0
    borderline: int = 0
    checked: int = 0
    advice: list[str] = field(default_factory=list)

    @property
    def named_role(self) -> str:
        return self.culprit.role if self.culprit is not None else ""

    def drift_text(self) -> str:
        if not math.isfinite(self.drift):
            return "no drift"
        if not (math.isfinite(self.drift_low) and math.isfinite(self.drift_high)):
            return f"{self.drift:+.2f}/doubling (no interval)"
        return f"{self.drift:+.2f}/doubling [{self.drift_low:+.2f}, {self.drift_high:+.2f}]"

    def text(self) -> str:
        lines = [f"{self.verdict}: {self.reason}"]
        lines += [f"  - {a}" for a in self.advice]
        return "\n".join(lines)


LOGIT_UPDATE_FLOOR = -0.5  # the slope a base-init readout's share of Δlogits shrinks at


def judge_with_logit_floor(sl: pd.DataFrame, tol: float, alpha: float) -> pd.DataFrame:
    """The coordinate verdict's judgement (t test, Holm at `alpha`), except that the logits'
    updates may shrink down to width^-½ (by more than that, or any growth beyond the tolerance,
    still counts). Under muP, Δlogits = (W₀·Δx + ΔW·x)/m: the first part, the base-init readout
    reading the features' change, shrinks as m^-½, the second is Θ(1), so at the first steps
    and small widths their sum shrinks towards its limit (docs/parameterizations.md measured
    -0.21 at step 1, widths 64-1024; correct tiny GPTs at widths 32-128 give -0.3). A readout
    multiplier applied twice still shows (-1)."""
    ex = excess(sl, tol)
    sel = ((sl["quantity"] == "logits") & (sl["kind"] == "dh")).to_numpy()
    s = sl.loc[sel, "slope"].to_numpy(float)
    with np.errstate(invalid="ignore"):
        relaxed = np.maximum.reduce([s - tol, (LOGIT_UPDATE_FLOOR - tol) - s, np.zeros_like(s)])
    ex[sel] = np.where(np.isfinite(s), relaxed, np.inf)
    return judge(sl, tol, alpha, ex=ex)


def judge_all(act: pd.DataFrame, params: pd.DataFrame, tol: float,
              alpha: float) -> pd.DataFrame:
    """The activations' slopes (`judge_with_logit_floor`'s rule) and the parameters' exponents
    (analysis/updates.py: `excess` over expected ± tol), each judged as its own family per
    parameterization (one-sided t test, Holm at `alpha`): adding the parameters' ~100 tests
    leaves the activations' verdicts as they were; the chance that a correct model FAILs is
    at most 2·alpha (at most alpha from each family). `test` says which is which."""
    act_judged = judge_with_logit_floor(act, tol, alpha).assign(test="activation")
    if params is None or params.empty:
        return act_judged
    ex = params["excess"]
    param_judged = judge(params.drop(columns="excess"), tol, alpha, ex=ex)
    return pd.concat([act_judged, param_judged.assign(test="parameter")], ignore_index=True)


def forward_order(coord: pd.DataFrame) -> dict[tuple[int, str], int]:
    """(layer, quantity) -> its position in the forward pass (first seen, smallest order)."""
    g = coord.groupby(["layer", "quantity"], sort=False)["order"].min()
    return {k: int(v) for k, v in g.items()}


def param_culprit(judged: pd.DataFrame, param_order: dict[str, int]) -> Culprit | None:
    """The first robust violation of a parameter's own exponent: earliest step (init first),
    then the model's parameter order."""
    if "test" not in judged:
        return None
    robust = judged[(judged["status"] == "robust") & (judged["test"] == "parameter")]
    if not len(robust):
        return None
    keyed = robust.assign(_o=[param_order.get(q, 10**6) for q in robust["quantity"]])
    r = keyed.sort_values(["step", "_o"]).iloc[0]
    when = "init" if r["kind"] == "init" else f"t{int(r['step'])}"
    return Culprit(label=f"{r['quantity']}@{when}", quantity=r["quantity"], kind=r["kind"],
                   step=int(r["step"]), slope=float(r["slope"]),
                   se=float(r["se"]) if np.isfinite(r["se"]) else 0.0,
                   direction="grows" if r["slope"] > r["expected"] else "vanishes",
                   params={r["quantity"]: r["role"]}, expected=float(r["expected"]),
                   relative=is_relative(r))


def culprit_of(judged: pd.DataFrame, coord: pd.DataFrame,
               behind: dict[str, dict[str, str]],
               param_order: dict[str, int] | None = None) -> Culprit | None:
    """The first robust violation. A parameter's own exponent comes first (it names the
    tensor: the cause), then the activations: earliest step, then first in forward order."""
    first = param_culprit(judged, param_order or {})
    if first is not None:
        return first
    robust = judged[judged["status"] == "robust"]
    if "test" in robust:
        robust = robust[robust["test"] != "parameter"]
    if not len(robust):
        return None
    order = forward_order(coord)
    keyed = robust.assign(_o=[order.get((int(r.layer), r.quantity), 10**6)
                              for r in robust.itertuples()])
    r = keyed.sort_values(["step", "_o", "kind"]).iloc[0]
    name = r["quantity"] if r["layer"] < 0 else f"layer{int(r['layer'])}.{r['quantity']}"
    return Culprit(label=label(r), quantity=name, kind=r["kind"], step=int(r["step"]),
                   slope=float(r["slope"]), se=float(r["se"]) if np.isfinite(r["se"]) else 0.0,
                   direction="grows" if r["slope"] > 0 else "vanishes",
                   params=dict(behind.get(name, {})))


MAX_SEEDS = 10_000  # seeds_to_decide looks no further


def seeds_to_decide(slope: float, lo: float, hi: float, tolerance: float, seeds: int,
                    se_seeds: float = math.nan, se_placement: float = 0.0,
                    df: int = 0) -> int | None:
    """Seeds in all that would decide the equivalence test if the drift stayed at `slope`:
    the smallest number whose half-width is below |tolerance − |slope||. With the drift's
    s.e. parts (analysis/drift.py): the seeds' part shrinks as 1/√seeds, the grid's placement
    part does not, and the t quantile falls as the df (`df` at `seeds`) grow in proportion
    to seeds − 1; without them the whole half-width shrinks as 1/√seeds. None when the slope
    sits on the bound, when no number of seeds narrows the interval enough, or there is no
    interval."""
    half = (hi - lo) / 2
    room = abs(tolerance - abs(slope))
    if not (math.isfinite(half) and half > 0 and room > 1e-9 and seeds > 0):
        return None
    if not (math.isfinite(se_seeds) and df > 0 and seeds > 1):
        return max(seeds + 1, math.ceil(seeds * (half / room) ** 2))

    def half_at(n: int) -> float:
        t = t_quantile(LEVEL, round(df * (n - 1) / (seeds - 1)))
        return t * math.hypot(se_seeds * math.sqrt(seeds / n), se_placement)

    if half_at(MAX_SEEDS) > room:
        return None
    low, high = seeds, MAX_SEEDS  # half_at falls with n: bisect for the first n that fits
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if half_at(mid) <= room else (mid, high)
    return max(seeds + 1, high)


def equivalence(lo: float, hi: float, tolerance: float) -> str:
    """The transfer stage's equivalence test on the drift's 95% interval: PASS inside
    ±tolerance, FAIL wholly outside, else undecided ('')."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    if -tolerance <= lo and hi <= tolerance:
        return "PASS"
    if lo > tolerance or hi < -tolerance:
        return "FAIL"
    return ""


def status_counts(judged: pd.DataFrame) -> dict[str, int]:
    """The judged slopes' robust and borderline counts and how many were checked."""
    return {"robust": int((judged["status"] == "robust").sum()),
            "borderline": int((judged["status"] == "borderline").sum()),
            "checked": int(len(judged))}


def diverged_at(coord: pd.DataFrame, sizes: pd.DataFrame | None = None,
                axis: str = "width") -> int | None:
    """The narrowest width when some size measured there (an activation's RMS or its update's,
    a parameter's init or update RMS) is not finite, else None. The narrowest width is the
    one nearest the base width, where every parameterization is the model's own init: a run
    that blows up there says the coordinate LR is too large for the model, not how anything
    scales with width, and the infinite slopes it gives are no violation (before: a correct
    mup_ssm Mamba at check.coord.lr 10 FAILed naming W_B's LR, "grows as width^+inf").
    `axis`: n_layer for a depth check (the shallowest depth, then)."""
    if coord is None or coord.empty:
        return None
    narrowest = int(coord[axis].min())
    tables = [(coord, ("rms", "drms"))]
    if sizes is not None and not sizes.empty:
        tables.append((sizes, ("w_rms", "dw_rms")))
    for table, cols in tables:
        at = table[table[axis] == narrowest]
        values = at[[c for c in cols if c in at]].to_numpy(float)
        if not np.isfinite(values).all():
            return narrowest
    return None


def diverged_verdict(judged: pd.DataFrame, width: int, lr: float) -> Verdict:
    """INCONCLUSIVE: the coordinate stage's runs blew up at the narrowest width (`width`), so
    its slopes say nothing of width; lower the coordinate LR."""
    counts = status_counts(judged)
    v = Verdict("INCONCLUSIVE", f"the coordinate check diverged: sizes are not finite "
                f"already at the narrowest width {width} (coordinate LR {lr:g}), so they say "
                f"nothing of how they scale with width", **counts)
    v.advice.append(f"lower check.coord.lr (now {lr:g}): at width {width} the model is "
                    f"nearly its own init, which must train at that LR")
    return v


def decide(judged: pd.DataFrame, coord: pd.DataFrame, behind: dict[str, dict[str, str]],
           drift: dict | None, tolerance: float = 0.25, seeds: int = 0, steps: int = 0,
           widths: int = 0, param_order: dict[str, int] | None = None,
           coord_tolerance: float | None = None) -> Verdict:
    """One verdict from the judged coordinate slopes (activations and parameters) and the
    drift row (slope, ci_low, ci_high, n_edge, note; None when the transfer stage did not
    run). The transfer stage is an equivalence test: PASS when the drift's 95% interval lies
    inside ±tolerance, FAIL when it lies outside; straddling, it is INCONCLUSIVE, with the
    seeds that would decide it (`seeds`: how many the drift was measured with). No PASS
    while the coordinate stage (band ±`coord_tolerance`) leaves a slope undecided
    (coordverdict.undecided): `coord-check` says INCONCLUSIVE there, and so does the check."""
    culprit = culprit_of(judged, coord, behind, param_order)
    counts = status_counts(judged)
    d = drift or {}
    slope = float(d.get("slope", math.nan))
    lo, hi = float(d.get("ci_low", math.nan)), float(d.get("ci_high", math.nan))
    v = Verdict("", "", culprit, slope, lo, hi, **counts)
    has_ci = math.isfinite(lo) and math.isfinite(hi)
    test = equivalence(lo, hi, tolerance)
    way = "up" if slope > 0 else "down"
    drift_words = (f"lr* moves {way} by {abs(slope):.2f} octave per doubling of width "
                   f"(95% interval [{lo:+.2f}, {hi:+.2f}], tolerance ±{tolerance:g})"
                   if has_ci else f"lr* drift {v.drift_text()}")
    if culprit is not None or test == "FAIL":
        v.verdict = "FAIL"
        parts = []
        if culprit is not None:
            parts.append(culprit.text())
            others = counts["robust"] - 1
            if others:
                parts.append(f"{others} more robust violation{'s' * (others > 1)} "
                             "(slopes.parquet)")
        if drift is not None:
            parts.append(drift_words + (": outside" if test == "FAIL" else ""))
        v.reason = "; ".join(parts)
        if culprit is None:
            v.advice.append("no coordinate or parameter scales robustly, yet the optimum "
                            "moves: look at the roles' LR exponents (`mutransfer roles CONFIG`)")
        return v
    measured = int(d.get("n_widths", widths) or 0)
    if test == "PASS" and widths and measured < widths:
        # a width without an lr* (every LR of its window diverged or failed) is left out of
        # the drift's fit: an interval over the others is no PASS for the widths asked
        # (before: PASS, "inside", with the widest width missing)
        v.verdict = "INCONCLUSIVE"
        v.reason = (f"the coordinate check passes; {drift_words}, but from {measured} of "
                    f"{widths} widths ({d.get('widths', '')}): the others have no lr*")
        v.advice.append("a width without an optimum had no LR of check.lr that trained (the "
                        "transfer search's report shows the losses): move check.lr below the "
                        "LRs that diverge there")
        return v
    # coord-check's rule (coordverdict.undecided), its band's width as the bound
    far = undecided(judged, coord_tolerance) if coord_tolerance is not None else judged.iloc[:0]
    if test == "PASS" and len(far):
        r = far.loc[far["excess"].fillna(np.inf).idxmax()]
        v.verdict = "INCONCLUSIVE"
        v.reason = (f"{drift_words}: inside, but the coordinate stage could not decide "
                    f"{len(far)} slope{'s' * (len(far) > 1)} beyond twice its band (largest: "
                    f"{label(r)} {float(r['slope']):+.2f} ± {float(r['se']):.2f}): its seeds "
                    "could not have told a violation")
        v.advice.append("more check.coord seeds (or widths) decide the coordinate stage")
        return v
    if test == "PASS":
        v.verdict = "PASS"
        v.reason = (f"no coordinate or parameter size scales robustly ({counts['checked']} "
                    f"slopes, {counts['borderline']} borderline); {drift_words}: inside")
        return v
    v.verdict = "INCONCLUSIVE"
    if drift is None:
        v.reason = "the coordinate check passes, but the transfer stage did not run"
        v.advice.append("run without --coord-only for the lr* drift")
    elif not has_ci:
        v.reason = f"the coordinate check passes, but the lr* drift has no interval " \
                   f"({d.get('note') or 'too few widths with an optimum'})"
        # what would give an interval: more seeds only where each width has its optimum
        # inside the grid and lacks only the seeds' spread (before, more seeds were advised
        # also when no LR of the grid trained at all: more seeds of it give no optimum)
        if not math.isfinite(slope):
            v.advice.append("fewer than two widths have an optimum (no LR of check.lr "
                            "trained there: every one diverged or failed?): move check.lr "
                            "below the LRs that diverge, or widen it (the transfer "
                            "search's report shows the losses)")
        if int(d.get("n_edge", 0) or 0):
            v.advice.append("an optimum is on the LR grid's edge: widen check.lr")
        elif math.isfinite(slope):
            v.advice.append("more seeds (check.seeds) give each lr* an interval")
    else:
        v.reason = (f"the coordinate check passes; {drift_words}: the interval crosses the "
                    f"bound and the budget ran out")
        need = seeds_to_decide(slope, lo, hi, tolerance, seeds,
                               float(d.get("se_seeds", math.nan)),
                               float(d.get("se_placement", 0.0)), int(d.get("ci_df", 0) or 0))
        if need is None:
            v.advice.append(f"the drift sits too near the bound ±{tolerance:g}: no number of "
                            "seeds decides it; more widths lengthen the lever arm")
        else:
            v.advice.append(f"about {need} seeds in all (now {seeds}) would decide it if the "
                            f"drift stays at {slope:+.2f}: raise check.budget")
    return v
