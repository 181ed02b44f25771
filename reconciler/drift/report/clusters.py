"""Items about a cluster itself: its certificates (`drift/certificates.py`: expired or expiring within
`slo.certificate_expiry_days` is drift, one that cannot be read a note) and the revision the reconciler last
applied there (a note)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.drift.certificates import CertificateCheck, Expiry
from reconciler.drift.report.items import Category, DriftItem, Level
from reconciler.drift.report.values import iso_ms, number
from reconciler.textutil import plural


def _certificate_named(c: CertificateCheck) -> str:
    return f"{c.setting} of cluster {c.cluster}" + (f" ({c.shown})" if c.shown else "")


def certificate_item(c: CertificateCheck) -> DriftItem | None:
    """Expired or expiring within the window: drift; unreadable: a note naming the setting, never its content."""
    named = _certificate_named(c)
    if c.state is Expiry.UNREADABLE:
        return DriftItem(
            Category.CERTIFICATE,
            Level.NOTE,
            c.cluster,
            (),
            c.setting,
            f"{named} could not be read as a certificate, so its expiry is not checked: {c.problem}",
            "point it at a readable PEM file (or PEM text) of the certificate",
        )
    if c.state is Expiry.OK:
        return None
    which = f"certificate {c.subject or '(no common name)'}"
    if c.certificates > 1:
        which += f", the first to expire of its {c.certificates}"
    days = c.days_left or 0
    if c.state is Expiry.EXPIRED:
        ago = "today" if days == 0 else f"{plural(-days, 'day')} ago"
        message = f"{named}: {which}, expired at {c.not_after_iso} ({ago})"
    else:
        message = (
            f"{named}: {which}, expires at {c.not_after_iso}, in {plural(days, 'day')} "
            f"(slo.certificate_expiry_days {c.window_days})"
        )
    return DriftItem(
        Category.CERTIFICATE,
        Level.DRIFT,
        c.cluster,
        (),
        c.setting,
        message,
        "renew the certificate and deploy it where the reconciler and the jobs read it"
        + (": connections to the cluster fail until then" if c.state is Expiry.EXPIRED else ""),
    )


def applied_view(record: Mapping[str, Any] | None) -> dict | None:
    """The `applied/<cluster>` record as reported: the git revision (new records carry `git`, older ones
    only a `<sha>[-dirty]` string), when, by whom, with which clusters."""
    if not record:
        return None
    git = record.get("git") if isinstance(record.get("git"), Mapping) else None
    label = record.get("revision") if isinstance(record.get("revision"), str) else None
    commit = git.get("commit") if git else (label.removesuffix("-dirty") if label else None)
    at = number(record.get("at"))
    return {
        "commit": commit,
        "short": (git.get("short") if git else None) or (commit[:7] if commit else None),
        "author": git.get("author") if git else None,
        "time_iso": git.get("time_iso") if git else None,
        "message_subject": git.get("message_subject") if git else None,
        "dirty": bool(git.get("dirty")) if git else bool(label and label.endswith("-dirty")),
        "applied_at": iso_ms(at * 1000) if at is not None else None,
        "who": record.get("who"),
        "clusters": list(record.get("clusters") or []),
        "actions": record.get("actions"),
        "fingerprint": record.get("fingerprint"),
    }


def revision_items(alias: str, applied: dict | None, revision: Mapping[str, Any] | None) -> list[DriftItem]:
    if applied is None:
        return [
            DriftItem(
                Category.REVISION, Level.NOTE, alias, (), "", f"no apply by the reconciler is recorded on {alias}"
            )
        ]
    where = f"{applied['short'] or 'an unknown revision'}" + (" (dirty work tree)" if applied["dirty"] else "")
    msg = (
        f"{alias} was last reconciled to {where}"
        + (f" by {applied['who']}" if applied.get("who") else "")
        + (f" at {applied['applied_at']}" if applied.get("applied_at") else "")
    )
    if revision and applied.get("commit") and applied["commit"] != revision.get("commit"):
        msg += f"; the topology checked is at {revision.get('short')}"
    return [DriftItem(Category.REVISION, Level.NOTE, alias, (), "", msg)]
