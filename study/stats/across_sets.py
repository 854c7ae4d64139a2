"""One comparison read across the test sets a family declares (issue 78): pure statistics, no I/O.

Per set the row of one comparison on one measure gives its mean difference, its rule's decision p
(two-sided beyond the tie margin, as study/stats/rules.py computes it) and its equivalence p (TOST,
study/stats/equivalence.py). Every run is scored on every set, so a seed's differences on the sets are
correlated; none of the tests below assumes anything of that correlation.

- "ahead across" / "behind across": every set's mean has that sign, and the across p is the largest
  of the sets' decision p's. An intersection–union test (Berger, Technometrics 1982; Berger & Hsu,
  Statistical Science 1996): the claim "beyond the tie margin on every set" is the intersection of the
  per-set claims, and rejecting each at level α rejects the intersection at α, so the sets cost no
  multiplicity. With one set on an edge of the tie margin the chance of a wrong direction across is at
  most that set's chance alone (α/2 under the current rule, both tails counted).
- "equivalent across": the largest of the sets' TOST p's (the same intersection–union argument).
- "depends on the test set": the means' signs differ, and the smaller decision p on each side passes:
  p = f · max(min p over sets with a positive mean, min p over sets with a negative mean). It claims a
  direction beyond the margin on one set and the other direction on another; where no set truly lies
  beyond the margin one way, it is wrong only if some set on that side is worded wrongly alone. Under
  a rule whose decision p doubles the two-sided p (`both_tails`, the current rule) each set is worded
  one way wrongly in at most α/4, so with up to K − 1 sets on the edge (one far the other way) the
  union is at most (K − 1) α/4: within α/2 for K ≤ 3 sets without a correction (f = 1), the worst
  case being exactly α/2 (results/calibration.md, study/simulate/across_calibration.py); for K ≥ 4,
  f = (K − 1)/2 (Bonferroni over the sets on a side) keeps it there.
- otherwise "inconclusive" (the caller prints each set's reading beside it).

The caller Holm-adjusts `p`, `equivalence_p` and `depends_p` over the family's comparisons (or compares
them with a sequential look's level); a reading holds where its (adjusted) p is below the level, the
same strict `p < level` as Rule.direction and the sequential looks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Optional, Sequence

import numpy as np

from study.stats.seed_test import ALPHA


class Across(StrEnum):
    """What a comparison may say across the declared test sets."""

    AHEAD = "ahead across"
    BEHIND = "behind across"
    EQUIVALENT = "equivalent across"
    DEPENDS = "depends on the test set"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class SetRow:
    """One set's row of the comparison: mean difference, decision p (two-sided, the rule's), TOST p."""

    mean: float
    decision_p: float
    equivalence_p: float


@dataclass(frozen=True)
class AcrossTest:
    """The across-set tests of one comparison, before any adjustment over the family."""

    candidate: Across  # AHEAD / BEHIND: every set's mean that way; DEPENDS: signs differ; else INCONCLUSIVE
    p: float  # the intersection–union decision p: the sets' largest (1 unless the signs agree)
    equivalence_p: float  # the sets' largest TOST p
    depends_p: float  # f · max(smallest p with a positive mean, smallest with a negative) (1 unless they differ)

    def readings(
        self,
        level: float = ALPHA,
        p: Optional[float] = None,
        equivalence_p: Optional[float] = None,
        depends_p: Optional[float] = None,
    ) -> tuple[Across, ...]:
        """What holds at `level`, given the adjusted p's (None: this test's own): a direction across or
        "depends", and/or "equivalent across"; (INCONCLUSIVE,) where none does."""
        p = self.p if p is None else p
        depends_p = self.depends_p if depends_p is None else depends_p
        code = int(words(_CODE.get(self.candidate, 0), p, depends_p, level))
        said = [_NAME[code]] if code else []
        if (self.equivalence_p if equivalence_p is None else equivalence_p) < level:
            said.append(Across.EQUIVALENT)
        return tuple(said) or (Across.INCONCLUSIVE,)


DEPENDS = 2  # `words`' code for "depends on the test set" (+1 / -1: ahead / behind across, 0: neither)
_NAME = {1: Across.AHEAD, -1: Across.BEHIND, DEPENDS: Across.DEPENDS}
_CODE = {name: code for code, name in _NAME.items()}


def depends_factor(sets: int) -> float:
    """f: 1 for up to 3 sets, (K - 1)/2 beyond (see the module's text)."""
    return max(1.0, (sets - 1) / 2)


def across_arrays(means, decision_p, equivalence_p) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(direction, p, equivalence p, depends p) of `[..., K]` arrays, the sets on the last axis (vectorised
    for the calibration): direction +1 / -1 where every mean has that sign, 2 where signs differ, else 0."""
    means, p_set = np.asarray(means, dtype=np.float64), np.asarray(decision_p, dtype=np.float64)
    up, down = (means > 0).all(-1), (means < 0).all(-1)
    pos, neg = (means > 0).any(-1), (means < 0).any(-1)
    direction = np.where(up, 1, np.where(down, -1, np.where(pos & neg, DEPENDS, 0)))
    p = np.where(up | down, p_set.max(-1), 1.0)
    smallest = [np.where(side, p_set, np.inf).min(-1) for side in (means > 0, means < 0)]
    factor = depends_factor(means.shape[-1])
    depends_p = np.where(pos & neg, np.minimum(1.0, factor * np.maximum(*smallest)), 1.0)
    return direction, p, np.asarray(equivalence_p, dtype=np.float64).max(-1), depends_p


def words(direction, p, depends_p, level: float = ALPHA) -> np.ndarray:
    """+1 / -1 (ahead / behind across), DEPENDS, or 0 (neither) at `level`, vectorised."""
    direction = np.asarray(direction)
    sure = np.where(direction == DEPENDS, np.asarray(depends_p) < level, np.asarray(p) < level)
    return np.where(sure & (direction != 0), direction, 0)


def across_test(sets: Sequence[SetRow]) -> AcrossTest:
    """The across-set tests of one comparison's rows on the declared sets (two or more)."""
    if len(sets) < 2:
        raise ValueError(f"an across-set reading needs two or more sets, got {len(sets)}")
    columns = (np.array([getattr(s, f) for s in sets]) for f in ("mean", "decision_p", "equivalence_p"))
    direction, p, eq, dep = (x.item() for x in across_arrays(*columns))
    return AcrossTest(_NAME.get(int(direction), Across.INCONCLUSIVE), float(p), float(eq), float(dep))
