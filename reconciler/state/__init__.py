"""Live and desired state of the clusters: what is there (read by adapters) and what the topology wants (pure)."""
