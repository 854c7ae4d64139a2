"""The names of a run folder's files, named here once (utils/run_folder.py says what a run folder is
and which of its files are the harness's; tests/test_layers.py allows these names as literals nowhere
else in the production code). A run folder is

    <run>/config.yaml           the experiment, as trained (train.py)
    <run>/metrics.jsonl         every event of training, validation and resume (train.py)
    <run>/data_report.json      the corpus as read: sizes, drops, overlaps (train.py)
    <run>/training_lengths.json the longest source and decoder input seen in training (train.py)
    <run>/provenance.json       what made the run, per session (utils/provenance.py)
    <run>/test/ (and test_<name>/, valid/, each with concat/k<K>/): scores.json, hypotheses.txt,
        references.txt, sources.txt, source_lengths.txt and the teacher-forced tables (test.py)
"""

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
DATA_REPORT = "data_report.json"
TRAINING_LENGTHS = "training_lengths.json"
PROVENANCE = "provenance.json"
SCORES = "scores.json"
HYPOTHESES = "hypotheses.txt"
REFERENCES = "references.txt"
SOURCES = "sources.txt"
SOURCE_LENGTHS = "source_lengths.txt"
TEACHER_FORCED_BEYOND = "teacher_forced_beyond.tsv"  # per input: k, input, tokens and summed NLL beyond training
TEACHER_FORCED_PAIRS = "teacher_forced_pairs.tsv"  # per pair and k: the NLL of its pair's own tokens
# the first line of each teacher-forced table: evaluation/teacher_forced.py writes it, study/read/ checks it
TSV_HEADERS = {
    TEACHER_FORCED_BEYOND: "k\tinput\ttokens\tnll_no_eos_sum",
    TEACHER_FORCED_PAIRS: "k\tpair\tstart\ttokens\tnll_sum\tnll_no_eos_sum\tbeyond_tokens\tbeyond_nll_no_eos_sum",
}

NAMES = {
    name: value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
}  # {constant: file name}: what tests/test_layers.py keeps out of the other modules' literals
