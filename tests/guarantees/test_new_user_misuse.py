"""Nothing lost in a replay of the misuse cases a new user tries, each through the
real entry point. An `--output=~/...` the shell left unexpanded is refused, not written into a `~`
folder here (utils/user_paths.py: check_home_expanded); a checkpoint or export with NaN weights is never
scored, exported or averaged as a model (artifacts/checkpoint.py: check_finite_weights, one text for
all); checkpoints of other shapes are not averaged; a cut or binary test output is one
line naming it (study/read/run_outputs.py: output_lines, paired_lines); a checkpoint that is a
folder, a `checkpoints` that is a file and a newer export are named as such; a sweep given one seed
or one config twice says so (commands/sweep_plan.py: check_given_once)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from helpers import CONFIG, ROOT, copy_of, one_error_line, scored_and_sinusoidal, snapshot, tiny_overrides, with_sets
from in_process import run_in_process as run


@pytest.fixture(scope="module")
def compared_pair(trained_run: Path, tmp_path_factory) -> tuple[Path, Path]:
    return scored_and_sinusoidal(trained_run, tmp_path_factory.mktemp("r3-replay"))


def with_nan_weights(path: Path) -> None:
    ckpt = torch.load(path, weights_only=False)
    ckpt["model"] = {k: v * float("nan") if v.is_floating_point() else v for k, v in ckpt["model"].items()}
    torch.save(ckpt, path)


# ---- an output path the shell did not expand


@pytest.mark.parametrize(
    "command",
    [
        ["inference.py", "--run", "RUN", "--src_text", "Bonjour.", "--output=~/r3-replay.txt"],
        ["export.py", "--run", "RUN", "--output=~/r3-replay-export"],
        ["average.py", "--run", "RUN", "--average_last", "1", "--output=~/r3-replay.pt"],
    ],
    ids=["inference", "export", "average"],
)
def test_unexpanded_tilde_is_refused_not_a_folder_here(trained_run, tmp_path, command):
    args = [str(trained_run) if a == "RUN" else a for a in command]
    proc = run([str(ROOT / args[0]), *args[1:]], cwd=tmp_path)
    line = one_error_line(proc)
    assert "'~'" in line and "did not expand" in line, line
    assert not (tmp_path / "~").exists()


@pytest.mark.parametrize("given", [["--runs_root=~/r3-runs"], ["--output=~/r3-sum"], ["--set", "run_dir=~/r3-run"]])
def test_sweep_with_unexpanded_tilde_trains_nothing_here(tmp_path, given):
    proc = run([str(ROOT / "sweep.py"), str(ROOT / CONFIG), *given], cwd=tmp_path)
    assert "did not expand" in one_error_line(proc)
    assert not (tmp_path / "~").exists() and not (tmp_path / "runs").exists()


def test_train_run_dir_with_unexpanded_tilde_makes_no_folder_here(tmp_path):
    sets = tiny_overrides(tmp_path / "unused", tmp_path / "cache")
    proc = run(
        [str(ROOT / "train.py"), "--config", str(ROOT / CONFIG), *with_sets(sets, "run_dir=~/r3-run")], cwd=tmp_path
    )
    assert "run_dir ~/r3-run" in one_error_line(proc)
    assert not (tmp_path / "~").exists()


@pytest.mark.parametrize("command", ["average.py", "export.py", "inference.py"])
def test_output_under_a_file_names_the_file(trained_run, tmp_path, command):
    user = tmp_path / "notes"
    user.write_text("mine\n")
    extra = {"average.py": ["--average_last", "1"], "inference.py": ["--src_text", "x"]}.get(command, [])
    proc = run([command, "--run", str(trained_run), *extra, "--output", str(user / "out")])
    assert f"{user} is a file, not a folder" in one_error_line(proc)
    assert user.read_text() == "mine\n"


# ---- NaN weights are not a model


def test_nan_checkpoint_is_not_scored_exported_or_averaged(trained_run, tmp_path):
    run_dir = copy_of(trained_run, tmp_path / "run")
    shutil.rmtree(run_dir / "test", ignore_errors=True)
    for path in (run_dir / "checkpoints").glob("*.pt"):
        with_nan_weights(path)
    before = snapshot(run_dir)
    for command in (
        ["test.py", "--run", str(run_dir)],
        ["inference.py", "--run", str(run_dir), "--src_text", "Bonjour."],
        ["export.py", "--run", str(run_dir), "--output", str(tmp_path / "export")],
        ["average.py", "--run", str(run_dir), "--average_last", "2"],
    ):
        line = one_error_line(run(command))
        assert "non-finite weights" in line and "checkpoints/" in line, (command, line)
    assert snapshot(run_dir) == before and not (tmp_path / "export").exists()


def test_checkpoints_of_other_shapes_are_not_averaged(trained_run, tmp_path):
    run_dir = copy_of(trained_run, tmp_path / "run")
    oldest = min(int(p.stem.split("_")[-1]) for p in (run_dir / "checkpoints").glob("last_*.pt"))
    for path in (run_dir / "checkpoints").glob(f"*_{oldest}*.pt"):
        ckpt = torch.load(path, weights_only=False)
        ckpt["model"]["src_embed.weight"] = torch.zeros(5, ckpt["model"]["src_embed.weight"].shape[1])
        torch.save(ckpt, path)
    line = one_error_line(run(["average.py", "--run", str(run_dir), "--average_last", "2"]))
    assert "different model" in line and "shapes" in line, line
    assert not list((run_dir / "checkpoints").glob("averaged_*"))


# ---- damaged test outputs compared


@pytest.mark.parametrize("damage", ["cut", "binary"])
def test_damaged_hypotheses_are_named(compared_pair, tmp_path, damage):
    rope, sinusoidal = (copy_of(r, tmp_path / r.name) for r in compared_pair)
    hyps = rope / "test" / "hypotheses.txt"
    if damage == "cut":
        hyps.write_text("".join(hyps.read_text().splitlines(keepends=True)[:3]))
    else:
        hyps.write_bytes(b"\xff\xfe\xd3" * 40)
    line = one_error_line(run(["compare.py", str(rope), str(sinusoidal), "--output", str(tmp_path / "sum")]))
    assert str(hyps) in line and "test.py --run" in line, line
    assert not list(tmp_path.glob("sum*"))


def test_untested_run_in_compare_is_said(compared_pair, tmp_path):
    rope, sinusoidal = (copy_of(r, tmp_path / r.name) for r in compared_pair)
    shutil.rmtree(sinusoidal / "test")
    proc = run(["compare.py", str(rope), str(sinusoidal), "--output", str(tmp_path / "sum")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    notes = [line for line in proc.stderr.splitlines() if "has no test scores" in line]
    assert len(notes) == 1 and str(sinusoidal) in notes[0] and f"test.py --run {sinusoidal}" in notes[0], proc.stderr


def test_damaged_written_record_is_named_and_nothing_replaced(compared_pair, tmp_path):
    rope, sinusoidal = compared_pair
    prefix = tmp_path / "sum"
    assert run(["compare.py", str(rope), str(sinusoidal), "--output", str(prefix)]).returncode == 0
    (tmp_path / ".harness_written.json").write_text("garbage{")
    before = snapshot(tmp_path)
    proc = run(["compare.py", str(rope), str(sinusoidal), "--output", str(prefix), "--overwrite"])
    assert ".harness_written.json" in one_error_line(proc) and "unreadable" in proc.stderr
    assert snapshot(tmp_path) == before


def test_baseline_encoding_of_two_configurations_is_refused(compared_pair, tmp_path):
    rope, sinusoidal = compared_pair
    other = copy_of(sinusoidal, tmp_path / "sinusoidal_warm")
    config = other / "config.yaml"
    config.write_text(re.sub(r"(?m)^  max_steps: .*$", "  max_steps: 7", config.read_text()))
    assert config.read_text() != (sinusoidal / "config.yaml").read_text()
    proc = run(["compare.py", str(rope), str(sinusoidal), str(other), "--baseline", "sinusoidal"])
    assert "matches 2 configurations" in one_error_line(proc)


def test_glob_over_runs_beside_a_summary_passes_the_files_over(compared_pair, tmp_path):
    for r in compared_pair:
        copy_of(r, tmp_path / r.name)
    (tmp_path / "summary.md").write_text("an earlier summary\n")
    proc = run(["compare.py", str(tmp_path / "*"), "--no_significance"])
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "summary.md" not in proc.stderr


# ---- damaged run and export files named as what they are


def test_checkpoint_folder_and_checkpoints_file_are_named(trained_run, tmp_path):
    run_dir = copy_of(trained_run, tmp_path / "run")
    for path in (run_dir / "checkpoints").glob("best_*.pt"):
        path.unlink()
    folder = run_dir / "checkpoints" / "best_checkpoint_9_valid_loss=-1.0000.pt"
    folder.mkdir()
    line = one_error_line(run(["inference.py", "--run", str(run_dir), "--src_text", "x"]))
    assert str(folder) in line and "is a folder, not a checkpoint file" in line, line
    shutil.rmtree(run_dir / "checkpoints")
    (run_dir / "checkpoints").write_text("x\n")
    line = one_error_line(run(["inference.py", "--run", str(run_dir), "--src_text", "x"]))
    assert "checkpoints is a file" in line, line


def test_checkpoint_file_given_as_run_points_to_model_path(trained_run):
    best = next((trained_run / "checkpoints").glob("best_*.pt"))
    line = one_error_line(run(["inference.py", "--run", str(best), "--src_text", "x"]))
    assert f"--model_path {best}" in line, line


def test_newer_export_says_update_the_harness(trained_run, tmp_path):
    out = tmp_path / "export"
    assert run(["export.py", "--run", str(trained_run), "--output", str(out)]).returncode == 0
    meta = json.loads((out / "config.json").read_text())
    meta["format_version"] = 99
    (out / "config.json").write_text(json.dumps(meta))
    line = one_error_line(run(["inference.py", "--model_path", str(out), "--src_text", "x"]))
    assert "newer than this harness reads" in line and "version 99" in line, line


# ---- a sweep given the same thing twice


@pytest.mark.parametrize(
    "given, said",
    [
        (["configs/demo/rope.yaml", "--seeds", "1", "1"], "--seeds names seed 1 more than once"),
        (["configs/demo/rope.yaml", "./configs/demo/../demo/rope.yaml"], "is given twice"),
        (["configs/nomatch/*.yaml"], "matches no config file"),
    ],
    ids=["seed-twice", "config-twice", "glob-unmatched"],
)
def test_sweep_given_the_same_thing_twice_says_so(tmp_path, given, said):
    proc = run(["sweep.py", *given, "--runs_root", str(tmp_path / "runs"), "--output", str(tmp_path / "sum")])
    line = one_error_line(proc)
    assert said in line, line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--partition", "gpu"], "--partition is not read by --launcher serial"),
        (["--gpus_per_run", "1"], "--gpus_per_run is not read by --launcher serial"),
        (["--launcher", "local", "--mem", "4G"], "--mem is not read by --launcher local"),
        (["--launcher", "slurm", "--runs_per_gpu", "2"], "--runs_per_gpu is not read by --launcher slurm"),
    ],
    ids=["partition-serial", "gpus-serial", "mem-local", "runs_per_gpu-slurm"],
)
def test_launch_flag_the_launcher_ignores_is_refused(tmp_path, flags, said):
    # (a missing corpus: were the flag ignored, the sweep would fail fast instead of training)
    proc = run(["sweep.py", CONFIG, *flags, "--runs_root", str(tmp_path / "runs"), "--set", "data.path=/nonexistent"])
    assert said in one_error_line(proc)
    assert not (tmp_path / "runs").exists()


def test_variant_that_changes_the_model_is_refused_before_training(tmp_path):
    args = ["--variant", "big", "model.d_model=64", "--runs_root", str(tmp_path / "runs")]
    proc = run(["sweep.py", CONFIG, *args, "--set", "data.path=/nonexistent"])
    line = one_error_line(proc)
    assert "--variant big" in line and "model.d_model=64" in line, line
    assert not (tmp_path / "runs").exists()


def test_a_loose_checkpoint_beside_a_users_config_is_not_judged_as_a_run(trained_run, tmp_path):
    mine = tmp_path / "mine"  # a folder of the user's: their own (other) config and a copied checkpoint
    mine.mkdir()
    text = re.sub(
        r"(  positional:\n)(    .*\n)+", r"\1    name: sinusoidal\n", (trained_run / "config.yaml").read_text()
    )
    assert "name: sinusoidal" in text  # another experiment than the checkpoint's (rope)
    (mine / "config.yaml").write_text(text)
    shutil.copy(next((trained_run / "checkpoints").glob("best_*.pt")), mine / "model.pt")
    proc = run(["inference.py", "--model_path", str(mine / "model.pt"), "--src_text", "Bonjour."])
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
