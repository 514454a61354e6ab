"""objstore: NATS object stores on fast-ingest batches (coming in the object-store issue).

The package exists so the distribution's layout is final; its API lands with that issue.
"""

__all__: list[str] = []
