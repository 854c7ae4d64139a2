"""A decoding step reads nothing back to the host: no scalar read, no `.tolist()`, no operator whose
output shape depends on the data (benchmarks/host_syncs.py, `data_dependent=True`), between the
searches' periodic checks (`decoding.search.CHECK_EVERY`, an accelerator's interval; a CPU checks
every step, where a read costs nothing). On a GPU each such read stops the CPU
until the device has caught up, and none can be captured in a CUDA graph; on a CPU a dispatch mode
sees them all, so the count is checked here.

A search of L steps costs a constant (setting up, the final read of the results) plus one read per
check: the searches are run for L and 2L steps (EOS held back to the limit), and the difference
must be the checks in between, whatever the model and its encoding."""

from __future__ import annotations

import pytest
import torch
from helpers import BOS, EOS, PAD, mixed_batch, tiny_model

from benchmarks.host_syncs import CountHostSyncs
from decoding.fixed_shape import FixedShapeDecoder
from decoding.search import CHECK_EVERY, beam_search, greedy_search
from decoding.step import CachedDecoder

STEPS = 3 * CHECK_EVERY


def reads(search, model, steps: int, decoder=CachedDecoder, **options) -> CountHostSyncs:
    src = mixed_batch([5, 9, 3], seed=0)
    limit = dict(max_len_a=0.0, max_len_b=steps, min_len=steps)  # every row runs `steps` steps
    with torch.no_grad(), CountHostSyncs(data_dependent=True) as counted:
        search(decoder(model), src, BOS, EOS, PAD, **limit, **options, check_every=CHECK_EVERY)
    return counted


@pytest.mark.parametrize("decoder", [CachedDecoder, FixedShapeDecoder], ids=["cached", "fixed-shape"])
@pytest.mark.parametrize("name", ["sinusoidal", "rope", "t5_bias", "alibi"])
@pytest.mark.parametrize(
    "search,options",
    [
        pytest.param(greedy_search, {}, id="greedy"),
        pytest.param(greedy_search, {"no_repeat_ngram": 2}, id="greedy-no-repeat"),
        pytest.param(beam_search, {"beam_size": 4, "nbest": 2}, id="beam4"),
        pytest.param(beam_search, {"beam_size": 3, "no_repeat_ngram": 3, "penalty": "avg"}, id="beam3-no-repeat"),
    ],
)
@pytest.mark.slow
def test_no_reads_between_checks(decoder, name, search, options) -> None:
    """The cached step and the fixed-shape step (decoding.cuda_graphs) alike."""
    model = tiny_model(name)
    short, long = reads(search, model, STEPS, decoder, **options), reads(search, model, 2 * STEPS, decoder, **options)
    extra = [w for w in long.where if long.where.count(w) > short.where.count(w)]
    assert long.count - short.count == STEPS // CHECK_EVERY, sorted(set(extra))
