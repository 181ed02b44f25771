"""Drift: compare the live clusters and jobs with the topology, and report (never apply)."""
