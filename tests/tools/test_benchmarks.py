"""The benchmark scripts run end to end (tiny models, one step or one short decode per case).

Timings are never asserted here: only that every contender ran, did the same amount of work,
and that the JSON carries the ratios that the README and benchmarks/README.md quote.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def benchmark_modules(monkeypatch):
    """benchmarks/ importable for this test only. Its scripts put their folder first on sys.path when
    imported; left there, a later `import train` in the same worker found benchmarks/train.py
    instead of the entry script."""
    monkeypatch.setattr(sys, "path", [str(ROOT / "benchmarks"), *sys.path])


def run_script(script: str, args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, f"benchmarks/{script}", *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.mark.slow
def test_decode_benchmark_runs_every_contender_on_equal_work(tmp_path: Path) -> None:
    out = tmp_path / "decode.json"
    proc = run_script(
        "decode.py",
        [
            "--size",
            "tiny",
            "--sentences",
            "3",
            "--out_len",
            "6",
            "--repeats",
            "1",
            "--threads",
            "1",
            "--device",
            "cpu",
            "--output",
            str(out),
        ],
    )
    data = json.loads(out.read_text())
    cases = {r["case"]: r for r in data["results"]}
    kinds = ("cached", "uncached", "legacy", "graphed")
    ours = {f"ours_{search}_{kind}" for search in ("greedy", "beam5") for kind in kinds}
    ct2 = {f"ct2_{search}_{kind}" for search in ("greedy", "beam5") for kind in ("float32", "int8")}
    assert set(cases) == ours | ct2 | {"hf_greedy", "hf_beam5"}
    for r in cases.values():
        # Equal work: every contender emits exactly out_len tokens for every sentence (EOS forced at the end).
        assert r["output_tokens"] in (3 * 6, 3 * 7), r  # ours counts the final EOS, generate() may too
        assert positive(r["sentences_per_sec"]) and positive(r["peak_memory_mb"])
    assert cases["ours_greedy_cached"]["output_tokens"] == cases["ours_greedy_uncached"]["output_tokens"]
    for search in ("greedy", "beam5"):  # the search before issue 47 and the fixed-shape step do the same work
        for kind in ("legacy", "graphed"):
            assert cases[f"ours_{search}_{kind}"]["output_tokens"] == cases[f"ours_{search}_cached"]["output_tokens"]
    for search in ("greedy", "beam5"):  # CTranslate2 decodes as many tokens as the harness, in as many batches
        for kind in ("float32", "int8"):
            ct2, ours = cases[f"ct2_{search}_{kind}"], cases[f"ours_{search}_cached"]
            assert (ct2["output_tokens"], ct2["batches"]) == (ours["output_tokens"], ours["batches"])
            assert ct2["compute_type"] == kind and ct2["beam"] == ours["beam"]
    peers = ("hf_generate", "ours")
    for key in (
        "greedy_cached_over_uncached",
        "beam5_over_hf_generate",
        "beam5_cached_over_uncached",
        "greedy_over_hf_generate",
        "beam5_over_legacy",
        "greedy_over_legacy",
        *(f"{s}_graphed_over_{p}" for s in ("beam5", "greedy") for p in ("hf_generate", "cached")),
        *(f"ct2_{s}_{k}_over_{p}" for s in ("beam5", "greedy") for k in ("int8", "float32") for p in peers),
    ):
        assert positive(data[key]) and key in proc.stdout
        assert len(data["ratios_per_round"][key]) == 1
    assert data["settings"]["size"] == "tiny" and data["settings"]["d_model"] == 32
    assert data["settings"]["device"] == "cpu"


@pytest.mark.slow
def test_decode_benchmark_runs_only_the_chosen_cases(tmp_path: Path) -> None:
    """`--cases` skips the others and runs these in the order given; only the ratios whose two cases
    ran are reported. With --max_tokens, all decode the same token-budget batches (the beam
    counted, as in test.py)."""
    out = tmp_path / "decode.json"
    proc = run_script(
        "decode.py",
        [
            "--size",
            "tiny",
            "--sentences",
            "5",
            "--out_len",
            "4",
            "--repeats",
            "1",
            "--threads",
            "1",
            "--device",
            "cpu",
            "--cases",
            "hf_beam5",
            "ours_beam5_cached",
            "ct2_beam5_int8",
            "--max_tokens",
            "225",
            "--output",
            str(out),
        ],
    )
    data = json.loads(out.read_text())
    assert [r["case"] for r in data["results"]] == ["hf_beam5", "ours_beam5_cached", "ct2_beam5_int8"]
    (hf, ours, ct2) = data["results"]
    assert data["settings"]["max_tokens"] == 225 and ours["batches"] == hf["batches"] == ct2["batches"] > 1
    assert ours["output_tokens"] in (5 * 4, 5 * 5) and ct2["output_tokens"] == ours["output_tokens"]
    assert data["settings"]["cases"] == ["hf_beam5", "ours_beam5_cached", "ct2_beam5_int8"]
    for key in ("beam5_over_hf_generate", "ct2_beam5_int8_over_hf_generate", "ct2_beam5_int8_over_ours"):
        assert positive(data[key]) and key in proc.stdout
    assert "ct2_beam5_float32_over_ours" not in data and "ct2_greedy_int8_over_ours" not in data
    assert "greedy_cached_over_uncached" not in data and "greedy_cached_over_uncached" not in proc.stdout


def test_decode_benchmark_cuts_a_set_into_token_budget_batches(benchmark_modules) -> None:
    """--max_tokens: every sentence once, sorted by length, in batches within the budget with the
    beam counted as test.py counts it, and no column of padding alone."""
    from decode import PAD, make_sources, token_budget_batches

    src = make_sources(9, 100)
    for beam in (1, 5):
        batches = token_budget_batches(src, 45 * beam, beam)  # test.py's budget counts the beam
        assert sum(len(b) for b in batches) == 9 and len(batches) > 1
        assert all(len(b) * b.size(1) * beam <= 45 * beam or len(b) == 1 for b in batches)
        lengths = [int(n) for b in batches for n in b.ne(PAD).sum(1)]
        assert lengths == sorted(int(n) for n in src.ne(PAD).sum(1))  # every sentence once, by length
        assert all(bool(b[:, -1].ne(PAD).any()) for b in batches)  # no all-padding column
        assert sorted(map(tuple, (r[r.ne(PAD)].tolist() for b in batches for r in b))) == sorted(
            map(tuple, (r[r.ne(PAD)].tolist() for r in src))
        )


@pytest.mark.slow
def test_train_benchmark_runs_every_contender_on_the_same_batches(tmp_path: Path) -> None:
    out = tmp_path / "train.json"
    proc = run_script(
        "train.py", ["--size", "tiny", "--max_tokens", "300", "--steps", "1", "--threads", "1", "--output", str(out)]
    )
    data = json.loads(out.read_text())
    cases = {r["case"]: r for r in data["results"]}
    # on a CPU every contender but the compiled step (minutes of compilation) by default
    assert set(cases) == {"ours_sinusoidal", "ours_rope", "hf_marian", "nn_transformer", "ours_legacy"} | {
        "ours_sinusoidal_packed"
    }
    tokens = {r["target_tokens"] for case, r in cases.items() if not case.endswith("_packed")}
    assert len(tokens) == 1 and tokens.pop() > 0  # the same batches for every model
    assert positive(cases["ours_sinusoidal_packed"]["target_tokens"])  # the same pairs' lengths, in packed rows
    assert cases["ours_sinusoidal_packed"]["host_syncs_per_step"] == 0  # its pair lengths are read on the host
    for r in cases.values():
        assert positive(r["tokens_per_sec"]) and positive(r["peak_mb"]) and r["params"] > 0
    assert cases["ours_sinusoidal"]["params"] == cases["ours_rope"]["params"]  # neither encoding has weights
    assert positive(cases["ours_sinusoidal"]["flops_per_target_token"])
    assert cases["ours_legacy"]["params"] == cases["ours_sinusoidal"]["params"]  # the same model, the old step
    for key in (
        "ratio_vs_marian",
        "ratio_vs_nn_transformer",
        "fraction_of_matmul_peak",
        "matmul_peak_gflops",
        "ratio_vs_legacy_engine",
        "legacy_fraction_of_matmul_peak",
        "packed_over_eager",
    ):
        assert positive(data[key]) and key in proc.stdout
    assert data["settings"]["size"] == "tiny"
    # train.py's own step reads nothing back from the device; every contender's count is reported
    assert data["host_syncs_per_step"] == 0 and "host_syncs_per_step: 0" in proc.stdout
    assert cases["ours_sinusoidal"]["host_syncs_per_step"] == cases["ours_rope"]["host_syncs_per_step"] == 0
    assert all(isinstance(r["host_syncs_per_step"], int) for r in cases.values())
    # the step as it was reads the token count, the non-finite check, the loss and the norm back
    assert {"benchmarks/train_contenders.py:" in w for w in cases["ours_legacy"]["host_syncs_at"]} == {True}
    assert cases["ours_legacy"]["host_syncs_per_step"] >= 4


@pytest.mark.slow
def test_attention_benchmark_compares_the_kernel_with_its_peers(tmp_path: Path) -> None:
    """benchmarks/attention.py: every contender on every shape, outputs checked equal, ratios in the JSON."""
    sys.path.insert(0, str(ROOT))
    from decoding import cpu_kernel

    out = tmp_path / "attention.json"
    proc = run_script(
        "attention.py",
        [
            "--sentences",
            "2",
            "--heads",
            "2",
            "--head_dim",
            "16",
            "--lengths",
            "2",
            "5",
            "--src_len",
            "7",
            "--repeats",
            "1",
            "--layers",
            "2",
            "--threads",
            "1",
            "--output",
            str(out),
        ],
    )
    data = json.loads(out.read_text())
    rows = data["results"]
    assert [(r["shape"], r["keys"]) for r in rows] == [("self", 10), ("self", 25), ("cross", 7)]
    contenders = ["kernel", "indexed", "matmul", "sdpa"] if cpu_kernel.available() else ["matmul", "sdpa"]
    assert data["settings"]["kernel"] == ("kernel" in contenders)
    for r in rows:
        assert r["max_abs_diff"] < 1e-5, r
        timed = [name for name in contenders if not (name == "indexed" and r["shape"] == "cross")]
        assert all(positive(r[f"{name}_us"]) for name in timed), r
        assert ("indexed_us" in r) == ("indexed" in timed)  # the index is for self-attention only
    if "kernel" in contenders:
        assert all(positive(v) for v in data["kernel_over_matmul"].values())
        assert all(positive(v) for v in data["kernel_over_sdpa"].values())
        assert sorted(data["indexed_over_kernel"]) == ["self_2", "self_5"]
        assert all(positive(v) for v in data["indexed_over_kernel"].values())
        assert "kernel / matmul" in proc.stdout and "indexed / kernel" in proc.stdout


def report_unless_bad(case: str, queue) -> None:
    """A benchmark case for run_rounds: the case named "bad" dies without a result."""
    if case == "bad":
        raise SystemExit(3)
    queue.put({"case": case, "value": 1.0})


@pytest.mark.slow
def test_a_case_that_dies_is_reported_and_the_others_are_kept(tmp_path: Path, benchmark_modules) -> None:
    from common import run_rounds, write_results

    by = run_rounds(["good", "bad"], report_unless_bad, (), 1, "value", "units")
    assert list(by) == ["good"]
    out = tmp_path / "results.json"
    assert write_results(out, {}, list(by.values()), {}, {}, requested=["good", "bad"]) == 1
    assert json.loads(out.read_text())["settings"]["failed_cases"] == ["bad"]
    assert write_results(out, {}, list(by.values()), {}, {}, requested=["good"]) == 0


def report_unless_slow(case: str, queue) -> None:
    """A benchmark case for run_rounds: the case named "slow" takes far longer than the test waits."""
    import time

    if case == "slow":
        time.sleep(120)
    queue.put({"case": case, "value": 1.0})


@pytest.mark.slow
def test_a_stopped_benchmark_keeps_what_it_measured(tmp_path: Path) -> None:
    """SIGTERM (gpu_check.sh's per-step `timeout`) while a case runs: the finished cases are still
    returned, in the order given, and the running one is stopped and left out."""
    import signal
    import time

    script = (
        "import json, sys; sys.path[:0] = ['benchmarks', 'tests/tools']\n"
        "from common import run_rounds\nfrom test_benchmarks import report_unless_slow\n"
        "by = run_rounds(['second', 'first', 'slow'], report_unless_slow, (), 1, 'value', 'units')\n"
        "print('RESULT', json.dumps(list(by)))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    lines = []
    for line in proc.stdout:  # the two quick cases have reported: the slow one is running
        lines.append(line)
        if "first" in line:
            break
    time.sleep(1)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    assert time.monotonic() - start < 30  # the slow case was stopped, not waited for
    assert proc.returncode == 0, "".join(lines) + rest
    assert "stopped" in rest
    assert json.loads(rest.split("RESULT ", 1)[1]) == ["second", "first"]


@pytest.mark.slow
def test_train_benchmark_profiles_a_case_on_request(tmp_path: Path) -> None:
    """--profile DIR: the busiest operators of a few untimed steps per case (what the next GPU check
    reads to see where a step's time goes)."""
    run_script(
        "train.py",
        [
            "--size",
            "tiny",
            "--max_tokens",
            "300",
            "--steps",
            "2",
            "--threads",
            "1",
            "--cases",
            "ours_sinusoidal",
            "--profile",
            str(tmp_path / "prof"),
            "--output",
            str(tmp_path / "train.json"),
        ],
    )
    table = (tmp_path / "prof" / "profile_ours_sinusoidal.txt").read_text()
    assert table.startswith("2 steps; sorted by cpu_time_total")
    assert "aten::mm" in table or "aten::addmm" in table or "aten::linear" in table
    assert json.loads((tmp_path / "train.json").read_text())["results"][0]["case"] == "ours_sinusoidal"


@pytest.mark.slow
def test_the_ceiling_benchmark_counts_every_product_of_a_training_step(tmp_path: Path, benchmark_modules) -> None:
    """benchmarks/ceiling.py: the GEMM FLOPs of a step are those of every linear layer's forward and
    two backward products (6 x rows x in x out each), attention's forward and backward are counted,
    and the fractions it reports lie between 0 and the peak's own."""
    from ceiling import linear_shapes

    out = tmp_path / "ceiling.json"
    run_script("ceiling.py", ["--size", "tiny", "--tokens", "64", "--length", "8", "--repeats", "1",
                              "--threads", "1", "--output", str(out)])  # fmt: skip
    data = json.loads(out.read_text())
    d, f, v, layers = 32, 64, 500, 1  # the tiny size
    params = layers * (2 * (3 * d * d) + 3 * d * d + d * d + d * 2 * d + 2 * d * f + 2 * f * d) + d * v
    gemm = sum(r["flops"] for r in data["results"] if r["kind"] == "gemm")
    assert gemm == 6 * 64 * params  # forward 2, backward 4 FLOPs per weight per token
    assert sum(n * k * o * c for _, n, k, o, c in linear_shapes(64, data["settings"])) == 64 * params
    attention = [r for r in data["results"] if r["kind"] == "attention"]
    assert len(attention) == 3 and all(positive(r["flops"]) and positive(r["seconds"]) for r in attention)
    assert 0 < data["ceiling_fraction"] < data["gemm_attention_fraction"] <= 1.5
    assert positive(data["matmul_peak_tflops"]) and data["settings"]["tokens"] == 64


@pytest.mark.slow
@pytest.mark.parametrize("contender", ["cuda_graphs", "legacy"])
def test_search_equality_compares_a_trained_models_test_lines(contender, trained_run, tmp_path, benchmark_modules):
    """benchmarks/search_equality.py on a trained run: today's search and the contender (the fixed-shape
    step of decoding.cuda_graphs, eager on a CPU; or the search before issue 47) find the same
    hypothesis on every test line, greedy and beam 4, and their sacreBLEU is reported alike."""
    import search_equality

    out = tmp_path / "equality.json"
    assert search_equality.main([str(trained_run), "--contender", contender, "--output", str(out)]) == 0
    (row,) = json.loads(out.read_text())["runs"]
    assert row["lines"] > 0 and row["contender"] == contender and row["device"] == "cpu"
    for search in ("greedy", "beam4"):
        assert row[f"{search}_identical"] == 1.0
        assert row[f"{search}_sacrebleu"] == row[f"{search}_{contender}_sacrebleu"]


def test_the_readmes_gpu_figures_are_read_from_the_benchmark_files(tmp_path: Path, benchmark_modules) -> None:
    """benchmarks/figures.py: every GPU figure of the README comes from a file gpu_check.sh writes,
    the newest training file first; a file not there is said to be not measured."""
    from figures import gpu_figures

    assert gpu_figures(tmp_path).count("not measured on a GPU yet") == 3
    device = {"device_name": "NVIDIA H200", "torch": "2.11.0+cu130"}
    train = {
        "settings": {**device, "max_tokens": 32000},
        "matmul_peak_gflops": 780000.0,
        "ratio_vs_marian": 1.14,
        "cudagraphs_ratio_vs_marian": 2.61,
        "cudagraphs_fraction_of_matmul_peak": 0.253,
        "ratios_per_round": {"cudagraphs_ratio_vs_marian": [2.5, 2.61, 2.7]},
        "results": [{"case": "ours_sinusoidal_cudagraphs", "tokens_per_sec": 512345.0}],
    }
    files = {
        "train_cuda.json": {**train, "settings": {**device, "max_tokens": 12000}},
        "train_cuda_32k.json": train,
        "decode_cuda_testset.json": {
            "settings": {**device, "sentences": 2000, "max_tokens": 30000},
            "beam5_over_hf_generate": 1.31,
            "beam5_graphed_over_hf_generate": 2.04,
            "results": [{"case": "ours_beam5_cached", "sentences_per_sec": 571.9}],
        },
        "graph_equality_cuda.json": {"runs": [{"beam4_identical": 0.998, "greedy_identical": 1.0, "lines": 2000}]},
        "ceiling_cuda.json": {
            "settings": {"tokens": 32000},
            "ceiling_fraction": 0.41,
            "gemm_fraction": 0.72,
            "gemm_attention_fraction": 0.55,
        },
    }
    for name, data in files.items():
        (tmp_path / name).write_text(json.dumps(data))
    text = gpu_figures(tmp_path)
    assert "not measured" not in text
    for figure in (
        "32,000-token",
        "512,345",
        "**2.61×**",
        "per round 2.50, 2.61, 2.70",
        "25.3%",
        "780 TFLOP/s",
        "1.14×",
        "572 sentences/s",
        "1.31×",
        "**2.04×**",
        "99.8% (beam 4)",
        "100.0% (greedy)",
        "allow at most 41%",
        "GEMMs alone 72%",
        "NVIDIA H200",
    ):
        assert figure in text, figure
    partial = {**files["decode_cuda_testset.json"], "settings": {**device, "sentences": 2000, "max_tokens": 30000}}
    del partial["beam5_over_hf_generate"], partial["beam5_graphed_over_hf_generate"]
    partial["results"], partial["settings"]["cases"] = [], ["ours_beam5_graphed", "hf_beam5"]
    (tmp_path / "decode_cuda_testset.json").write_text(json.dumps(partial))  # a step stopped by its limit
    assert "`decoding.cuda_graphs` against Marian not measured" in gpu_figures(tmp_path)


@pytest.mark.slow
def test_decode_benchmark_profiles_a_case_on_request(tmp_path: Path) -> None:
    """--profile DIR: one more decode of each case under torch.profiler, its busiest operators written
    (what gpu_check.sh decode brings back for the graphed and the eager step)."""
    args = ["--size", "tiny", "--sentences", "2", "--out_len", "3", "--repeats", "1", "--threads", "1"]
    args += ["--device", "cpu", "--cases", "ours_beam5_graphed", "--profile", str(tmp_path / "prof")]
    run_script("decode.py", [*args, "--output", str(tmp_path / "decode.json")])
    text = (tmp_path / "prof" / "profile_ours_beam5_graphed.txt").read_text()
    assert text.startswith("1 steps; sorted by cpu_time_total") and "aten::" in text
