"""Search and decoding speed, kept out of the model code a researcher reads (models/ keeps one plain
forward and imports nothing from here): greedy and beam search (`search`), the cached decoding step
over a trained model's own weights (`step.CachedDecoder`, the `Searchable` the searches run on), the
key/value cache (`cache`), attention dispatch for decoding steps (`attend`), the C attention kernel
and its loader (`cpu_kernel`, `csrc/`), and the `W @ xᵀ` product of CPU decoding steps (`linear`).
Each is tested against the plain computation (tests/decoding/test_step.py, test_search.py, test_cache.py,
test_cpu_kernel.py, test_linear.py); docs/DECODING.md explains them."""
