"""Live state of the clusters, as types: what is there (read by `adapters/live_read.py`) and which topic configs are
explicitly set. What the topology wants is the planner's (`plan/desired.py`)."""
