"""Record what git says of this checkout in .code_snapshot.json: the commit, whether code had
uncommitted changes (and the diff's hash), the code fingerprint and the tracked files. A copy of the
checkout without .git (a GPU machine's, which gets the working tree only) reads it, so that the runs
trained there record this commit and a fingerprint of their own files (utils/provenance.py: a file
changed since the snapshot counts as an uncommitted change).

  python tools/code_snapshot.py      # then send .code_snapshot.json with the tree (tools/gpu_study.sh)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from utils.provenance import SNAPSHOT, write_snapshot  # noqa: E402


def main() -> int:
    state = write_snapshot()
    changed = "with uncommitted changes" if state["uncommitted_changes"] else "clean"
    print(f"{SNAPSHOT}: commit {state['commit'][:12]} ({changed}), {len(state['files'])} tracked files")
    return 1 if state["uncommitted_changes"] else 0


if __name__ == "__main__":
    sys.exit(main())
