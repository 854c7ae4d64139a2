"""The real TensorBoard server serves a run's validation loss as logged in metrics.jsonl.

Starts `tensorboard --logdir <run>` on a free localhost port, waits until it answers, and reads
the `valid/loss` series back through its HTTP data API (no network beyond 127.0.0.1).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from helpers import read_jsonl

# Never through a proxy from the environment: the server is on 127.0.0.1.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def test_tensorboard_serves_the_logged_validation_loss(trained_run: Path, tmp_path: Path) -> None:  # noqa: F811
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "tensorboard.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([*tensorboard_command(), "--logdir", str(trained_run), "--port", str(port),
                                 "--host", "127.0.0.1", "--load_fast", "false"],
                                stdout=out, stderr=subprocess.STDOUT)
        try:
            run_name = wait_for_tag(base, "valid/loss", proc, log)
            assert run_name in get_json(f"{base}/data/runs")
            assert run_name == "tb"  # the events live in <run>/tb/
            query = urllib.parse.urlencode({"tag": "valid/loss", "run": run_name})
            series = get_json(f"{base}/data/plugin/scalars/scalars?{query}")  # [[wall_time, step, value], ...]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    logged = [r for r in read_jsonl(trained_run / "metrics.jsonl") if r["event"] == "valid"]
    assert [step for _, step, _ in series] == [r["step"] for r in logged] == [3, 6]
    assert [value for _, _, value in series] == pytest.approx([r["valid_loss"] for r in logged], rel=1e-5)
