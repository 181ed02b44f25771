"""The world the example policies (policies/examples/) are judged in: memory clusters west (production, US),
east (production, EU) and lab (dev, US) holding what each example's good and bad topology needs."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.memory_admin import MemoryCluster, MemoryFactory
from reconciler.operations.backend import Backend
from reconciler.state.live import AclBinding
from reconciler.state.live import AclOperation as Op
from reconciler.state.live import AclPermission as Perm
from tests.plan_helpers import memory_backend

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "policies" / "examples"
DAY_MS = 86_400_000


def example_world() -> MemoryFactory:
    clusters = {a: MemoryCluster(a) for a in ("west", "east", "lab")}
    west, east = clusters["west"], clusters["east"]
    week = str(7 * DAY_MS)
    west.add_topic("orders.created", 6, {"retention.ms": week, "min.insync.replicas": "2"})
    west.acls.add(AclBinding("orders.created", "User:*", "*", Op.READ, Perm.ALLOW))
    west.add_topic("orders.Refunds", 3, {"retention.ms": week, "min.insync.replicas": "2"})
    west.add_topic("payments.pii", 3, {"retention.ms": week, "min.insync.replicas": "2"})
    west.add_topic("clicks", 96, {"retention.ms": "3600000", "min.insync.replicas": "1"})
    west.add_topic("audit", 3, {"retention.ms": "-1", "min.insync.replicas": "2"})
    # east already holds the remote topic of orders.created, from before the source grew and changed its retention
    east.add_topic("west.orders.created", 3, {"retention.ms": str(30 * DAY_MS), "min.insync.replicas": "2"})
    east.add_topic("west.legacy", 1)  # a remote topic no flow wants any more
    return MemoryFactory(clusters)


def example_backend(factory: MemoryFactory) -> Backend:
    return memory_backend(factory)
