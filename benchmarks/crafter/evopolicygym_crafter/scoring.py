"""The Crafter score, as Crafter's paper computes it (Hafner, 2021, section 3).

Each of the 22 achievements has a success rate ``s_i``: the percentage of Episodes in which
it was unlocked at least once. The score is their geometric mean, offset by one so that
achievements nobody unlocks do not zero it: ``S = exp(mean_i ln(1 + s_i)) - 1``, in percent
(0 to 100). Unlocking rare achievements weighs far more than unlocking common ones again.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

__all__ = ["crafter_score", "success_rates"]


def success_rates(
    unlocked: Sequence[Collection[str]], achievements: Sequence[str]
) -> dict[str, float]:
    """Per achievement, the percentage of Episodes (one collection of names each) that
    unlocked it; 0 for all with no Episodes."""
    if not unlocked:
        return dict.fromkeys(achievements, 0.0)
    return {
        name: 100.0 * sum(1 for names in unlocked if name in names) / len(unlocked)
        for name in achievements
    }


def crafter_score(rates: Collection[float]) -> float:
    """``exp(mean ln(1 + s_i)) - 1`` over the success rates ``s_i`` (percent)."""
    if not rates:
        return 0.0
    mean_log = sum(math.log1p(rate) for rate in rates) / len(rates)
    return math.expm1(mean_log)
