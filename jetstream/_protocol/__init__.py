"""What JetStream says on the wire: the JSON API's models and subjects' names, status
lines, headers parsing, durations and TTLs, limits, and the text policy for bytes other
clients wrote. Pure: no I/O."""
