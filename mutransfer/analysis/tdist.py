"""Student's t quantiles for whole degrees of freedom, with numpy only (no scipy).

The two-sided probability P(|T| <= t) has a closed form for whole df (Abramowitz & Stegun
26.7.3-4); the quantile inverts it by bisection, which is exact to float precision.
"""

from __future__ import annotations

import math


def t_within(t: float, df: int) -> float:
    """P(|T| <= t) for T ~ Student t with `df` >= 1 degrees of freedom."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        # odd df: (2/pi)(theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term, total = 1.0, 0.0
        if df > 1:
            total = term
            for k in range(1, (df - 3) // 2 + 1):
                term *= c2 * (2 * k) / (2 * k + 1)
                total += term
        return 2.0 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    # even df: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    term, total = 1.0, 1.0
    for k in range(1, (df - 2) // 2 + 1):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


def t_quantile(level: float, df: int) -> float:
    """The t with P(|T| <= t) = `level` (e.g. 0.95 -> 12.706 at df 1, 1.960 as df -> inf);
    NaN for df < 1."""
    if df < 1:
        return math.nan
    lo, hi = 0.0, 1.0
    while t_within(hi, df) < level:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_within(mid, df) < level:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def t_upper(t: float, df: float) -> float:
    """One-sided P(T > t) for T ~ Student t; a fractional df (Welch) is rounded down, which
    errs on the wide side. 0 for t = +inf, NaN for df < 1 or t NaN."""
    if math.isnan(t) or not df >= 1:
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    k = int(min(math.floor(df), 10_000))  # beyond that the t is the normal to 1e-4
    tail = 0.5 * (1.0 - t_within(abs(t), k))
    return tail if t >= 0 else 1.0 - tail
