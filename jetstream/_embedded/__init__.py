"""Real nats-servers on loopback for demos and tests: EmbeddedServer, EmbeddedCluster,
cuttable links between nodes, and leased ports."""
