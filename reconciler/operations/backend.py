"""The Backend: every outside dependency of an operation, as one object passed in.

Like Terraform's backend: the CLI builds the real one (`Backend.default()`: librdkafka admins, the
job deployers unless RECONCILER_JOBS=off, a Kafka reader of status records, a factory of one-cluster
MirrorKafka clients for the offset commands and the heartbeats (`read_heartbeats`), the git repository
of the topology files (`git.revision`), the wall clock, the dev brokers and the local jobs of the state
directory for `dev up/down/status` and the demo); tests build one over the in-memory admin double
(`adapters/memory_admin.py`, which passes the same contract suite as the real adapter) and recording
deployers.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from reconciler.adapters.base import OpResult
from reconciler.adapters.kafka_admin import KafkaAdmin  # at import: its RECONCILER_* settings are checked by main
from reconciler.adapters.live_read import AdminFactory
from reconciler.contract.status import StatusRecord
from reconciler.deployers.local import LocalDeployer
from reconciler.dev.brokers import Engine
from reconciler.dev.clusters import DevClusters, DevClusterStatus
from reconciler.gitops import RevisionComparison
from reconciler.jobplan.backend import JobBackend, StatusReader, default_factory, kafka_status_reader
from reconciler.mirror.mirror_client import ClusterReader, GroupState, TopicPartition, latest_heartbeats
from reconciler.mirror.policy import ReplicationPolicy
from reconciler.mirror.records import Heartbeat
from reconciler.mirror.verify import PartitionDigests
from reconciler.topology.diagnostics import Diagnostics
from reconciler.topology.model import Cluster, Topology

HeartbeatReader = Callable[[Cluster, ReplicationPolicy], Mapping[str, Heartbeat | None]]


class MirrorCluster(ClusterReader, Protocol):
    """One cluster as the offset commands read it (MirrorMaker 2's MirrorClient, and the group offsets
    failover moves): `adapters/mirror_kafka.MirrorKafka`, or a test's in-memory double."""

    def group_state(self, group: str) -> GroupState: ...
    def committed_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...
    # many groups at once (batched where the cluster allows: adapters/group_offsets.py); raises naming a group not read
    def committed_offsets_of(
        self, groups: Sequence[str], partitions: Iterable[TopicPartition]
    ) -> dict[str, dict[TopicPartition, int]]: ...
    def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None: ...
    # `reconciler verify`: one partition as digests from an offset to its end
    def watermarks(self, topic: str, partition: int) -> tuple[int, int]: ...
    # the plan's backlog of a rate-limited flow (operations/observe.py): (log start, log end) of many partitions
    def log_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]: ...
    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None: ...
    def read_digests(
        self, topic: str, partition: int, start: int, timeout: float, since_ms: int | None = None
    ) -> PartitionDigests: ...
    # `reconciler failback --truncate`: DeleteRecords; per partition None or the broker's error
    def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, str | None]: ...


#: (cluster, per-request timeout) -> a client of that one cluster; raises Unreachable or NotAnswering
#: (adapters/probe.py) within seconds when it is down.
MirrorClientFactory = Callable[[Cluster, float], MirrorCluster]
#: The per-request timeout of a heartbeat read (plan's and drift's observation).
HEARTBEAT_READ_TIMEOUT = 15.0


def kafka_mirror_client(cluster: Cluster, timeout: float) -> MirrorCluster:
    """The cluster's settings resolved (for this one cluster), probed, and a MirrorKafka client over them."""
    from reconciler import logs
    from reconciler.adapters.mirror_kafka import MirrorKafka
    from reconciler.adapters.probe import CONNECT_TIMEOUT, require_reachable
    from reconciler.topology.connection import client_config

    config = client_config(cluster)
    require_reachable(cluster.alias, config, min(timeout, CONNECT_TIMEOUT))
    return MirrorKafka(logs.client_config(config), timeout, alias=cluster.alias)


class DevBrokers(Protocol):
    """The dev brokers of the state directory (`dev/clusters.DevClusters`, or a test's double): `dev up/down/status`
    and the demo. `up` raises DevClusterError (dev/brokers.py) when a cluster cannot be started."""

    def up(self, topology: Topology, engine: Engine | None = None) -> list[DevClusterStatus]: ...
    def down(self) -> list[DevClusterStatus]: ...
    def status(self) -> list[DevClusterStatus]: ...


class LocalJobs(Protocol):
    """The local deployer's engines of the state directory (`deployers/local.LocalDeployer`): `dev down` and the
    demo's end stop them all."""

    @property
    def dir(self) -> Path: ...
    def stop_all(self) -> list[tuple[str, OpResult]]: ...


class GitRepository(Protocol):
    """What a command reads from git, once (the planners take the revision as data): `LocalGit`, or a test's double.
    Paths are the topology paths as given, relative to the working directory."""

    def revision(self, paths: Iterable[str], revision: str | None = None) -> dict[str, Any] | None:
        """RevisionInfo.to_dict() (commit, short, author, email, time_iso, message_subject, dirty) of the commit
        `revision` (a topology read with `--revision REV`), else of the work tree holding `paths` (dirty when
        the topology files differ from HEAD); None outside a git repository."""
        ...

    def topology_at(
        self, paths: Sequence[str], revision: str, env: str | None = None
    ) -> tuple[Topology | None, Diagnostics]:
        """The topology in `paths` as of commit `revision` (from git objects; diagnostics name `FILE@SHORTSHA`), for
        environment `env` when it declares environments."""
        ...

    def compare(self, paths: Sequence[str], base: str, head: str | None, env: str | None = None) -> RevisionComparison:
        """`plan --base`: the topology files and flows changed between `base` and `head` (None: the work tree), both
        for environment `env`. Raises RevisionError when a revision cannot be read."""
        ...


@dataclass(frozen=True)
class LocalGit:
    """The git repository holding the topology files (gitops/revision.py)."""

    def revision(self, paths: Iterable[str], revision: str | None = None) -> dict[str, Any] | None:
        from reconciler.gitops.revision import revision_info

        return revision_info(paths, revision)

    def topology_at(
        self, paths: Sequence[str], revision: str, env: str | None = None
    ) -> tuple[Topology | None, Diagnostics]:
        from reconciler.gitops import load_topology_at
        from reconciler.gitops.revision import repo_path_for

        return load_topology_at(repo_path_for(paths), revision, paths, cwd=os.getcwd(), env=env)

    def compare(self, paths: Sequence[str], base: str, head: str | None, env: str | None = None) -> RevisionComparison:
        from reconciler.gitops import compare_with_base
        from reconciler.gitops.revision import repo_path_for

        comparison, _ = compare_with_base(repo_path_for(paths), base, paths, head_rev=head, cwd=os.getcwd(), env=env)
        return comparison


def terminal_answer(question: str) -> str | None:
    """The person's answer at the terminal, or None when stdin is not a terminal (CI, a pipe): never block."""
    if not sys.stdin.isatty():
        return None
    return input(question)


@dataclass
class Backend:
    admin_factory: AdminFactory = KafkaAdmin
    #: The job deployers and status reader; None leaves jobs out of plans (RECONCILER_JOBS=off).
    jobs: JobBackend | None = None
    #: Status records of a (target) cluster; None: the job backend's reader (or Kafka's when jobs are off).
    status_reader: StatusReader | None = None
    #: The newest heartbeats of a (target) cluster; None: read through `mirror_client`, the one home of its client.
    heartbeat_reader: HeartbeatReader | None = None
    #: A client of one cluster for `offsets translate`, `failover`, `reachability`, the heartbeats (and the
    #: demo's reads).
    mirror_client: MirrorClientFactory = kafka_mirror_client
    git: GitRepository = field(default_factory=LocalGit)
    clock: Callable[[], float] = field(default=time.time)
    #: Asks the person a question (apply's and force-unlock's confirmation); None: nobody can answer.
    ask: Callable[[str], str | None] = terminal_answer
    #: The dev brokers and the local jobs of the state directory (built when a command needs them: the state
    #: directory is read then).
    dev_brokers: Callable[[], DevBrokers] = DevClusters
    local_jobs: Callable[[], LocalJobs] = LocalDeployer

    def read_status(self, cluster: Cluster) -> Mapping[str, StatusRecord | Mapping[str, Any]]:
        """Every flow's latest status record on a (target) cluster: one reader for plan, status and drift."""
        if self.status_reader is not None:
            return self.status_reader(cluster)
        return (self.jobs.read_status if self.jobs is not None else kafka_status_reader)(cluster)

    def read_heartbeats(self, cluster: Cluster, policy: ReplicationPolicy) -> Mapping[str, Heartbeat | None]:
        """The newest heartbeat of every heartbeat topic on a cluster (MirrorClient.heartbeatTopics), through the
        Backend's heartbeat reader, else a client from `mirror_client` (probed first: a cluster that is down
        says so within seconds)."""
        if self.heartbeat_reader is not None:
            return self.heartbeat_reader(cluster, policy)
        return latest_heartbeats(self.mirror_client(cluster, HEARTBEAT_READ_TIMEOUT), policy)

    @classmethod
    def default(cls) -> Backend:
        """The real outside world."""
        return cls(jobs=default_factory())

    def jobs_or_default(self) -> JobBackend:
        """The job backend, or one with the real deployers when jobs are off (status, apply of a saved plan)."""
        return self.jobs if self.jobs is not None else JobBackend(read_status=self.read_status)
