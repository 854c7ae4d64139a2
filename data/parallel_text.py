"""Readers for parallel corpora in plain, TSV and raw IWSLT/WIT3 formats.

Every reader returns a list of ``(source_text, target_text)`` pairs with the
surrounding whitespace of each sentence stripped. Empty pairs are kept: the
caller filters (and counts) empty or over-long pairs. Problems with the input
raise :class:`CorpusError`, whose message names the file and says how to fix it.
"""

from __future__ import annotations

import gzip
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Mapping, Optional, Union

from utils.errors import HarnessError

PathLike = Union[str, "os.PathLike[str]"]
Pair = tuple[str, str]

_GZIP_MAGIC = b"\x1f\x8b"
# Metadata lines of the raw WIT3 ``train.tags.*`` files all start with "<".
_TAGS_FIRST_LINE = re.compile(r"^<(doc|/doc|url|talkid|title|description|keywords|speaker|reviewer|translator)\b")


class CorpusError(HarnessError, ValueError):
    """A corpus file is missing, unreadable or malformed."""


def _read_bytes(path: PathLike) -> bytes:
    """Return the (decompressed, if gzip) bytes of ``path``."""
    p = Path(path)
    if p.is_dir():
        raise CorpusError(f"{p} is a folder; give the path of a file")
    if not p.is_file():
        raise CorpusError(
            f"{p}: file not found (resolved to {p.resolve()}); "
            "check the path (relative paths are relative to the "
            "current working directory)"
        )
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{p}: cannot read the file ({exc.strerror}); check its permissions") from exc
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise CorpusError(f"{p}: corrupt gzip file ({exc}); re-download or re-compress it") from exc
    elif p.suffix == ".gz":
        raise CorpusError(
            f"{p}: named .gz but not a gzip file; compress it (`gzip -c FILE > {p.name}`) or drop the .gz from its name"
        )
    return data


def _peek(path: PathLike, size: int = 4096) -> bytes:
    """Return up to ``size`` leading (decompressed) bytes of ``path``."""
    p = Path(path)
    if not p.is_file():
        _read_bytes(p)  # raises the "file not found" CorpusError
    try:
        with open(p, "rb") as f:
            head = f.read(size)
    except OSError as exc:
        raise CorpusError(f"{p}: cannot read the file ({exc.strerror}); check its permissions") from exc
    if head[:2] == _GZIP_MAGIC:
        try:
            with gzip.open(p, "rb") as f:
                head = f.read(size)
        except (OSError, EOFError) as exc:
            raise CorpusError(f"{p}: corrupt gzip file ({exc}); re-download or re-compress it") from exc
    return head


def decode_utf8(data: bytes, name: str, first_line: int = 1) -> str:
    """Decode UTF-8 (a leading BOM is dropped); an error names `name` and the line (`data` starting
    at line `first_line` of `name`)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + first_line
        raise CorpusError(
            f"{name}:{line}: not valid UTF-8 (bad byte 0x{data[exc.start]:02x} at "
            f"byte offset {exc.start}); convert it to UTF-8, e.g. "
            f"`iconv -f latin1 -t utf-8 {name} > out`"
        ) from None


def read_text(path: PathLike, allow_blank: bool = False) -> str:
    """Decode ``path`` as UTF-8 (a leading BOM is dropped); errors name the line. A corpus file with
    no text is an error; sentences to translate (`allow_blank`) may be blank lines, each translated
    to an empty line."""
    text = decode_utf8(_read_bytes(path), str(path))
    if not text.strip() and not allow_blank:
        raise CorpusError(
            f"{path}: file is empty (no text): name the right file (in the config or the flag that gave it) "
            f"or re-create it"
        )
    return text


def split_lines(text: str) -> list[str]:
    """Split on line ends as Python's universal newlines read them: \\n, \\r\\n and a lone \\r (old Mac
    files: one pair per line, not one pair of the whole file); not on U+2028 etc., which would break
    alignment."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_lines(path: PathLike) -> list[str]:
    """Read a UTF-8 (optionally gzipped) file with one sentence per line, stripped."""
    return [line.strip() for line in split_lines(read_text(path))]


def read_wit3_tags(path: PathLike) -> list[str]:
    """Read a raw WIT3 ``train.tags.xx-yy.xx`` file, dropping ``<...>`` metadata lines."""
    return [s for s in read_lines(path) if not s.startswith("<")]


def _detect_format(path: PathLike) -> str:
    """Return "xml", "tags" or "plain" for ``path``, by file name then content."""
    name = Path(path).name.lower()
    if name.endswith((".xml", ".xml.gz")):
        return "xml"
    if name.startswith("train.tags.") or ".tags." in name:
        return "tags"
    head = _peek(path).decode("utf-8", errors="replace").lstrip("\ufeff")
    first = next((ln.strip() for ln in head.split("\n") if ln.strip()), "")
    if first.startswith(("<?xml", "<mteval")):
        return "xml"
    if _TAGS_FIRST_LINE.match(first):
        return "tags"
    return "plain"


def _zip_aligned(
    src: list[str], tgt: list[str], src_path: PathLike, tgt_path: PathLike, what: str = "lines"
) -> list[Pair]:
    if len(src) != len(tgt):
        raise CorpusError(
            f"{src_path} has {len(src)} {what} but {tgt_path} has {len(tgt)}; "
            "the two files must be line-aligned translations of each other "
            "(check that they belong together and were not truncated)"
        )
    return list(zip(src, tgt))


def read_line_aligned(src_path: PathLike, tgt_path: PathLike) -> list[Pair]:
    """Read two line-aligned files; raw WIT3 ``train.tags`` and XML are auto-detected."""
    return read_line_aligned_documents(src_path, tgt_path)[0]


def read_line_aligned_documents(src_path: PathLike, tgt_path: PathLike) -> tuple[list[Pair], Optional[list[str]]]:
    """`read_line_aligned`, with each pair's document id where the format has documents (WIT3 XML)."""
    fmt_src, fmt_tgt = _detect_format(src_path), _detect_format(tgt_path)
    if fmt_src != fmt_tgt:
        raise CorpusError(
            f"{src_path} looks like {fmt_src} but {tgt_path} looks like {fmt_tgt}; "
            "give both sides of the same release (e.g. train.tags.fr-en.fr and "
            "train.tags.fr-en.en, or the two .xml files of one dev/test set)"
        )
    if fmt_src == "xml":
        return read_wit3_xml_documents(src_path, tgt_path)
    if fmt_src == "tags":
        return _zip_aligned(
            read_wit3_tags(src_path), read_wit3_tags(tgt_path), src_path, tgt_path, "sentence lines (metadata dropped)"
        ), None
    return _zip_aligned(read_lines(src_path), read_lines(tgt_path), src_path, tgt_path), None


def read_wit3_xml(path: PathLike) -> dict[tuple[str, str], str]:
    """Parse a WIT3 XML dev/test file into ``{(doc id, seg id): text}`` (file order)."""
    data = _read_bytes(path)
    read_text(path)  # UTF-8 / emptiness check with a line-numbered error
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        line, col = exc.position
        raise CorpusError(
            f"{path}:{line}: malformed XML at column {col} ({exc}); use the unmodified WIT3/IWSLT .xml file"
        ) from exc
    out: dict[tuple[str, str], str] = {}
    for doc in root.iter("doc"):
        doc_id = doc.get("docid")
        if doc_id is None:
            raise CorpusError(
                f"{path}: a <doc> element has no docid attribute; use the unmodified WIT3/IWSLT .xml file"
            )
        for seg in doc.iter("seg"):
            seg_id = seg.get("id")
            if seg_id is None:
                raise CorpusError(
                    f"{path}: a <seg> in doc {doc_id} has no id attribute; use the unmodified WIT3/IWSLT .xml file"
                )
            key = (doc_id.strip(), seg_id.strip())
            if key in out:
                raise CorpusError(
                    f"{path}: doc {key[0]} has seg id {key[1]} twice; seg ids must be unique within a doc"
                )
            out[key] = "".join(seg.itertext()).strip()
    if not out:
        raise CorpusError(
            f"{path}: no <seg id=...> inside <doc docid=...> found; "
            "expected a WIT3 XML file like IWSLT17.TED.dev2010.fr-en.fr.xml"
        )
    return out


def read_wit3_xml_pair(src_path: PathLike, tgt_path: PathLike) -> list[Pair]:
    """Align two WIT3 XML files by (doc id, seg id); pairs follow the source order."""
    return read_wit3_xml_documents(src_path, tgt_path)[0]


def read_wit3_xml_documents(src_path: PathLike, tgt_path: PathLike) -> tuple[list[Pair], list[str]]:
    """Like `read_wit3_xml_pair`, with the document id of every pair."""
    src, tgt = read_wit3_xml(src_path), read_wit3_xml(tgt_path)
    for have, have_path, other, other_path in ((src, src_path, tgt, tgt_path), (tgt, tgt_path, src, src_path)):
        for doc_id, seg_id in have:
            if (doc_id, seg_id) not in other:
                raise CorpusError(
                    f"{other_path}: doc {doc_id} seg id {seg_id} is missing (it is "
                    f"present in {have_path}); the two XML files must hold the same "
                    "segments: use both sides of the same dev/test set"
                )
    return [(text, tgt[key]) for key, text in src.items()], [doc_id for doc_id, _ in src]


def read_tsv(path: PathLike, src_column: int, tgt_column: int) -> list[Pair]:
    """Read a tab-separated (optionally gzipped) file; extra columns are ignored."""
    if min(src_column, tgt_column) < 0:
        raise CorpusError(f"{path}: TSV columns must be >= 0 (got src_column={src_column}, tgt_column={tgt_column})")
    need = max(src_column, tgt_column) + 1
    pairs: list[Pair] = []
    for number, line in enumerate(split_lines(read_text(path)), start=1):
        fields = line.rstrip("\r").split("\t")
        if len(fields) < need:
            raise CorpusError(
                f"{path}:{number}: {len(fields)} tab-separated field(s), need at "
                f"least {need} (source column {src_column}, target column "
                f"{tgt_column}, 0-based); fix or delete that line, and check the "
                "separator is a tab"
            )
        pairs.append((fields[src_column].strip(), fields[tgt_column].strip()))
    return pairs


_LANG_SUFFIX = re.compile(r"\.([a-z]{2,3})(?:\.xml)?(?:\.gz)?$", re.IGNORECASE)


def _check_not_swapped(src: PathLike, tgt: PathLike, src_lang: str, tgt_lang: str) -> None:
    """Raise if the file names say the source and target files are swapped."""
    ms, mt = _LANG_SUFFIX.search(str(src)), _LANG_SUFFIX.search(str(tgt))
    if ms and mt and src_lang != tgt_lang:
        if (ms.group(1).lower(), mt.group(1).lower()) == (tgt_lang.lower(), src_lang.lower()):
            raise CorpusError(
                f"source file {src} looks like {tgt_lang} and target file {tgt} like "
                f"{src_lang}, but the direction is {src_lang}->{tgt_lang}; swap "
                "the src and tgt paths"
            )


def read_split(spec: Mapping[str, object], src_lang: str, tgt_lang: str) -> list[Pair]:
    """Read one split from a config spec.

    ``spec`` is ``{"src": path, "tgt": path}`` (line-aligned, raw WIT3 tags or
    XML) or ``{"tsv": path}`` (``src<TAB>tgt``; optional ``src_column`` and
    ``tgt_column`` keys, 0-based, override the default columns 0 and 1).
    """
    return read_split_documents(spec, src_lang, tgt_lang)[0]


def read_split_documents(
    spec: Mapping[str, object], src_lang: str, tgt_lang: str
) -> tuple[list[Pair], Optional[list[str]]]:
    """`read_split`, with each pair's document id where the files have documents (WIT3 XML)."""
    if not isinstance(spec, Mapping):
        raise CorpusError(
            f"data split spec must be a mapping like {{src: path, tgt: path}} or {{tsv: path}}, got {spec!r}"
        )
    keys = set(spec)
    if keys == {"src", "tgt"}:
        src, tgt = Path(os.path.expanduser(str(spec["src"]))), Path(os.path.expanduser(str(spec["tgt"])))
        for p in (src, tgt):
            if not p.is_file():
                _read_bytes(p)  # raises the "file not found" CorpusError
        _check_not_swapped(src, tgt, src_lang, tgt_lang)
        return read_line_aligned_documents(src, tgt)
    if "tsv" in keys and keys <= {"tsv", "src_column", "tgt_column"}:
        path = Path(os.path.expanduser(str(spec["tsv"])))
        try:
            src_col, tgt_col = int(spec.get("src_column", 0)), int(spec.get("tgt_column", 1))
        except (TypeError, ValueError) as exc:
            raise CorpusError(f"{path}: src_column/tgt_column must be integers (got {spec!r})") from exc
        return read_tsv(path, src_col, tgt_col), None
    raise CorpusError(
        f"data split spec {dict(spec)!r} not understood: use {{src: path, tgt: path}} "
        "for two line-aligned files (raw train.tags.* and WIT3 .xml are detected) or "
        "{tsv: path} for a src<TAB>tgt file (optional src_column/tgt_column)"
    )
