"""Markdown tables, rendered in one place: every table the harness writes (compare.py's summary, findings
and provenance pages, the study pages, the tools' reports) builds its rows here, so that no cell's text
can split its row. A `|` in a cell (a run named `a|b`) is escaped as `\\|`, which GitHub's tables read as
the character itself (in a code span too), and a line break becomes `<br>`; a cell without either is
written as it is, so a table of such cells is byte for byte what it was."""

from __future__ import annotations

from typing import Iterable


def table_cell(text: object) -> str:
    """`text` as one cell of a table row."""
    return str(text).replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>").replace("\r", "<br>")


def table_row(cells: Iterable[object]) -> str:
    """`| a | b |`: one row of a table, each cell escaped."""
    return "| " + " | ".join(map(table_cell, cells)) + " |"


def table_head(titles: Iterable[object]) -> list[str]:
    """A table's first two lines: its titles and the line under them."""
    titles = list(titles)
    return [table_row(titles), "|" + "---|" * len(titles)]
