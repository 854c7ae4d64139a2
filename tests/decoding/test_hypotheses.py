"""What the searches keep (decoding/hypotheses.py): the length penalty's formulas, and the beam history
read back by following each hypothesis' parents."""

from __future__ import annotations

import pytest
import torch

from decoding.hypotheses import BeamHistory, FinishedHypotheses, length_penalty


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0, 2.0])
def test_length_penalty_wu(alpha):
    for length in (1, 2, 5, 13, 40):
        expected = -7.5 / (((5 + length) / 6) ** alpha)
        assert length_penalty(-7.5, length, "wu", alpha) == pytest.approx(expected, rel=1e-12)
    assert length_penalty(-7.5, 1, "wu", alpha) == pytest.approx(-7.5)  # ((5+1)/6)^alpha = 1
    scores = torch.tensor([-1.0, -4.0])
    torch.testing.assert_close(length_penalty(scores, 7, "wu", alpha), scores / (2.0**alpha))


def test_length_penalty_avg_and_none():
    assert length_penalty(-6.0, 4, "avg", 0.6) == pytest.approx(-1.5)
    assert length_penalty(-6.0, 1, "avg", 0.6) == pytest.approx(-6.0)
    torch.testing.assert_close(length_penalty(torch.tensor([-6.0, -3.0]), 3, "avg", 0.0), torch.tensor([-2.0, -1.0]))
    for length in (1, 4, 100):
        assert length_penalty(-6.0, length, "none", 0.6) == -6.0
    with pytest.raises(ValueError, match="length penalty"):
        length_penalty(-1.0, 3, "bogus", 0.6)


def test_the_history_backtracks_each_hypothesis_through_its_parents() -> None:
    """Two sentences, beam 2, three steps written by hand: each prefix is read back through the
    parent pointers, a sentence that left early keeps its steps, lengths cut the tokens."""
    history = BeamHistory(batch=2, beam=2, steps=3, device=torch.device("cpu"))
    both = torch.tensor([0, 1])
    history.record(both, 0, torch.tensor([[0, 0], [0, 0]]), torch.tensor([[5, 6], [7, 8]]))
    history.record(both, 1, torch.tensor([[1, 0], [0, 0]]), torch.tensor([[9, 10], [11, 12]]))
    history.record(torch.tensor([0]), 2, torch.tensor([[1, 1]]), torch.tensor([[13, 14]]))  # sentence 1 left
    ends = torch.tensor([[0, 1], [1, 0]])  # the beam each hypothesis ended in
    lengths = torch.tensor([[3, 2], [2, 1]])
    tokens = history.backtrack(ends, lengths)
    assert tokens.tolist() == [[[5, 10, 13], [5, 10, 0]], [[7, 12, 0], [7, 0, 0]]]


def test_finished_hypotheses_keep_the_best_in_rank_order() -> None:
    """EOS candidates are kept while a sentence has fewer than `beam`; `best` ranks them by the
    length-penalised score, ties in the order they finished."""
    found = FinishedHypotheses(batch=1, beam=2, device=torch.device("cpu"))
    history = BeamHistory(batch=1, beam=2, steps=2, device=torch.device("cpu"))
    history.record(torch.tensor([0]), 0, torch.tensor([[0, 0]]), torch.tensor([[4, 5]]))
    active, done = torch.tensor([0]), torch.tensor([False])
    # step 1: the top candidates are EOS after beam 1 (score -1.0) and a token after beam 0
    top = (torch.tensor([[-1.0, -2.0, -3.0, -4.0]]), torch.tensor([[1, 0, 0, 1]]), torch.tensor([[3, 7, 3, 8]]))
    found.add(active, top, done, eos=3, step=1, penalty="none", alpha=0.0)
    top = (torch.tensor([[-0.5, -6.0, -7.0, -8.0]]), torch.tensor([[0, 1, 0, 1]]), torch.tensor([[3, 3, 9, 9]]))
    found.add(active, top, done, eos=3, step=1, penalty="none", alpha=0.0)
    (hyps,) = found.best(2, history)
    assert [(h.tokens, h.score) for h in hyps] == [([4], -0.5), ([5], -1.0)]
    assert found.count.tolist() == [2]
