"""The statistics of a study, pure functions of numbers: the lowest layer of study/ (it imports no
other part of it)."""
