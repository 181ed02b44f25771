"""`${ENV_VAR}` references: the only way a secret may appear in a topology.

References stay unresolved in the model, plans and job specs; they are resolved at the
edge, just before a client connects, and resolved values are redacted from any text we print.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_KEY = re.compile(r"(password|secret|token|credentials?|jaas|api\.?key|private\.key|user\.info)", re.I)


def is_secret_key(key: str) -> bool:
    """librdkafka settings whose values are secrets (sasl.password, ssl.key.password, ...)."""
    return bool(_SECRET_KEY.search(key))


def is_env_reference(value: str) -> bool:
    return bool(ENV_REF.fullmatch(value.strip()))


def suggested_env_name(alias: str, key: str) -> str:
    """The variable name we propose for cluster `alias`'s setting `key` (e.g. PRIMARY_SASL_PASSWORD)."""
    return re.sub(r"[^A-Z0-9]+", "_", f"{alias}_{key}".upper()).strip("_")


def references(value: str) -> list[str]:
    return ENV_REF.findall(value)


class UnresolvedReference(Exception):
    def __init__(self, names: list[str]):
        self.names = names
        super().__init__(", ".join(names))


def resolve(value: str, environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    missing = [n for n in references(value) if n not in env]
    if missing:
        raise UnresolvedReference(missing)
    return ENV_REF.sub(lambda m: env[m.group(1)], value)


def client_settings(
    bootstrap_servers: str, config: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The one resolution path of a cluster's client settings: librdkafka `bootstrap.servers` + config
    with every reference resolved; raises UnresolvedReference naming all missing variables at once.
    Callers turn that one error type into their own words (a topology diagnostic, an AdminError)."""
    return resolve_config({**config, "bootstrap.servers": bootstrap_servers}, environ)


def resolve_config(config: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Resolve every reference; raises UnresolvedReference naming all missing variables at once."""
    missing: list[str] = []
    out: dict[str, str] = {}
    for k, v in config.items():
        try:
            out[k] = resolve(str(v), environ)
        except UnresolvedReference as exc:
            missing += exc.names
    if missing:
        raise UnresolvedReference(sorted(set(missing)))
    return out


class Redactor:
    """Replaces resolved secret values in text; every printing path goes through one."""

    def __init__(self, secrets: set[str] | None = None):
        self.secrets = {s for s in (secrets or set()) if s and len(s) >= 3}

    def add_from(self, config: Mapping[str, str], environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        for value in config.values():
            for name in references(str(value)):
                if name in env:
                    self.secrets.add(env[name])

    def __call__(self, text: str) -> str:
        for s in sorted((s for s in self.secrets if len(s) >= 3), key=len, reverse=True):
            text = text.replace(s, "***")
        return text
