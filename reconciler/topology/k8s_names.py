"""Kubernetes object names a topology sets (issue 45): the JSON Schema's patterns for them, what each means in words
(the schema errors' text, topology/schema.py), and the names that are legal but should not be used.

Kubernetes' own rules (k8s.io/apimachinery validation): a namespace is a DNS-1123 label (lowercase letters, digits
and '-', starting and ending with a letter or digit, at most 63 characters); a service account and a Secret are
DNS-1123 subdomains (labels joined by '.', at most 253 characters). A name like `../../Kube_System!` is refused at
validation, with its position, before it reaches a manifest or a kubectl command line.
"""

from __future__ import annotations

from typing import Any

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = f"^{_LABEL}$"
DNS1123_SUBDOMAIN = rf"^{_LABEL}(\.{_LABEL})*$"

#: JSON Schema constraints of the two kinds of name.
LABEL_SCHEMA: dict[str, Any] = {"pattern": DNS1123_LABEL, "minLength": 1, "maxLength": 63}
SUBDOMAIN_SCHEMA: dict[str, Any] = {"pattern": DNS1123_SUBDOMAIN, "minLength": 1, "maxLength": 253}

#: An IPv4 or IPv6 address, roughly (the job checks it exactly: settings.metrics_bind): job.metrics_bind.
IP_ADDRESS = r"^([0-9]{1,3}(\.[0-9]{1,3}){3}|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)$"

#: A schema pattern -> what a value must be, in words (the schema error says it instead of the regular expression).
PATTERN_MEANINGS = {
    DNS1123_LABEL: "a Kubernetes name (DNS-1123 label): lowercase letters, digits and '-', starting and ending with "
    "a letter or digit, at most 63 characters",
    DNS1123_SUBDOMAIN: "a Kubernetes name (DNS-1123 subdomain): lowercase letters, digits, '-' and '.', starting and "
    "ending with a letter or digit, at most 253 characters",
    IP_ADDRESS: "an IP address, e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)",
}

#: Service account names a validation warns about: the namespace's `default` account (shared by every pod that names
#: none, so whatever it is granted every such pod gets), and the names of Kubernetes' privileged ClusterRoles (a
#: service account so named is usually bound to the role of its name). Legal names, so a warning, not an error.
RISKY_SERVICE_ACCOUNTS = {
    "default": "the namespace's default service account, shared by every pod that names none",
    "cluster-admin": "named after Kubernetes' cluster-admin ClusterRole (every right on every resource)",
    "admin": "named after Kubernetes' admin ClusterRole",
    "edit": "named after Kubernetes' edit ClusterRole",
}
#: Namespaces of the cluster's own components: the job does not belong there.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
