"""The decision rules that word a declared comparison, by name.

A family file names its rule (`rule:` in configs/<study>/findings/headline.yaml), so that changing the
code never changes what a committed family concludes; a family file without one was declared under
`seed_veto`, and is read with that rule and its standard error. Each rule has a Holm-corrected
decision p per declared comparison (over the family), an equivalence p (TOST at ±m, Holm apart) and
a direction test:

- `beyond_tie_exact` (the current rule, from 2026-12-05): SE = sqrt(s_d²/n + v_shared), Student's t
  with n - 1 df, and a direction ("ahead/behind by more than the tie margin") when the Holm-adjusted
  decision p = min(1, 4 P(t_{n-1} > (|mean| - tie) / SE)) is below α: twice the two-sided p, so that on
  an edge of the tie margin (true difference ±tie) the chance of wording either direction, both tails
  counted, is at most α/2 — exactly at the worst case (the seed variance dominating, the margin small
  against the SE) and below it elsewhere, at every n >= 2 (by integration over s_d²: study/simulate/
  calibration.py; Welch–Satterthwaite df there give up to 3.9% at 5 seeds). TOST and the intervals use
  the same reference (t with n - 1 df); a sequential plan spends its α over the looks by level
  (study/stats/sequential_family.py). Its power cost against `beyond_tie` is on results/calibration.md.
- `beyond_tie` (families declared from commit e649a19 until the rule above: demo_confirm): SE = sqrt(s_d²/n +
  v_shared) with Welch–Satterthwaite df (study/stats/seed_test.py), a direction when the Holm-adjusted
  p = min(1, 2 P(t > (|mean| - tie) / SE)) is below α. On an edge of the tie margin it words a direction
  in more than α/2 of studies at few seeds (both tails: 3.5–3.9% at 5 seeds for the demo's rows, 2.5–2.6%
  at 40); kept to read the families declared under it.
- `seed_veto` (every family declared before 2026-12, as of commit e649a19): SE = sqrt(s_d²/n + v_sent)
  with n - 1 df, the test against no difference, and a direction only when no seed's difference lies
  beyond the tie margin the other way. v_sent = v_shared + v_int/n counts each seed's own test-set
  noise a second time (s_d already holds it), and the veto's chance of passing falls towards 0 as
  seeds are added; kept only to read the families declared under it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from study.stats.equivalence import equivalence_p
from study.stats.seed_test import ALPHA, SeedTest, planned_se, seed_p, shared_variance, t_quantile

WELCH_DF = "Welch–Satterthwaite degrees of freedom"


@dataclass(frozen=True)
class Rule:
    name: str
    summary: str  # the rule in one sentence, for the pages
    welch: bool  # Welch–Satterthwaite df (True) or n - 1
    against_tie: bool  # the decision p tests beyond ±tie (True) or against no difference (False)
    veto: bool  # no direction when a seed lies beyond the tie margin the other way
    shared: bool = True  # SE² = s_d²/n + v_shared (True), or s_d²/n + v_sent (v_int/n counted again)
    both_tails: bool = False  # the decision p is twice the two-sided p: either direction on an edge within α/2

    def known(self, seed_test: SeedTest) -> float:  # the known part of this rule's SE²
        return shared_variance(seed_test) if self.shared else seed_test.v_sent

    def se(self, seed_test: SeedTest) -> float:
        return planned_se(seed_test.seed_sd, max(self.known(seed_test), 0.0), seed_test.n)[0]

    def df(self, seed_test: SeedTest) -> float:
        """The degrees of freedom of the rule's t (infinite where the seeds do not vary, under Welch)."""
        if not self.welch:
            return seed_test.n - 1.0
        return seed_test.df if seed_test.df is not None else float("inf")

    @property
    def own_interval(self) -> bool:
        """Whether the rows' intervals are by this rule's t (else the seed test's, Welch's df)."""
        return not self.welch and not self.veto

    @property
    def interval_df(self) -> str:  # the pages' words for the intervals' reference
        return "n − 1 degrees of freedom (Student's t)" if self.own_interval else WELCH_DF

    def interval(self, seed_test: SeedTest, alpha: float = ALPHA) -> tuple[float, float]:
        """The (1 - alpha) interval of the true difference by this rule's SE and t."""
        half = t_quantile(1 - alpha / 2, self.df(seed_test)) * self.se(seed_test)
        return seed_test.mean - half, seed_test.mean + half

    def two_sided(self, alpha: float) -> float:
        """The two-sided t level a decision at `alpha` asks of the test beyond the tie margin."""
        return alpha / 2 if self.both_tails else alpha

    def decision_p(self, diffs, known, tie: float) -> np.ndarray:  # Holm adjusts it over the family
        p = seed_p(diffs, known, tie if self.against_tie else 0.0, welch=self.welch)
        return np.minimum(1.0, 2 * p) if self.both_tails else p

    def equivalence_p(self, diffs, known, margin: float) -> np.ndarray:
        return equivalence_p(diffs, known, margin, welch=self.welch)

    def direction(self, diffs, p_adjusted, tie: float, alpha: float = ALPHA) -> np.ndarray:
        """+1 / -1 where the rule words a direction (mean difference up / down), 0 where it does not."""
        d = np.asarray(diffs, dtype=np.float64)
        mean = d.mean(-1)
        says = (np.asarray(p_adjusted) < alpha) & (mean != 0)
        if self.veto:
            says &= ~np.where(mean > 0, (d < -tie).any(-1), (d > tie).any(-1))
        return np.where(says, np.sign(mean), 0).astype(int)


BEYOND_TIE_EXACT = Rule(
    "beyond_tie_exact",
    "a direction when the Holm-adjusted p of the test beyond the tie margin (SE = sqrt(s_d²/n + v_shared), "
    "Student's t with n − 1 df, both tails: twice the two-sided p) is below 0.05",
    welch=False,
    against_tie=True,
    veto=False,
    both_tails=True,
)
BEYOND_TIE = Rule(
    "beyond_tie",
    "a direction when the Holm-adjusted p of the test beyond the tie margin (SE = sqrt(s_d²/n + v_shared), "
    "Welch–Satterthwaite df) is below 0.05",
    welch=True,
    against_tie=True,
    veto=False,
)
SEED_VETO = Rule(
    "seed_veto",
    "a direction when the Holm-adjusted p of the test against no difference (SE = sqrt(s_d²/n + v_sent), "
    "n − 1 df) is below 0.05 and no seed lies beyond the tie margin the other way",
    welch=False,
    against_tie=False,
    veto=True,
    shared=False,
)
RULES = {r.name: r for r in (BEYOND_TIE_EXACT, BEYOND_TIE, SEED_VETO)}
CURRENT = BEYOND_TIE_EXACT  # what a new family names, and the exploratory reading beside an older family's
UNNAMED = SEED_VETO  # the rule of a family file that names none (declared before rules had names)
