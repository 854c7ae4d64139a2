"""Misuse ends in one line naming the file, key or line and the fix (exit code 2, no traceback);
caches follow the data they were built from; the hub probe takes the hub client's own route."""

from __future__ import annotations

import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import CONFIG, ROOT, one_error_line, tiny_overrides, torchrun, train, with_sets, write_parquet_dir
from in_process import run_in_process as run  # real subprocesses only for stdin and torchrun

from settings.config import ConfigError, load_config

LATIN1 = "Très bien, merci.\n".encode("latin-1")


# ---- 9. validation gaps


@pytest.mark.parametrize(
    "override, key",
    [
        ("training.max_steps=-1", "training.max_steps"),
        ("training.max_steps=0", "training.max_steps"),
        ("model.num_heads=0", "model.num_heads"),
        ("data.max_train_pairs=0", "data.max_train_pairs"),
        ("training.max_tokens=0", "training.max_tokens"),
        ("training.epochs=0", "training.epochs"),
    ],
)
def test_non_positive_sizes_are_refused_by_name(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(CONFIG, [override, *(["training.batch_size=null"] if "max_tokens" in key else [])])


def test_negative_max_steps_is_an_error_not_an_empty_run(tmp_path: Path) -> None:
    assert "training.max_steps" in one_error_line(train(tmp_path / "run", tmp_path / "cache", steps=-1))
    assert not (tmp_path / "run").exists()


def test_a_token_budget_below_a_sentence_is_reported(tmp_path: Path) -> None:
    proc = train(tmp_path / "run", tmp_path / "cache", "training.max_tokens=6", steps=1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "longer than training.max_tokens=6 tokens: each of them is a batch of its own" in proc.stdout


# ---- 10. unreadable input and corpora, bad run folders, tokenizers that do not load


@pytest.mark.slow
def test_inference_input_that_is_not_utf8_or_missing(trained_run: Path, tmp_path: Path) -> None:
    bad = tmp_path / "in.fr"
    bad.write_bytes("Bonjour.\n".encode() + LATIN1)
    assert f"{bad}:2: not valid UTF-8" in one_error_line(
        run(["inference.py", "--run", str(trained_run), "--src", str(bad)])
    )
    proc = subprocess.run(
        [sys.executable, "inference.py", "--run", str(trained_run)],
        cwd=ROOT,
        input="Bonjour.\n".encode() + LATIN1,
        capture_output=True,
        timeout=300,
    )
    stderr = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in stderr and "stdin:2: not valid UTF-8" in stderr, stderr
    missing = tmp_path / "missing.fr"
    assert f"{missing}: file not found" in one_error_line(
        run(["inference.py", "--run", str(trained_run), "--src", str(missing)])
    )


@pytest.mark.parametrize(
    "name, content, expected",
    [
        ("latin1.tsv", b"Hello.\tBonjour.\n" + b"Thanks.\t" + LATIN1, "latin1.tsv:2: not valid UTF-8"),
        ("plain.tsv.gz", b"Hello.\tBonjour.\n", "plain.tsv.gz: named .gz but not a gzip file"),
    ],
)
def test_a_corpus_that_cannot_be_read_is_named_with_its_line(
    tmp_path: Path, name: str, content: bytes, expected: str
) -> None:
    corpus = tmp_path / name
    corpus.write_bytes(content)
    assert expected in one_error_line(train(tmp_path / "run", tmp_path / "cache", f"data.path={corpus}"))


def test_run_dir_that_is_a_file_or_cannot_be_created(tmp_path: Path) -> None:
    a_file = tmp_path / "results.txt"
    a_file.write_text("mine")
    assert "is a file, not a folder" in one_error_line(train(a_file, tmp_path / "cache"))
    assert a_file.read_text() == "mine"
    blocked = Path("/proc/no-such-harness-dir/run")  # cannot be created, even as root
    assert "cannot be created or written" in one_error_line(train(blocked, tmp_path / "cache"))


def test_a_pretrained_tokenizer_that_does_not_load(tmp_path: Path) -> None:
    message = one_error_line(
        train(
            tmp_path / "run",
            tmp_path / "cache",
            "tokenizer.type=pretrained",
            f"tokenizer.name={tmp_path / 'no-such-tokenizer'}",
            "model.share_embeddings=false",
        )
    )
    assert "tokenizer.name=" in message and "could not load the pretrained tokenizer" in message


# ---- 11. under torchrun every rank ends with the same one-line error


@pytest.mark.slow
def test_torchrun_ranks_fail_with_rank0s_message(trained_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    proc = torchrun(["train.py", "--config", CONFIG, *tiny_overrides(run_dir, tmp_path / "cache")])
    assert proc.returncode != 0
    message = f"error: run folder {run_dir} already exists."
    assert proc.stderr.count("error: ") == 2 and proc.stderr.count(message) == 2, proc.stderr[-3000:]  # both ranks
    # (torchrun's own summary follows, with its traceback; no rank's traceback and no collective error)
    assert f'File "{ROOT / "train.py"}"' not in proc.stderr, proc.stderr[-3000:]
    assert not any(s in proc.stderr for s in ("DistBackendError", "Connection closed", "timed out")), proc.stderr[
        -3000:
    ]


@pytest.mark.slow
def test_torchrun_ranks_end_with_one_line_for_a_subclass_of_the_expected_errors(
    trained_run: Path, tmp_path: Path
) -> None:
    """A resume refusal is a ConfigError (a HarnessError): every rank still ends with rank 0's line."""
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    proc = torchrun(
        [
            "train.py",
            "--config",
            "configs/demo/rope.yaml",
            *with_sets(tiny_overrides(run_dir, tmp_path / "cache"), "model.d_model=64"),
            "--resume",
        ]
    )
    assert proc.returncode != 0
    assert proc.stderr.count("error: a resumed run keeps its experiment settings") == 2, proc.stderr[-3000:]
    assert f'File "{ROOT / "train.py"}"' not in proc.stderr, proc.stderr[-3000:]


# ---- 8. the encoded-split cache follows the data


def test_cache_key_follows_local_parquet_content_and_the_hub_commit(tmp_path: Path, monkeypatch) -> None:
    import data.iwslt as iwslt
    from data.readers import corpus_fingerprint

    root = tmp_path / "iwslt2017"
    splits = {"train": [("Bonjour.", "Hello.")], "validation": [("Merci.", "Thanks.")], "test": [("Oui.", "Yes.")]}
    write_parquet_dir(root, "iwslt2017-fr-en", splits)
    cfg = load_config(CONFIG, ["data.source=iwslt2017", f"data.hf_name={root}"]).data
    before = corpus_fingerprint(cfg)
    write_parquet_dir(tmp_path / "other", "iwslt2017-fr-en", {**splits, "train": [("Salut.", "Hi.")]})
    shutil.copyfile(tmp_path / "other/iwslt2017-fr-en/train/0000.parquet", root / "iwslt2017-fr-en/train/0000.parquet")
    assert corpus_fingerprint(cfg) != before

    hub = load_config(CONFIG, ["data.source=iwslt2017"]).data  # IWSLT/iwslt2017 @ refs/convert/parquet
    commits = iter(["a" * 40, "b" * 40])
    monkeypatch.setattr(iwslt, "resolve_hub_revision", lambda name, revision: next(commits))
    assert corpus_fingerprint(hub) != corpus_fingerprint(hub)  # the branch moved between the two runs
    monkeypatch.undo()
    pinned = load_config(CONFIG, ["data.source=iwslt2017", f"data.hf_revision={'c' * 40}"]).data
    assert corpus_fingerprint(pinned)["commit"] == "c" * 40  # a commit id is used as it is, offline too
    with pytest.raises(iwslt.CorpusError, match="data.hf_revision"):  # offline and unpinned: never a stale guess
        corpus_fingerprint(hub)


# ---- 12. the hub probe honours proxies


def test_hub_probe_goes_through_the_configured_proxy(monkeypatch) -> None:
    from huggingface_hub.utils import close_session

    import data.iwslt as iwslt

    seen: list[str] = []

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    from huggingface_hub import constants

    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # read by huggingface_hub at import
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.invalid")  # resolvable only by the proxy
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.server_port}")
    close_session()
    try:
        assert iwslt._hub_offline_reason() is None
        assert seen == ["http://hub.invalid/"]
        monkeypatch.delenv("HTTP_PROXY")
        close_session()
        assert "hub.invalid" in iwslt._hub_offline_reason()  # no proxy: really unreachable
    finally:
        close_session()
        server.shutdown()
