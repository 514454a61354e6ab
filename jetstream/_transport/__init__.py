"""Moving bytes over nats-py's connection: opening and closing it, the protocol reader and
direct delivery path, HPUB frames, the request/reply path, permission denials, connection
events and server lists."""
