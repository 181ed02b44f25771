"""Declarative GitOps reconciler for cross-cluster Kafka replication.

Stages (pure unless noted): load -> validate -> model -> analyse -> expand -> diff -> plan
-> render | apply (I/O). See docs/architecture.md.
"""

__version__ = "0.1.0"
