"""Reading a cluster: bulk metadata, configs in batches, ACLs only where supported, errors as state."""

from reconciler.adapters.live_read import read_cluster
from reconciler.adapters.memory_admin import MemoryAdmin, MemoryCluster
from reconciler.state.live import API_DELETE_ACLS, Capabilities, LiveState


class Counting(MemoryAdmin):
    def __init__(self, cluster):
        super().__init__(cluster)
        self.calls = []

    def list_topics(self):
        self.calls.append("list")
        return super().list_topics()

    def describe_topic_configs(self, topics):
        self.calls.append(("configs", len(topics)))
        return super().describe_topic_configs(topics)

    def describe_acls(self):
        self.calls.append("acls")
        return super().describe_acls()


def test_one_metadata_request_configs_in_batches_acls_once():
    mc = MemoryCluster("c")
    for i in range(5):
        mc.add_topic(f"t{i}", 1, {"retention.ms": str(i)})
    mc.add_topic("__consumer_offsets", 50)
    admin = Counting(mc)
    state = read_cluster(admin, config_batch=2)
    assert admin.calls == ["list", ("configs", 2), ("configs", 2), ("configs", 1), "acls"]
    assert set(state.topics) == {f"t{i}" for i in range(5)} and state.topics["t3"].configs == {"retention.ms": "3"}


def test_no_acl_calls_without_the_acl_apis():
    mc = MemoryCluster("c", capabilities=Capabilities.all_supported().without(API_DELETE_ACLS))
    admin = Counting(mc)
    state = read_cluster(admin)
    assert "acls" not in admin.calls and state.acls is None


def test_unreachable_cluster_is_state_not_exception():
    state = read_cluster(MemoryAdmin(MemoryCluster("c", reachable=False)))
    assert not state.reachable and "unreachable" in state.error


def test_fingerprint_is_scoped():
    mc = MemoryCluster("c")
    mc.add_topic("a", 1)
    scope = {"c": ["a", "missing"]}
    before = LiveState({"c": read_cluster(MemoryAdmin(mc))}).fingerprint(scope)
    mc.add_topic("b", 1)
    assert LiveState({"c": read_cluster(MemoryAdmin(mc))}).fingerprint(scope) == before
    mc.add_topic("missing", 1)
    assert LiveState({"c": read_cluster(MemoryAdmin(mc))}).fingerprint(scope) != before
