"""The decision rules simulated on an archived family (its findings JSON). Beside judge/: it imports
statistics, records and read."""
