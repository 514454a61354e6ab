"""Publishing into streams: ADR-50 atomic batches, fast-ingest batches, the acked window and
the fence that makes retried writes safe."""
