"""The study's terms as values, each spelled here once: the measures a findings table compares in
(`Measure`, built on utils/metrics.Metric), the findings tables (`Table`) and what a row's reading
says (`Outcome`). Each is a `StrEnum` whose value is the text the findings JSON, the pages and the
family file spell, so a record holds the member and writes the same bytes (json.dumps and an f-string
give the value); a member equals its text, so a family file's `table: test` matches `Table.TEST`."""

from __future__ import annotations

from enum import StrEnum

from utils.metrics import HEADLINE, METRICS, Metric

_BLEU = next(m for m in METRICS if m.name == HEADLINE)  # a study compares in the headline metric
_NLL = Metric("nll_no_eos", "NLL", 3, -1)  # teacher-forced NLL per token, EOS renormalised out (nats)


class Measure(StrEnum):
    """A measure of the findings tables: its value is its name as shown, the findings JSON's `metric`
    and the key of each of the family's numbers per measure (tie_margin, effect, equivalence:
    study/read/family.py), all of which apply to every measure; its Metric gives the digits shown and
    which way is better."""

    metric: Metric
    unit: str  # a difference's unit on the pages

    def __new__(cls, metric: Metric, unit: str) -> Measure:
        member = str.__new__(cls, metric.label)
        member._value_ = metric.label
        member.metric, member.unit = metric, unit
        return member

    SACREBLEU = (_BLEU, "BLEU")
    NLL = (_NLL, "nats")

    @property
    def digits(self) -> int:
        return self.metric.digits

    @property
    def lower_is_better(self) -> bool:
        return self.metric.direction < 0


class Table(StrEnum):
    """A findings table (study/judge/findings.py builds them, a family file's headline entries name them)."""

    DEGRADATION = "degradation"  # a pair's NLL joined minus alone
    TEST = "test"  # the test set
    CONCAT = "concat"  # inputs of k test pairs joined
    BUCKETS = "buckets"  # the test set by source length
    TEACHER_FORCED = "teacher_forced"  # the NLL beyond the training length

    @property
    def measure(self) -> Measure:
        return Measure.NLL if self in (Table.DEGRADATION, Table.TEACHER_FORCED) else Measure.SACREBLEU


class Outcome(StrEnum):
    """What a rule lets a row say (study/judge/wording.py: `outcome`, `look_outcome`)."""

    DIRECTION = "direction"  # the rule's direction test
    EQUIVALENT = "equivalent"  # shown equivalent within the margin
    BOTH = "both"  # a small real difference inside the margin
    INCONCLUSIVE = "inconclusive"  # neither, with an equivalence margin (or a sequential plan's last look)
    WITHHELD = "withheld"  # declared, but not worded yet (interim, not from the declaring commit, ...)
    DESCRIPTIVE = "descriptive"  # not declared, or no test
    NOT_TESTED = "not tested"  # no difference to test

    @property
    def worded(self) -> bool:
        """Whether it is a verdict: a direction, equivalent, both or inconclusive."""
        return self in (Outcome.DIRECTION, Outcome.EQUIVALENT, Outcome.BOTH, Outcome.INCONCLUSIVE)
