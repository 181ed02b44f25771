"""Adapters: the only code that talks to clusters. `base.ClusterAdmin` is the port; `kafka_admin`
implements it over confluent-kafka's AdminClient, `memory_admin` is the in-process test double that
passes the same contract tests (tests/contract); `live_read` reads every cluster once into a LiveState."""
