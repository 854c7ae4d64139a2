"""Inference-time fast paths, kept out of the model code a researcher reads: the key/value cache
(`cache`), attention dispatch for decoding steps (`attend`), the C attention kernel and its
loader (`cpu_kernel`, `csrc/`), and the linear layer that computes `W @ xᵀ` at CPU decoding
steps (`linear`). Each is tested against the plain computation (tests/test_cache.py,
test_cpu_kernel.py, test_linear.py)."""
