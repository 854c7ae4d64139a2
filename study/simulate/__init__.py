"""The decision rules simulated on an archived family, its findings JSON: calibration (a fixed
family: false directions, power, coverage) and sequential_calibration (a sequential family decided
look by look). Beside judge/: it imports statistics, records and read."""
