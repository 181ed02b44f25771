"""Kafka principals as a topology names them (`User:mirror`): the one rule of what a declared principal may be.

A declared principal is granted rights by the reconciler (the replication principal is the one principal
that may WRITE remote topics, issue 45), so it must name exactly one identity: `<Type>:<name>`, the type a
word (`User`, `Group`, ...), the name not empty, without surrounding blanks and without a wildcard. Kafka
reads `User:*` as every user; `User:ANONYMOUS` is every unauthenticated client (PLAINTEXT listeners).
Either as a replication principal would give every plan's WRITE grant on every remote topic to everyone.
"""

from __future__ import annotations

import re

#: Kafka's wildcard principal (any user), as ACLs carry it.
WILDCARD_PRINCIPAL = "User:*"
#: The principal of unauthenticated connections (Kafka's KafkaPrincipal.ANONYMOUS).
ANONYMOUS_PRINCIPAL = "User:ANONYMOUS"

_FORM = re.compile(r"[A-Za-z][A-Za-z0-9_-]*:\S(?:.*\S)?")


def principal_problem(value: object) -> str | None:
    """Why `value` is not one identity's principal (None: it is). The message completes "... is not a
    principal: <problem>"."""
    if not isinstance(value, str) or not value.strip():
        return "it is empty"
    if value != value.strip():
        return "it has leading or trailing blanks"
    if not _FORM.fullmatch(value):
        return "it is not of the form <Type>:<name>, e.g. User:mirror"
    kind, _, name = value.partition(":")
    if "*" in name or "?" in name:
        return f"{value!r} is a wildcard: it names every {kind.lower()}, not one"
    if value.upper() == ANONYMOUS_PRINCIPAL.upper():
        return f"{value!r} is every unauthenticated client"
    return None


def matches(acl_principal: str, principal: str) -> bool:
    """Whether an ACL entry's principal applies to `principal` (its own, or Kafka's wildcard `User:*`)."""
    return acl_principal == principal or acl_principal == WILDCARD_PRINCIPAL
