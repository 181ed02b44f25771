"""Replication jobs as part of the desired and live state: what should run (state.desired_jobs),
what runs (state.read_jobs), the difference as plan actions (plan.diff_jobs), and the executor
handlers that apply them through a deployer (handlers)."""
