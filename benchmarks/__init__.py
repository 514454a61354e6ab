"""Side-by-side benchmarks: ours vs nats-py's built-in KV and hand-written ceilings, one run."""
