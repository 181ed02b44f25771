"""Analysis of the replication graph: expansion of remote topics, cycles, diamonds, policy rules."""
