"""IWSLT2017 from the Hugging Face hub (parquet conversion) or a local parquet copy.

The hub is often unreachable (these machines have no network): the hub path
fails fast with a :class:`~data.parallel_text.CorpusError` that explains how
to point the config at local files instead.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

from data.parallel_text import CorpusError, Pair
from utils.user_paths import looks_like_a_path

# Our split name -> the Hugging Face split name (and the folder in the parquet export).
SPLITS = {"train": "train", "valid": "validation", "test": "test"}
PROBE_TIMEOUT_S = 3.0


def _local_help(hf_config: str, s: str = "fr", t: str = "en") -> str:
    """Explain how to configure local files instead of the hub."""
    pair = f"{s}-{t}"
    raw = "/path/to/" + pair
    return (
        "Use local files instead, e.g. the unpacked raw WIT3 release (2017-01-trnted/texts/"
        f"{s}/{t}/{pair}.tgz) in the config:\n"
        "  data:\n"
        "    source: parallel_text\n"
        f"    train: {{src: {raw}/train.tags.{pair}.{s}, tgt: {raw}/train.tags.{pair}.{t}}}\n"
        f"    valid: {{src: {raw}/IWSLT17.TED.dev2010.{pair}.{s}.xml, "
        f"tgt: {raw}/IWSLT17.TED.dev2010.{pair}.{t}.xml}}\n"
        f"    test:  {{src: {raw}/IWSLT17.TED.tst2010.{pair}.{s}.xml, "
        f"tgt: {raw}/IWSLT17.TED.tst2010.{pair}.{t}.xml}}\n"
        f"or a TSV export per split ({{tsv: /path/to/train.tsv}}, {s}<TAB>{t}), or a "
        "local copy of the parquet conversion: set the hub name to a directory "
        f"holding {hf_config}/{{train,validation,test}}/*.parquet."
    )


def _hub_offline_reason() -> Optional[str]:
    """Return why the hub cannot be reached, or None if it answers an HTTP request.

    The request goes through the hub client's own HTTP session, so it takes the same route as
    the download will: HTTPS_PROXY / HTTP_PROXY / NO_PROXY and HF_ENDPOINT are honoured (a raw TCP
    probe would call a proxy-only cluster offline)."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{var} is set"
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    endpoint = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT
    try:
        get_session().head(endpoint, timeout=PROBE_TIMEOUT_S)  # any HTTP answer means reachable
    except Exception as exc:  # connection refused, DNS, proxy errors, timeout
        return f"no answer from {endpoint} ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
    return None


def _rows_to_pairs(rows: Any, where: str, src_lang: str, tgt_lang: str) -> list[Pair]:
    """Turn ``{"translation": {lang: text}}`` rows into stripped (src, tgt) pairs."""
    if "translation" not in rows.column_names:
        raise CorpusError(
            f"{where}: no 'translation' column (columns: "
            f"{rows.column_names}); expected rows like "
            "{'translation': {'en': ..., 'fr': ...}}"
        )
    pairs: list[Pair] = []
    for i, tr in enumerate(rows["translation"]):
        if not isinstance(tr, dict) or src_lang not in tr or tgt_lang not in tr:
            langs = sorted(tr) if isinstance(tr, dict) else type(tr).__name__
            raise CorpusError(
                f"{where}: row {i} has languages {langs}, need "
                f"{src_lang!r} and {tgt_lang!r}; check src_lang/tgt_lang "
                "and the dataset config"
            )
        pairs.append(((tr[src_lang] or "").strip(), (tr[tgt_lang] or "").strip()))
    return pairs


def _local_data_files(root: Path, hf_config: str) -> dict[str, list[str]]:
    """Find ``root/hf_config/{train,validation,test}/*.parquet`` (``valid`` also accepted)."""
    base = root / hf_config
    files: dict[str, list[str]] = {}
    for ours, theirs in SPLITS.items():
        found: list[str] = []
        for folder in dict.fromkeys((theirs, ours)):
            found = sorted(str(p) for p in (base / folder).glob("*.parquet"))
            if found:
                break
        if not found:
            raise CorpusError(
                f"{base / theirs}: no *.parquet files for split {ours!r}; a local copy "
                f"of the parquet conversion needs {base}/{{train,validation,test}}/"
                "*.parquet (e.g. 0000.parquet from the hub's refs/convert/parquet)"
            )
        files[theirs] = found
    return files


def dataset_files(hf_name: str, hf_config: str, revision: str) -> dict:
    """What identifies the data behind a config, for cache keys: the local parquet files (the caller
    hashes their content) or the hub commit that `revision` resolves to now (a branch such as
    refs/convert/parquet moves when the conversion is redone)."""
    local = Path(os.path.expanduser(hf_name))
    if local.is_dir():
        return {"local_files": _local_data_files(local, hf_config)}
    if re.fullmatch(r"[0-9a-f]{40}", revision):
        return {"commit": revision}  # a commit id never moves
    return {"commit": resolve_hub_revision(hf_name, revision)}


@functools.lru_cache(maxsize=None)  # asked once per process
def resolve_hub_revision(hf_name: str, revision: str) -> str:
    """The commit id `revision` of hub dataset `hf_name` points at, asked of the hub."""
    reason = _hub_offline_reason()
    error: Optional[Exception] = None
    if reason is None:
        try:
            from huggingface_hub import HfApi

            info = HfApi().dataset_info(hf_name, revision=revision, timeout=PROBE_TIMEOUT_S * 3)
            if info.sha:
                return info.sha
        except Exception as exc:  # network, auth, unknown revision
            error = exc
    raise CorpusError(
        f"data.hf_revision: cannot check which commit {revision!r} of {hf_name!r} is now "
        f"({reason or f'{type(error).__name__}: {error}'}), so data cached for it could be stale; pin "
        "data.hf_revision to a commit id (40 hex digits) to use cached data offline, or use local files"
    )


def read_iwslt2017_hf(
    hf_name: str = "IWSLT/iwslt2017",
    hf_config: str = "iwslt2017-fr-en",
    revision: str = "refs/convert/parquet",
    src_lang: str = "fr",
    tgt_lang: str = "en",
    cache_dir: Optional[str] = None,
) -> dict[str, list[Pair]]:
    """Load IWSLT2017 as ``{"train", "valid", "test"}`` -> list of (src, tgt) pairs.

    ``hf_name`` is a hub dataset id, or a local directory holding
    ``{hf_config}/{train,validation,test}/*.parquet`` (read with no network).
    ``cache_dir`` is passed on to ``datasets.load_dataset``.
    """
    local = Path(os.path.expanduser(hf_name))
    if local.is_dir():
        data_files = _local_data_files(local, hf_config)
        where = str(local / hf_config)
    elif looks_like_a_path(hf_name):
        raise CorpusError(
            f"{hf_name}: local dataset directory not found (resolved to "
            f"{local.resolve()}); fix the path, or use a hub id like "
            "IWSLT/iwslt2017"
        )
    else:
        reason = _hub_offline_reason()
        if reason is not None:
            raise CorpusError(
                f"the Hugging Face hub is unreachable ({reason}), so dataset "
                f"{hf_name!r} (config {hf_config!r}) cannot be loaded.\n" + _local_help(hf_config, src_lang, tgt_lang)
            )
        rev = quote(revision, safe="")
        data_files = {
            theirs: [f"hf://datasets/{hf_name}@{rev}/{hf_config}/{theirs}/*.parquet"] for theirs in SPLITS.values()
        }
        where = f"hf://datasets/{hf_name}@{revision}/{hf_config}"
    try:
        import datasets  # lazy: heavy import, only needed here
    except ImportError as exc:
        raise CorpusError(
            "the 'datasets' package is not installed: `pip install "
            "datasets`. " + _local_help(hf_config, src_lang, tgt_lang)
        ) from exc
    try:
        ds = datasets.load_dataset("parquet", data_files=data_files, cache_dir=cache_dir)
    except Exception as exc:  # network, auth, missing files, corrupt parquet...
        raise CorpusError(
            f"{where}: loading the parquet files failed "
            f"({type(exc).__name__}: {exc}).\n" + _local_help(hf_config, src_lang, tgt_lang)
        ) from exc
    return {
        ours: _rows_to_pairs(ds[theirs], f"{where}/{theirs}", src_lang, tgt_lang) for ours, theirs in SPLITS.items()
    }
