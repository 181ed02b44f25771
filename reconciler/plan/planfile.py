"""Saved plans (`plan --out FILE`, `apply FILE TOPOLOGY...`): a plan that cannot be edited into something else.

A saved plan holds the plan (its actions, and the scope and fingerprint of the live state it was computed from),
what it was planned from (the topology's content digest, and its git commit when the topology is in git), a
digest of its actions (sha256 over their canonical JSON), and an HMAC-SHA256 signature over the whole document
with the key of `RECONCILER_PLAN_KEY` (the file names the key by its id, the first 8 hex digits of the key's
sha256, so a mismatch says which key). It holds no connection settings: `apply FILE` connects with those of
the topology it is given, never with anything read from the file.

The plan carries its `policy` record (plan/policy_record.py): what `plan --policy` found and the approval
`--approved-by` recorded. The signature covers it: an approval cannot be added, nor a requirement removed, without
the key; `apply` enforces it (operations/apply.py `policy_refusal`, docs/policy.md).

`apply FILE` (reconciler/operations/apply.py) verifies the signature (with `RECONCILER_PLAN_KEY`, or
`RECONCILER_PLAN_KEY_PREVIOUS` during a key rotation) and the actions digest, checks that the topology given is
the content (and commit) planned, plans again from it against the live clusters and refuses any action of the
file the fresh plan does not have (`unexpected`); under the lease it re-reads the scoped live state and refuses
the plan when its fingerprint changed (`stale_reason`). docs/security.md, "Saved plans: signing and verification".
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import outputs, settings
from reconciler.plan.actions import FORMAT_VERSION as PLAN_FORMAT_VERSION
from reconciler.plan.actions import Action, Plan
from reconciler.plan.document import document as plan_document
from reconciler.plan.policy_record import PolicyRecord
from reconciler.state.live import LiveState
from reconciler.textutil import cut
from reconciler.topology.model import Topology

KIND = "reconciler-saved-plan"
#: The saved plan's own format (its `plan` is plan JSON, docs/plan-json.md, with its own format_version).
#: 1: unsigned, with the clusters' connection settings (refused: plan again); 2: signed, no connection settings;
#: 3: its plan carries the `policy` record (what `plan --policy` found, the approval of `--approved-by`), which
#: `apply` enforces (a reconciler that reads 2 only refuses it rather than applying it without its approvals).
FORMAT_VERSION = 3
ALGORITHM = "HMAC-SHA256"
LATEST_TIME = 253402300799  # 9999-12-31T23:59:59Z: the last `saved_at` a time can be shown for
MIN_KEY_LENGTH = 16  # characters; `openssl rand -hex 32` gives 64
#: Action fields that are words for people, not what the action does: left out of its identity (and of the identity
#: of each flow an engine replacement restarts, its `restarts`).
_NOT_IDENTITY = ("reason", "description")


class PlanFileError(Exception):
    """A saved plan that cannot be written, read, verified or applied: one line, `plan file PATH: why; what to do`."""


@dataclass(frozen=True)
class PlanKey:
    """A signing key and the variable it came from (never printed: only its id)."""

    env: str
    secret: str

    @property
    def id(self) -> str:
        return key_id(self.secret)

    def sign(self, payload: bytes) -> str:
        return hmac.new(self.secret.encode("utf-8"), payload, hashlib.sha256).hexdigest()


def key_id(secret: str) -> str:
    """The first 8 hex digits of the key's sha256: names a key in files and messages without revealing it."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()[:8]


def _keys(environ: Mapping[str, str] | None) -> list[PlanKey]:
    keys = [PlanKey(env, secret) for env, secret in settings.plan_keys(environ).items()]
    for k in keys:
        if len(k.secret) < MIN_KEY_LENGTH:
            raise PlanFileError(
                f"{k.env} (key {k.id}) is {len(k.secret)} characters long, shorter than {MIN_KEY_LENGTH}; "
                "use a random key, e.g. `openssl rand -hex 32`"
            )
    return keys


def signing_key(environ: Mapping[str, str] | None = None) -> PlanKey:
    """The key `plan --out` signs with: RECONCILER_PLAN_KEY (the previous key never signs)."""
    keys = [k for k in _keys(environ) if k.env == settings.PLAN_KEY_ENV]
    if not keys:
        raise PlanFileError(
            f"{settings.PLAN_KEY_ENV} is not set: a saved plan must be signed so that `apply FILE` can tell it "
            f"was not edited; set it from the CI's secret store (locally: export {settings.PLAN_KEY_ENV}=\"$(openssl "
            'rand -hex 32)"), or apply the topology itself without --out'
        )
    return keys[0]


def verifying_keys(environ: Mapping[str, str] | None = None) -> list[PlanKey]:
    """The keys `apply FILE` accepts: RECONCILER_PLAN_KEY, and RECONCILER_PLAN_KEY_PREVIOUS during a rotation."""
    return _keys(environ)


def canonical(value: Any) -> bytes:
    """The one byte form of a JSON value that is digested and signed: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def actions_digest(actions: list[Any]) -> str:
    """sha256 over the canonical JSON of the actions (as `Action.to_dict` writes them, in plan order)."""
    return hashlib.sha256(canonical(actions)).hexdigest()


def _deeds(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in _NOT_IDENTITY}


def identity(action: Action) -> bytes:
    """What an action does, canonically: every field but the words for people (reason, description), also of the
    flows an engine replacement restarts."""
    out = _deeds(action.to_dict())
    if isinstance(out.get("restarts"), list):
        out["restarts"] = [_deeds(e) for e in out["restarts"]]
    return canonical(out)


@dataclass(frozen=True)
class SavedPlan:
    path: str
    plan: Plan
    topology_digest: str  # Topology.content_digest of what was planned
    commit: str | None  # the topology's git commit, when it was in git
    key_id: str
    revision: str | None = None  # `<sha>[-dirty]`: carried by the job specs planned
    saved_at: float = 0.0
    git: dict | None = None  # RevisionInfo.to_dict() of the topology's commit (reconciler.gitops.revision)
    environment: str | None = None  # the topology's environment it was planned for (`plan --env`)
    #: what `plan --policy` found and the approval `--approved-by` recorded (the plan's `policy` object), or None
    policy: PolicyRecord | None = None


def _signed_part(doc: Mapping[str, Any]) -> bytes:
    """The bytes the signature covers: the whole document, the signature's algorithm and key id included, but
    for the signature's value itself."""
    sig = doc.get("signature")
    unsigned = {**doc, "signature": {k: v for k, v in sig.items() if k != "value"} if isinstance(sig, dict) else sig}
    return canonical(unsigned)


def document(
    plan: Plan,
    topology: Topology,
    key: PlanKey,
    revision: str | None = None,
    git: Mapping[str, Any] | None = None,
    policy: PolicyRecord | None = None,
) -> dict[str, Any]:
    """The signed saved-plan document of `plan`, planned from `topology`, with the `policy` record (what the
    policies found, the approval) in its plan: the signature covers it."""
    body = plan_document(plan, scope=True, policy=policy.to_dict() if policy is not None else None)
    doc: dict[str, Any] = {
        "kind": KIND,
        "format_version": FORMAT_VERSION,
        "saved_at": time.time(),
        "revision": revision,
        "git": dict(git) if git else None,
        "topology": {
            "name": topology.name,
            "environment": topology.environment,
            "content_sha256": topology.content_digest,
            "commit": (git or {}).get("commit"),
        },
        "plan": body,
    }
    return sign(doc, key)


def sign(doc: dict[str, Any], key: PlanKey) -> dict[str, Any]:
    """`doc` with its actions digest and signature (by `key`) set anew."""
    doc["actions_sha256"] = actions_digest(doc["plan"]["actions"])
    doc["signature"] = {"algorithm": ALGORITHM, "key_id": key.id}
    doc["signature"]["value"] = key.sign(_signed_part(doc))
    return doc


def save(
    path: str | Path,
    plan: Plan,
    topology: Topology,
    key: PlanKey,
    revision: str | None = None,
    git: Mapping[str, Any] | None = None,
    policy: PolicyRecord | None = None,
) -> None:
    """Write the signed plan to `path`, readable by its owner only (0600; directories created 0700)."""
    doc = document(plan, topology, key, revision, git, policy)
    outputs.write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n", private=True)  # OutputError


def is_plan_file(path: str | Path) -> bool:
    p = Path(path)
    if not p.is_file():
        return False
    try:
        data = p.read_bytes()
    except OSError:
        return False
    return data.lstrip().startswith(b"{") and KIND.encode() in data


def _damaged(path: str | Path, why: str) -> PlanFileError:
    return PlanFileError(f"plan file {path}: damaged saved plan: {why}; plan again")


def _read(path: str | Path) -> dict[str, Any]:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PlanFileError(
            f"plan file {path}: not a readable saved plan (truncated, or not JSON: {cut(str(exc), 80)}); plan again"
        ) from None
    except RecursionError:  # json recurses once per level: a plan is a few levels deep
        raise _damaged(path, "nested too deeply to be a plan") from None
    if not isinstance(doc, dict):
        raise _damaged(path, "a JSON object was expected")
    if doc.get("kind") != KIND:
        raise PlanFileError(f"plan file {path}: not a saved plan (kind {cut(repr(doc.get('kind')), 60)})")
    version = doc.get("format_version")
    if version != FORMAT_VERSION:
        old = (
            {
                1: " (an unsigned plan with connection settings, from an earlier reconciler)",
                2: " (without the policy record, from an earlier reconciler)",
            }.get(version, "")
            if isinstance(version, int)
            else ""
        )
        raise PlanFileError(
            f"plan file {path}: saved plan format_version {cut(repr(version), 60)}{old}, this reconciler reads "
            f"{FORMAT_VERSION} only; plan again with this version (`reconciler plan TOPOLOGY --out FILE`)"
        )
    return doc


def _verify(path: str | Path, doc: Mapping[str, Any], keys: list[PlanKey]) -> PlanKey:
    sig = doc.get("signature")
    if not isinstance(sig, dict) or not isinstance(sig.get("value"), str) or not isinstance(sig.get("key_id"), str):
        raise PlanFileError(
            f"plan file {path}: not signed, so it may have been edited; plan again with {settings.PLAN_KEY_ENV} set"
        )
    if sig.get("algorithm") != ALGORITHM:
        raise PlanFileError(
            f"plan file {path}: signed with {cut(repr(sig.get('algorithm')), 40)}, not {ALGORITHM}; plan again"
        )
    signer = cut(sig["key_id"], 16)
    if not keys:
        raise PlanFileError(
            f"plan file {path}: cannot verify its signature (key {signer}): {settings.PLAN_KEY_ENV} is not set; "
            "set it to the key the plan was signed with"
        )
    named = ", ".join(f"key {k.id} ({k.env})" for k in keys)
    matching = [k for k in keys if k.id == sig["key_id"]]
    if not matching:
        raise PlanFileError(
            f"plan file {path}: signed with key {signer}, but this run has {named}; plan again in this run or "
            "check the key"
        )
    key = matching[0]
    if not hmac.compare_digest(key.sign(_signed_part(doc)), sig["value"]):
        raise PlanFileError(
            f"plan file {path}: signature does not verify with key {key.id} ({key.env}); plan again in this run "
            "or check the key"
        )
    return key


def load(path: str | Path, keys: list[PlanKey] | None = None, verify: bool = True) -> SavedPlan:
    """The saved plan at `path`, its signature verified with `keys` (None: the keys of the environment) and its
    actions digest checked. Raises PlanFileError (one line) when it is unreadable, unsigned or edited.
    `verify=False` (only `show` without a key, which applies nothing): the signature is not checked."""
    doc = _read(path)
    if verify:
        key_id_ = _verify(path, doc, verifying_keys() if keys is None else keys).id
    else:
        sig = doc.get("signature")
        key_id_ = str(sig.get("key_id")) if isinstance(sig, dict) else "none"
    body, topo = doc.get("plan"), doc.get("topology")
    if not isinstance(body, dict) or not isinstance(body.get("actions"), list) or not isinstance(topo, dict):
        raise _damaged(path, "no plan or no topology in it")
    if doc.get("actions_sha256") != actions_digest(body["actions"]):
        raise PlanFileError(f"plan file {path}: its actions do not match their digest (actions_sha256); plan again")
    if "clusters" in doc:
        raise _damaged(path, "it carries connection settings (`clusters`), which a saved plan never holds")
    if body.get("format_version") != PLAN_FORMAT_VERSION:
        raise PlanFileError(
            f"plan file {path}: its plan is plan JSON format_version {cut(repr(body.get('format_version')), 20)} (an "
            f"earlier reconciler's), this reconciler applies {PLAN_FORMAT_VERSION} only; plan again with this version"
        )
    try:
        plan = Plan.from_dict(body)
        policy = PolicyRecord.from_dict(body["policy"]) if body.get("policy") is not None else None
    except (KeyError, ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise _damaged(path, cut(str(exc) or type(exc).__name__)) from None
    saved_at = doc.get("saved_at", 0.0)
    if isinstance(saved_at, bool) or not isinstance(saved_at, (int, float)) or not 0 <= saved_at <= LATEST_TIME:
        raise _damaged(
            path, f"saved_at {cut(repr(saved_at), 60)} is not a time (seconds since 1970, as `plan --out` writes)"
        )
    for key_name, kinds, value in (
        ("revision", str, doc.get("revision")),
        ("git", dict, doc.get("git")),
        ("topology.commit", str, topo.get("commit")),
        ("topology.environment", str, topo.get("environment")),
    ):
        if value is not None and not isinstance(value, kinds):
            raise _damaged(path, f"{key_name} {cut(repr(value), 60)} is not a {kinds.__name__}")
    digest = topo.get("content_sha256")
    if not isinstance(digest, str) or not digest:
        raise _damaged(path, "no topology content digest")
    return SavedPlan(
        str(path),
        plan,
        digest,
        topo.get("commit"),
        key_id_,
        doc.get("revision"),
        float(saved_at),
        doc.get("git"),
        topo.get("environment"),
        policy,
    )


def topology_mismatch(saved: SavedPlan, topology: Topology, git: Mapping[str, Any] | None) -> str | None:
    """Why `topology` (at git revision `git`) is not what `saved` was planned from, or None."""
    if topology.environment != saved.environment:
        planned = f"environment {saved.environment}" if saved.environment else "a topology without environments"
        given = f"environment {topology.environment} (--env)" if topology.environment else "without environments"
        return (
            f"plan file {saved.path}: planned for {planned}, the topology given is {given}; apply it with the "
            "environment it was planned for, or plan again for this one"
        )
    if topology.content_digest != saved.topology_digest:
        return (
            f"plan file {saved.path}: planned from other topology content (sha256 {saved.topology_digest[:12]}), "
            f"the topology given is {topology.content_digest[:12]}; plan again from this topology"
        )
    now = (git or {}).get("commit")
    if saved.commit is not None and now != saved.commit:
        where = f"commit {now[:12]}" if now else "outside git"
        return (
            f"plan file {saved.path}: planned at commit {saved.commit[:12]}, the topology given is {where}; "
            "plan again from this commit"
        )
    return None


def unexpected(saved: Plan, fresh: Plan) -> list[Action]:
    """The actions of `saved` that the fresh plan (the topology planned again against the live clusters) does not
    have, compared by identity (`identity`: kind, cluster, topic or flow, and every value)."""
    want = {identity(a) for a in fresh.actions}
    return [a for a in saved.actions if identity(a) not in want]


def unexpected_reason(path: str, extra: list[Action]) -> str:
    first = extra[0]
    more = f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
    return (
        f"plan file {path}: the topology, planned again against the clusters, would not "
        f"{first.describe()} on {first.cluster}{more}; refusing the whole plan: plan again"
    )


def stale_reason(plan: Plan, live: LiveState) -> str | None:
    """Why the plan no longer matches the clusters, or None when it is fresh."""
    now = live.fingerprint(plan.scope)
    if now == plan.fingerprint:
        return None
    return (
        "the clusters changed since this plan was made (live-state fingerprint "
        f"{plan.fingerprint[:19]}... is now {now[:19]}...); run `reconciler plan` again and apply the new plan"
    )
