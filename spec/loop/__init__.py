"""The round and its rules: the one speculative loop (engine, generation), the lossless acceptance (verify),
the target's caches and prefill, trees (drafted, verified, on recurrent layers), and `auto`'s costs."""
