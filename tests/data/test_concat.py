"""Joined pairs for the length protocol (data/concat.py): groups stay inside documents, cover every
pair once, are seeded without documents, and join exactly the pairs they name."""

from __future__ import annotations

import pytest

from data.concat import concat_groups, join_pairs


def test_concat_groups_stay_inside_documents():
    docs = ["a", "a", "a", "b", "b", "c", "a"]  # a document id may come back later: a new run
    assert concat_groups(7, 2, docs) == [[0, 1], [2], [3, 4], [5], [6]]
    assert concat_groups(7, 3, docs) == [[0, 1, 2], [3, 4], [5], [6]]
    assert concat_groups(7, 1, docs) == [[i] for i in range(7)]


def test_concat_groups_without_documents_are_seeded_and_cover_every_pair_once():
    a, b, c = concat_groups(10, 3, None, seed=1), concat_groups(10, 3, None, seed=1), concat_groups(10, 3, None, seed=2)
    assert a == b and a != c
    assert sorted(i for g in a for i in g) == list(range(10))
    assert [len(g) for g in a] == [3, 3, 3, 1]
    with pytest.raises(ValueError):
        concat_groups(3, 0)
    # k = 1 is the test set in its own order, whatever the seed: the same comparison as the test set
    assert concat_groups(10, 1, None, seed=1) == concat_groups(10, 1, None, seed=2) == [[i] for i in range(10)]


def test_join_pairs_by_hand():
    pairs = [("Bonjour .", "Hello ."), ("", ""), ("Merci .", "Thanks .")]
    assert join_pairs(pairs, [[0, 1, 2], [2, 0]]) == [
        ("Bonjour . Merci .", "Hello . Thanks ."),
        ("Merci . Bonjour .", "Thanks . Hello ."),
    ]
