"""The statistics of a study, pure functions of numbers (the lowest layer of study/: it imports no
other part of it): significance (sacreBLEU's paired bootstrap, over seeds; Holm), seed_test (the
seed-level test and its variance model), equivalence (TOST), rules (the decision rules, by name),
sequential (group-sequential boundaries) and sequential_family (a family decided look by look: the
graph of Holm's procedure across the comparisons)."""
