"""The replication job: MirrorMaker 2's data path on Spark (see docs/replication-job.md)."""
