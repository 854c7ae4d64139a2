"""The real TensorBoard server serves a run's validation loss as logged in metrics.jsonl.

Starts `tensorboard --logdir <run>` on a free localhost port, waits until it answers, and reads
the `valid/loss` series back through its HTTP data API (no network beyond 127.0.0.1).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from helpers import free_ports, read_jsonl, stop_process
from in_process import run_in_process as run

# Never through a proxy from the environment: the server is on 127.0.0.1.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get_json(url: str):
    with OPENER.open(url, timeout=10) as response:
        return json.loads(response.read().decode("utf-8"))


def tensorboard_command() -> list[str]:
    script = Path(sys.executable).parent / "tensorboard"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tensorboard.main"]


def wait_for_tag(base: str, tag: str, proc: subprocess.Popen, log: Path, timeout: float = 90.0) -> str:
    """The name of the run that has `tag`, once the server answers and has loaded it."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"tensorboard exited with {proc.returncode}: {log.read_text()[-3000:]}")
        try:
            tags = get_json(f"{base}/data/plugin/scalars/tags")
            runs = [run for run, run_tags in tags.items() if tag in run_tags]
            if runs:
                return runs[0]
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            pass  # not listening yet
        time.sleep(0.5)
    pytest.fail(f"tensorboard did not serve {tag!r} within {timeout:.0f}s: {log.read_text()[-3000:]}")


@contextlib.contextmanager
def tensorboard_server(logdir: Path, tmp_path: Path, tag: str):
    """A real `tensorboard` on a free localhost port: yields (base URL, name of the run that has `tag`)."""
    (port,) = free_ports()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "tensorboard.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                *tensorboard_command(),
                "--logdir",
                str(logdir),
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
                "--load_fast",
                "false",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            yield base, wait_for_tag(base, tag, proc, log)
        finally:
            stop_process(proc, timeout=15)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """The tiny RoPE run of tests/conftest.py, trained with its TensorBoard images (the attention
    maps the HParams test reads; the shared trained run logs none)."""
    from helpers import tiny_overrides
    from in_process import run_in_process

    base = tmp_path_factory.mktemp("e2e-images")
    run_dir = base / "run"
    proc = run_in_process(
        ["train.py", "--config", "configs/demo/rope.yaml", *tiny_overrides(run_dir, base / "cache", images=True)]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


@pytest.mark.slow
def test_tensorboard_serves_the_logged_validation_loss(trained_run: Path, tmp_path: Path) -> None:  # noqa: F811
    with tensorboard_server(trained_run, tmp_path, "valid/loss") as (base, run_name):
        assert run_name in get_json(f"{base}/data/runs")
        assert run_name == "tb"  # the events live in <run>/tb/
        query = urllib.parse.urlencode({"tag": "valid/loss", "run": run_name})
        series = get_json(f"{base}/data/plugin/scalars/scalars?{query}")  # [[wall_time, step, value], ...]
        grad_norm = get_json(
            f"{base}/data/plugin/scalars/scalars?" + urllib.parse.urlencode({"tag": "train/grad_norm", "run": run_name})
        )
    records = read_jsonl(trained_run / "metrics.jsonl")
    logged = [r for r in records if r["event"] == "valid"]
    assert [step for _, step, _ in series] == [r["step"] for r in logged] == [3, 6]
    assert [value for _, _, value in series] == pytest.approx([r["valid_loss"] for r in logged], rel=1e-5)
    trained = [r for r in records if r["event"] == "train"]
    assert [v for _, _, v in grad_norm] == pytest.approx([r["grad_norm"] for r in trained], rel=1e-5)
    assert all(r["grad_norm"] > 0 for r in trained)


def hparams_request(base: str, route: str, request: dict):
    return get_json(f"{base}/data/plugin/hparams/{route}?" + urllib.parse.urlencode({"request": json.dumps(request)}))


@pytest.mark.slow
def test_a_sweep_reviews_in_the_hparams_dashboard(trained_run: Path, tmp_path: Path) -> None:
    """Each run is an HParams session (encoding, its options, sizes, seed, ...) whose metrics are its
    validation scalars and the test scores test.py adds; attention maps are images of the run."""
    sweep = tmp_path / "runs"
    run_dir = sweep / "rope"
    shutil.copytree(trained_run, run_dir)
    tested = run(["test.py", "--run", str(run_dir), "--concat", "1", "2"])
    assert tested.returncode == 0, tested.stderr[-2000:]
    scores = json.loads((run_dir / "test" / "scores.json").read_text())
    with tensorboard_server(sweep, tmp_path, "test/sacrebleu") as (base, run_name):
        assert run_name == "rope/tb"
        experiment = hparams_request(base, "experiment", {"experimentName": ""})
        hparams = {h["name"] for h in experiment["hparamInfos"]}
        assert {"model.positional.name", "model.positional.theta", "seed", "model.d_model", "training.lr"} <= hparams
        order = [m["name"]["tag"] for m in experiment["metricInfos"]]
        assert {"valid/loss", "valid/bleu", "test/sacrebleu", "test/chrf", "test_concat/k2_sacrebleu"} <= set(order)
        # the dashboard ticks the first five metrics it is served: the headline score is one of them
        assert "test/sacrebleu" in order[:5], order
        groups = hparams_request(
            base,
            "session_groups",
            {
                "experimentName": "",
                "startIndex": 0,
                "sliceSize": 10,
                "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
                "colParams": [
                    {"hparam": "model.positional.name"},
                    {"metric": {"tag": "test/sacrebleu", "group": ""}},
                    {"metric": {"tag": "test_concat/k2_sacrebleu", "group": ""}},
                ],
            },
        )
        (group,) = groups["sessionGroups"]
        assert group["hparams"]["model.positional.name"] == "rope"
        values = {m["name"]["tag"]: m["value"] for m in group["metricValues"]}
        assert values["test/sacrebleu"] == pytest.approx(scores["sacrebleu"], rel=1e-5)
        k2 = next(row for row in scores["concat"] if row["k"] == 2)
        assert values["test_concat/k2_sacrebleu"] == pytest.approx(k2["sacrebleu"], rel=1e-5)
        images = get_json(f"{base}/data/plugin/images/tags")[run_name]
        assert {
            "attention/encoder self-attention",
            "attention/decoder self-attention",
            "attention/cross-attention",
        } <= set(images)
