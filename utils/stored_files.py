"""A run's output files as test.py writes them (plain) or as the archive (results/) stores them, read
through one function (`read_text`) so that every reader takes both.

A logical file `X` (e.g. `test/hypotheses.txt`) is stored in exactly one of these forms:

- `X`            plain text, as test.py writes it;
- `X.xz`         xz-compressed (`xzcat X.xz` reads it);
- `X.cols.xz`    a table of numbers stored column by column (`COLUMNS_MAGIC`): each column as exact
                 integers (decimals scaled by 10^d), byte-shuffled, xz-compressed; decoded back to the
                 very same text (`python tools/archive.py cat X` prints it);
- `X.sha256`     the text's sha256: the text itself is stored once for the whole study, by content,
                 in `<study>/test_sets/<sha256>.txt.xz` (the references every run of a study shares);
- a member of `A/<name>.tar.xz`, a folder A at most BUNDLE_DEPTH above it: the files of one name in
                 a test folder and its concat/k<K>/ (the hypotheses), compressed together since they
                 translate the same sentences (`tar -xOf A/hypotheses.txt.tar.xz concat/k2/hypotheses.txt`).

Every form decodes to the same bytes as the plain file, so a figure read from the archive is the
figure read from the run. Two forms of one file, a damaged stream or a stored text whose hash is not
its name is refused in one line naming the file.
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import tarfile
from pathlib import Path
from typing import Optional

import numpy as np

from utils import run_files
from utils.errors import HarnessError

XZ, COLUMNS, BY_CONTENT, BUNDLE = ".xz", ".cols.xz", ".sha256", ".tar.xz"
FORMS = ("", XZ, COLUMNS, BY_CONTENT)  # the suffixes a stored file may carry, plain first
ARCHIVED = (*FORMS[1:], BUNDLE)  # the suffixes of a file as the archive stores it
BUNDLE_DEPTH = 3  # <test>/<name>.tar.xz holds <test>/concat/k<K>/<name>: two folders below it
_BUNDLES: dict[tuple, dict[str, bytes]] = {}  # the last bundles read
STORE, STORED_TEXT = "test_sets", ".txt.xz"  # <study>/test_sets/<sha256>.txt.xz: each shared text once
COLUMNS_MAGIC = "harness-columns 1"


class StoredFileError(HarnessError):
    """A stored output file that cannot be read as what it claims to be: `where` (the file) `problem`,
    and how to restore it."""

    def __init__(self, where: Path, problem: str, fix: Optional[str] = None) -> None:
        self.where, self.problem = Path(where), problem
        super().__init__(f"{where} {problem}; {fix or _restore_hint(Path(where))}")


def forms(path: str | Path) -> list[Path]:
    """The forms of logical file `path` that exist (none, one, or a conflict): its own, and a bundle
    of a folder above it (up to BUNDLE_DEPTH) that holds it as a member."""
    path = Path(path)
    own = [p for p in (path.with_name(path.name + suffix) for suffix in FORMS) if p.is_file()]
    bundles = [folder / (path.name + BUNDLE) for folder in path.parents[:BUNDLE_DEPTH]]
    return own + [b for b in bundles if b.is_file() and _member(b, path) in bundle_members(b)]


def logical_name(stored: str) -> str:
    """The plain file name a stored file's name stands for (its longest stored suffix taken off)."""
    suffix = max((s for s in ARCHIVED if stored.endswith(s)), key=len, default="")
    return stored[: len(stored) - len(suffix)]


def _member(bundle: Path, path: Path) -> str:
    return path.relative_to(bundle.parent).as_posix()


def bundle_members(bundle: Path) -> dict[str, bytes]:
    """A bundle's members {relative path: bytes}, read once (a damaged bundle is one line)."""
    stat = bundle.stat()
    key = (str(bundle), stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size)
    if key not in _BUNDLES:
        data = _unxz(bundle)
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
                members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
        except (tarfile.TarError, EOFError):
            raise StoredFileError(bundle, "is not a complete tar archive (damaged)") from None
        _BUNDLES[key] = members
        while len(_BUNDLES) > 8:
            _BUNDLES.pop(next(iter(_BUNDLES)))
    return _BUNDLES[key]


def make_bundle(members: dict[str, str]) -> bytes:
    """The uncompressed tar of `members` {relative path: text}, in the given order, byte-stable
    (no times, owners or modes of this machine), so archiving again writes the same bytes."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:", format=tarfile.USTAR_FORMAT) as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def stored_form(path: str | Path) -> Optional[Path]:
    """The one stored form of `path` (None when not written); two forms of one file are refused."""
    found = forms(path)
    if len(found) > 1:
        raise StoredFileError(
            found[0],
            f"and {', '.join(map(str, found[1:]))} are two forms of {path}: one was left by an earlier test or archive",
            "delete the one that is not current (or test the run again with --overwrite)",
        )
    return found[0] if found else None


def stored_exists(path: str | Path) -> bool:
    return stored_form(path) is not None


def read_text(path: str | Path) -> Optional[str]:
    """The text of logical file `path` from whichever form is stored (None when none is)."""
    form = stored_form(path)
    if form is None:
        return None
    name = form.name
    if name.endswith(BUNDLE):
        return _utf8(bundle_members(form)[_member(form, Path(path))], form)
    if name.endswith(BY_CONTENT):
        return _by_content(form)
    if name.endswith(COLUMNS):
        return decode_columns(_unxz(form), form)
    data = _unxz(form) if name.endswith(XZ) else form.read_bytes()
    return _utf8(data, form)


def read_lines(path: str | Path) -> Optional[list[str]]:
    """The lines of a stored output file (None when not written), checked against the row count and
    sha256 its test folder's scores.json records for it (test.py since issue 58; older ones record
    none): a file cut short, grown or edited is named here, before anything is computed from it."""
    text = read_text(path)
    if text is None:
        return None
    recorded = recorded_file(Path(path))
    if recorded is not None:
        found = unlike_record(text, recorded)
        if found is not None:
            raise StoredFileError(
                path,
                f"is not the file test.py wrote ({found['rows']} lines; scores.json records "
                f"{recorded.get('rows')} lines and its sha256): cut or edited?",
            )
    return text.splitlines()


def content_record(data: bytes) -> dict:
    """What scores.json records of a test output file (test.py) and `read_lines` checks: its rows and sha256."""
    return {"rows": len(data.decode("utf-8").splitlines()), "sha256": hashlib.sha256(data).hexdigest()}


def unlike_record(text: str, recorded: object) -> Optional[dict]:
    """The content record of `text` when it is not the one test.py `recorded` for its file (None when
    it is): a file cut short, grown or edited since."""
    found = content_record(text.encode("utf-8"))
    if isinstance(recorded, dict) and found == {"rows": recorded.get("rows"), "sha256": recorded.get("sha256")}:
        return None
    return found


def recorded_file(path: Path) -> Optional[dict]:
    """What test.py recorded in scores.json for `path` ({"rows", "sha256"}), from the test folder
    holding it (up to two levels above: concat/k<K>/), or None."""
    for folder in list(path.parents)[:3]:
        text = read_text(folder / run_files.SCORES) if path.name != run_files.SCORES else None
        if text is not None:
            try:
                files = json.loads(text).get("files")
            except (ValueError, AttributeError):
                return None
            return (files or {}).get(path.relative_to(folder).as_posix()) if isinstance(files, dict) else None
    return None


def _utf8(data: bytes, where: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise StoredFileError(where, "is not UTF-8 text (damaged?)") from None


def _unxz(path: Path) -> bytes:
    try:
        return lzma.decompress(path.read_bytes(), format=lzma.FORMAT_XZ)
    except (lzma.LZMAError, EOFError):
        raise StoredFileError(path, "is not a complete xz stream (damaged)") from None


def _restore_hint(path: Path) -> str:
    return f"restore it (git checkout -- {path}) or test the run again"


def read_stored_text(stored: Path) -> Optional[str]:
    """A store entry's text, or None when it is damaged (the archive then writes it again)."""
    try:
        return _utf8(_unxz(stored), stored)
    except StoredFileError:
        return None


def store_entry(store: Path, digest: str) -> Path:
    """Where a study's store keeps the shared text whose sha256 is `digest`."""
    return store / f"{digest}{STORED_TEXT}"


def content_name(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pointer_digest(pointer: Path) -> str:
    """The sha256 a `X.sha256` pointer holds (one line naming the file when it holds none)."""
    digest = _utf8(pointer.read_bytes(), pointer).strip()
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise StoredFileError(pointer, "does not hold a sha256 (64 hex digits)")
    return digest


def _by_content(pointer: Path) -> str:
    """The shared text a `X.sha256` pointer names, found in the nearest `test_sets/` above it."""
    digest = pointer_digest(pointer)
    stored = next((e for e in (store_entry(p / STORE, digest) for p in pointer.parents) if e.is_file()), None)
    if stored is None:
        raise StoredFileError(
            pointer,
            f"names the shared text {digest[:12]}..., which no {STORE}/ folder above it holds",
            f"copy the study's {STORE}/ folder beside its runs",
        )
    text = _utf8(_unxz(stored), stored)
    if content_name(text) != digest:
        raise StoredFileError(stored, "does not hold the text its name is the sha256 of (damaged or edited)")
    return text


# --- numbers by column --------------------------------------------------------------------------


def _number_format(field: str) -> Optional[int]:
    """Decimals of a plain decimal number as written by '%d' / '%.<d>f' (None: not one)."""
    digits = field[1:] if field.startswith("-") else field
    if not digits.isascii():
        return None
    whole, _, frac = digits.partition(".")
    if not whole.isdigit() or (frac and not frac.isdigit()) or (whole != "0" and whole.startswith("0")):
        return None
    return len(frac) if "." in digits else 0


def _format(value: int, decimals: int) -> str:
    sign, value = ("-", -value) if value < 0 else ("", value)
    if decimals == 0:
        return f"{sign}{value}"
    whole, frac = divmod(value, 10**decimals)
    return f"{sign}{whole}.{frac:0{decimals}d}"


def encode_columns(text: str) -> Optional[bytes]:
    """`text` (an optional header line, then rows of tab-separated decimal numbers, every row with
    the same columns and each column with fixed decimals) stored column by column, or None when it
    is not such a table or would not decode to the same text."""
    lines = text.split("\n")
    if not text.endswith("\n") or len(lines) < 2:
        return None
    lines = lines[:-1]
    header = lines[0] if any(_number_format(f) is None for f in lines[0].split("\t")) else None
    rows = [line.split("\t") for line in lines[1 if header is not None else 0 :]]
    if not rows or any(len(r) != len(rows[0]) for r in rows):
        return None
    decimals = [_number_format(f) for f in rows[0]]
    columns = []
    for j, d in enumerate(decimals):
        if d is None or any(_number_format(r[j]) != d for r in rows):
            return None
        try:
            columns.append(np.array([int(r[j].replace(".", "")) for r in rows], dtype="<i8"))
        except (OverflowError, ValueError):  # beyond int64: stored as text
            return None
    meta = {"header": header, "rows": len(rows), "decimals": decimals}
    body = b"".join(c.view(np.uint8).reshape(-1, 8).T.tobytes() for c in columns)  # byte planes compress best
    data = f"{COLUMNS_MAGIC}\n{json.dumps(meta)}\n".encode() + body
    return data if decode_columns(data, Path("<check>")) == text else None


def decode_columns(data: bytes, where: Path) -> str:
    """The text `encode_columns` stored (`where` names the file in an error)."""
    try:
        magic, meta_line, body = data.split(b"\n", 2)
        meta = json.loads(meta_line)
        rows, decimals, header = int(meta["rows"]), list(meta["decimals"]), meta["header"]
        if magic.decode() != COLUMNS_MAGIC or len(body) != rows * 8 * len(decimals):
            raise ValueError
        planes = np.frombuffer(body, dtype=np.uint8).reshape(len(decimals), 8, rows)
        columns = [planes[j].T.copy().view("<i8").ravel().tolist() for j in range(len(decimals))]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise StoredFileError(where, "is not a column table of this harness (damaged?)") from None
    lines = [] if header is None else [header]
    lines += ["\t".join(_format(c[i], d) for c, d in zip(columns, decimals)) for i in range(rows)]
    return "".join(f"{line}\n" for line in lines)
