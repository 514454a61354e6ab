"""The blocking client's engine (``jetstream.sync``, ``kvstore.sync``, ...): a loop thread of
its own and the blocking twins of the consumer objects."""
