"""Apply: run a plan's actions against the clusters in batches, under a per-cluster lease."""
