"""The JetStream API calls made through a context: stream and consumer administration,
direct gets, and the checks that tell a missing stream from a leader election."""
