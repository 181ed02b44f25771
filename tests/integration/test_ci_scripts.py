"""The CI steps, run locally: the exact ci/ scripts the workflows call, against two embedded Tansu
clusters, in a real temporary git repository of topologies.

main commit -> ci/apply-main.sh applies it; a pull request branch -> ci/plan-pr.sh writes the comment
body (and applies nothing); merge -> ci/apply-main.sh applies the merge commit and records it next to
the lease; in sync -> ci/drift.sh exits 0; a manual change on a cluster -> ci/drift.sh exits 2 and
writes the HTML report. The cluster password comes from the environment, as CI maps it from its
secret store, and appears in no output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest
from confluent_kafka import Producer

from reconciler import logs
from reconciler.adapters.base import ConfigAlteration, NewTopicSpec
from reconciler.adapters.kafka_admin import KafkaAdmin
from reconciler.apply.lock import read_applied
from reconciler.contract.spec import STATUS_TOPIC, JobSpec
from reconciler.contract.status import StatusPublisher
from reconciler.textutil import md_inline
from reconciler.topology.build import load_topology
from reconciler.topology.model import Cluster

pytestmark = pytest.mark.kafka

PROJECT = Path(__file__).resolve().parents[2]
SECRET = "ci-secret-that-must-not-leak"
PLAN_KEY = "ci-plan-key-that-must-not-leak-0123456789"
ALICE = git.Actor("Alice Example", "alice@example.com")
BOB = git.Actor("Bob Builder", "bob@example.com")

TOPOLOGY = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: ci}}
clusters:
  west: {{bootstrap_servers: "{west}"}}
  east:
    bootstrap_servers: "{east}"
    config: {{sasl.password: "${{EAST_CI_PASSWORD}}"}}
flows:
  - source: west
    target: east
    topics: {{include: [{topics}]}}
    sync: {{acls: false}}
"""


class CI:
    def __init__(self, clusters, tmp_path: Path):
        west, east = clusters
        self.boot = {"west": west.bootstrap, "east": east.bootstrap}
        self.root = tmp_path / "topology-repo"
        self.repo = git.Repo.init(self.root, initial_branch="main")
        with self.repo.config_writer() as cw:
            cw.set_value("user", "name", "Merge Bot").set_value("user", "email", "merge@example.com")
        self.out = tmp_path / "ci-out"
        self.admin = {a: KafkaAdmin(Cluster(a, b)) for a, b in self.boot.items()}
        self.logs: list[str] = []

    def write(self, topics: str) -> None:
        path = self.root / "topologies" / "prod" / "topology.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TOPOLOGY.format(topics=topics, **self.boot))

    def commit(self, message: str, author: git.Actor) -> str:
        self.repo.index.add(["topologies/prod/topology.yaml"])
        return self.repo.index.commit(message, author=author, committer=author).hexsha

    def script(self, name: str, **env: str) -> subprocess.CompletedProcess:
        full = {
            **os.environ,
            "TOPOLOGY_PATHS": "topologies/prod",
            "OUT_DIR": str(self.out),
            "RECONCILER": f"{sys.executable} -m reconciler",
            "EAST_CI_PASSWORD": SECRET,
            "RECONCILER_PLAN_KEY": PLAN_KEY,
            "PYTHONPATH": str(PROJECT),
            **env,
        }
        done = subprocess.run(
            ["bash", str(PROJECT / "ci" / name)], cwd=self.root, env=full, capture_output=True, text=True, timeout=300
        )
        self.logs += [done.stdout, done.stderr]
        return done

    def create(self, alias: str, name: str, partitions: int = 1) -> None:
        assert self.admin[alias].create_topics([NewTopicSpec(name, partitions)])[name].ok

    def job_reports(self) -> None:
        """What the running job of the flow publishes: its status, on the spec the topology wants."""
        topo, _ = load_topology([self.root / "topologies" / "prod"])
        spec = JobSpec.from_flow(topo, topo.flow("west->east"))
        self.admin["east"].create_topics([NewTopicSpec(STATUS_TOPIC, 1, -1, {"cleanup.policy": "compact"})])
        producer = Producer(logs.client_config({"bootstrap.servers": self.boot["east"]}))
        StatusPublisher(producer, "west->east").publish(
            {
                "flow": "west->east",
                "spec_hash": spec.spec_hash(),
                "state": "running",
                "heartbeat_at": int(time.time() * 1000),
                "records": 0,
                "lag_total": 0,
                "errors": 0,
            }
        )


@pytest.fixture
def ci(fresh_clusters, tmp_path):
    c = CI(fresh_clusters, tmp_path)
    yield c
    for a in c.admin.values():
        a.close()
    outputs = "\n".join(c.logs) + "".join(p.read_text(errors="replace") for p in c.out.glob("*") if p.is_file())
    assert SECRET not in outputs and PLAN_KEY not in outputs


def test_ci_steps_locally(ci):
    ci.create("west", "orders", 2)
    ci.create("west", "payments", 3)

    # main: the first topology is applied on push
    ci.write('"orders"')
    first = ci.commit("prod: replicate orders", ALICE)
    done = ci.script("apply-main.sh")
    assert done.returncode == 0, done.stderr
    assert "Apply complete" in done.stdout and (ci.out / "plan.json").is_file()
    assert "west.orders" in ci.admin["east"].list_topics()
    assert read_applied(ci.admin["east"])["git"]["commit"] == first
    assert ci.script("apply-main.sh").stdout.strip().endswith("No changes: nothing to apply.")

    # a pull request adds payments: the comment body shows the change, nothing is applied
    ci.repo.git.checkout("-b", "add-payments")
    ci.write('"orders", "payments"')
    ci.commit("prod: replicate payments too", BOB)
    done = ci.script("plan-pr.sh", BASE_REF="main")
    assert done.returncode == 0, done.stderr
    body = (ci.out / "plan-comment.md").read_text()
    assert body.startswith("<!-- reconciler-plan -->\n### Reconciler plan: `ci`")
    assert "**Plan: 1 to create, 0 to change, 0 to delete.**" in body
    assert "**Changes since `main`" in body and f"- flows: {md_inline('~ west->east (topics.include)')}" in body
    assert "+ create topic west.payments (3 partitions" in body and "```mermaid" in body
    assert "west.payments" not in ci.admin["east"].list_topics(), "planning a pull request applies nothing"

    # an invalid change: the comment says why, and the step fails
    ci.write('"orders", "pay(ments```<!--"')  # the error quotes the pattern: it must not close the fence
    done = ci.script("plan-pr.sh", BASE_REF="main")
    body = (ci.out / "plan-comment.md").read_text()
    assert done.returncode == 1 and "### ❌ Reconciler plan failed" in body and "pay(ments" in body
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(body)
    fences = [t for t in tokens if t.type == "fence"]
    assert "pay(ments```<!--" in fences[0].content and not any(t.type == "html_block" for t in tokens[1:]), body
    ci.repo.git.checkout("--", "topologies/prod/topology.yaml")

    # merge: apply-main plans from the merge commit, saves the plan, applies it under the lease
    ci.repo.git.checkout("main")
    ci.repo.git.merge("--no-ff", "add-payments", "-m", "Merge pull request #1 from add-payments")
    merge = ci.repo.head.commit.hexsha
    done = ci.script("apply-main.sh")
    assert done.returncode == 0, done.stderr
    assert "(lease held)" in done.stdout and "Apply complete: 1 created" in done.stdout
    saved = json.loads((ci.out / "plan.json").read_text())
    assert saved["git"]["commit"] == merge and saved["git"]["dirty"] is False
    assert saved["topology"]["commit"] == merge and "clusters" not in saved and saved["signature"]["value"]
    assert (ci.out / "plan.json").stat().st_mode & 0o777 == 0o600
    rec = read_applied(ci.admin["east"])
    assert rec["git"]["commit"] == merge and rec["git"]["author"] == "Merge Bot" and rec["git"]["dirty"] is False
    assert rec["clusters"] == ["east"]

    # scheduled drift: in sync while the job reports on the current spec
    ci.job_reports()
    done = ci.script("drift.sh")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No drift" in done.stdout

    # someone changes a remote topic by hand: drift exits 2 with an HTML report for people
    ci.admin["east"].alter_configs([ConfigAlteration("west.orders", {"retention.ms": "1000"})])
    done = ci.script("drift.sh")
    assert done.returncode == 2, done.stdout + done.stderr
    assert (ci.out / "drift.exitcode").read_text().strip() == "2"
    html = (ci.out / "drift.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "retention.ms" in html
    md = (ci.out / "drift.md").read_text()
    assert "config" in md and f"`{merge[:7]}`" in md, "the revision the clusters were last reconciled to"
    doc = json.loads((ci.out / "drift.json").read_text())
    assert doc["status"] == "drift" and doc["summary"]["by_category"] == {"config": 1}
    assert next(c for c in doc["clusters"] if c["cluster"] == "east")["applied"]["commit"] == merge


class CaptureListener:
    """A TCP listener that records every byte any client sends it (a host a pull request names)."""

    def __init__(self):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.received = bytearray()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:

        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # TimeoutError included
                continue
            self.connections += 1
            conn.settimeout(0.5)
            try:
                while chunk := conn.recv(65536):
                    self.received += chunk
            except OSError:
                pass
            finally:
                conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def test_a_pull_request_cannot_send_credentials_to_a_host_it_names(ci):
    """Issue 44: the plan of a pull request connects with the base branch's connection settings only; a
    reference outside the credential keys or to another variable is refused; the capture listener the pull
    request names receives nothing (0 connections, 0 bytes of the secret)."""
    ci.create("west", "orders", 1)
    ci.write('"orders"')
    ci.commit("prod: replicate orders", ALICE)
    capture = CaptureListener()
    try:
        ci.repo.git.checkout("-b", "evil")
        path = ci.root / "topologies" / "prod" / "topology.yaml"
        honest = path.read_text()

        # 1. the pull request points east at its own host: planned with main's east, and the comment says so
        path.write_text(honest.replace(ci.boot["east"], capture.address))
        ci.commit("prod: move east", BOB)
        done = ci.script("plan-pr.sh", BASE_REF="main", EAST_CI_PASSWORD=SECRET)
        body = (ci.out / "plan-comment.md").read_text()
        assert done.returncode == 0, done.stderr
        assert "Connection settings come from `main`, not from this change" in body
        assert (
            md_inline("cluster 'east': this change sets bootstrap_servers; planned with the settings of main") in body
        )

        # 2. a secret in a setting sent to the broker as data, and a variable of no cluster: refused at validation
        for config in ('{client.id: "${EAST_CI_PASSWORD}"}', '{sasl.password: "${GITHUB_TOKEN}"}'):
            path.write_text(
                honest.replace(ci.boot["east"], capture.address).replace(
                    'config: {sasl.password: "${EAST_CI_PASSWORD}"}', f"config: {config}"
                )
            )
            ci.commit("prod: tune east", BOB)
            done = ci.script("plan-pr.sh", BASE_REF="main", GITHUB_TOKEN=SECRET)
            body = (ci.out / "plan-comment.md").read_text()
            assert done.returncode == 1 and "is not allowed" in body, body
        time.sleep(1.0)
    finally:
        capture.close()
        ci.repo.git.checkout("main")
    assert capture.connections == 0 and SECRET.encode() not in capture.received


PRUNING = """apiVersion: reconciler/v1
kind: Topology
metadata: {{name: ci}}
clusters:
  west: {{bootstrap_servers: "{west}"}}
  east: {{bootstrap_servers: "{east}"}}
prune: {{topics: true}}
flows:
  - source: west
    target: east
    topics: {{include: [{topics}]}}
    sync: {{acls: false}}
"""
APPROVE_DELETES = "apiVersion: reconciler/v1\nkind: Policy\nrules:\n  - require_approval: [delete]\n"
NAMES = "apiVersion: reconciler/v1\nkind: Policy\nrules:\n  - topic_name: '[a-z.]+'\n"


def test_a_deletion_is_applied_on_merge_only_with_the_approving_review(ci):
    """Issue 48, on real brokers: with POLICY_PATHS, ci/apply-main.sh refuses (exit 3) a change with a delete-class
    action while the plan records no approval, changing nothing; a change that also relaxes the policy is still
    judged by the policy before it (HEAD^); the approving review (APPROVED_BY, set by the workflow) is signed into
    the saved plan and the change is applied."""
    ci.create("west", "orders", 1)
    ci.create("west", "payments", 1)
    ci.create("west", "Orders_EU", 1)
    policy = ci.root / "policies" / "approve-deletes.yaml"
    policy.parent.mkdir(parents=True)
    policy.write_text(APPROVE_DELETES)
    (ci.root / "policies" / "names.yaml").write_text(NAMES)

    def commit(topics: str, message: str) -> str:
        path = ci.root / "topologies" / "prod" / "topology.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(PRUNING.format(topics=topics, **ci.boot))
        ci.repo.index.add(["topologies/prod/topology.yaml", "policies/approve-deletes.yaml", "policies/names.yaml"])
        return ci.repo.index.commit(message, author=ALICE, committer=ALICE).hexsha

    commit('"orders"', "prod: replicate orders, deletions need an approval")
    done = ci.script("apply-main.sh", POLICY_PATHS="policies")
    assert done.returncode == 0, done.stderr
    assert "west.orders" in ci.admin["east"].list_topics()

    # a pull request whose plan violates a policy: the check fails (exit 3), the comment lists the violation
    ci.repo.git.checkout("-b", "eu-orders")
    commit('"orders", "Orders_EU"', "prod: the EU orders too")
    done = ci.script("plan-pr.sh", BASE_REF="main", POLICY_PATHS="policies")
    assert done.returncode == 3, done.stdout + done.stderr
    body = (ci.out / "plan-comment.md").read_text()
    assert "#### ⛔ Policy (2 files): 1 violation" in body, body
    assert "`policies/names.yaml:4` **topic\\-name** topic west\\.Orders\\_EU on `east`" in body, body
    assert "west.Orders_EU" not in ci.admin["east"].list_topics()
    ci.repo.git.checkout("main")

    # a change that deletes west.orders (payments instead): refused without an approval, nothing applied
    commit('"payments"', "prod: replicate payments instead of orders")
    done = ci.script("apply-main.sh", POLICY_PATHS="policies")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "error: refused by policy: 1 change needs an approval this plan does not record" in done.stderr
    assert "policies/approve-deletes.yaml:4 [require-approval] topic west.orders on east" in done.stderr
    topics = ci.admin["east"].list_topics()
    assert "west.orders" in topics and "west.payments" not in topics, "nothing was applied"

    # the same change relaxing the policy too: the policy before the change judges it
    policy.write_text("apiVersion: reconciler/v1\nkind: Policy\nrules:\n  - max_partitions: 1000\n")
    commit('"payments"', "prod: payments, and no approval for deletions any more")
    done = ci.script("apply-main.sh", POLICY_PATHS="policies")
    assert done.returncode == 3 and "refused by policy" in done.stderr, done.stdout + done.stderr
    assert "west.orders" in ci.admin["east"].list_topics()

    # with the approving review the workflow read from GitHub: applied, and the approval signed into the plan
    done = ci.script(
        "apply-main.sh", POLICY_PATHS="policies", APPROVED_BY="carol (review of #7)", APPROVED_AT="2026-11-28T21:00:00Z"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The saved plan records: approved by carol (review of #7) at 2026-11-28T21:00:00Z." in done.stdout
    topics = ci.admin["east"].list_topics()
    assert "west.orders" not in topics and "west.payments" in topics
    saved = json.loads((ci.out / "plan.json").read_text())
    assert saved["plan"]["policy"]["approval"] == {"by": "carol (review of #7)", "at": "2026-11-28T21:00:00Z"}
