"""`${ENV_VAR}` references: the only way a secret may appear in a topology, and the rules on them.

References stay unresolved in the model, plans and job specs; they are resolved at the edge, just
before a client connects, and resolved values are redacted from any text we print.

A reference is a way for a topology to make a process read its environment, and the environment of
a CI job holds credentials. So a reference is resolved only where a credential belongs and only from
a variable that belongs to that cluster (the one rule, `reference_problems`, used by validation and
again by `client_settings` at the edge):

- in `bootstrap_servers` and in the credential keys of `config` (`may_reference`: passwords, keys,
  tokens, JAAS and OAuth settings, user names, certificate and key locations) — never in a setting
  sent to a broker as data (`client.id: ${SR_PW}` would send the secret in clear text);
- only from a variable whose name starts with the cluster's alias in upper case and `_` (`env_prefix`:
  `WEST_` for cluster `west`), so a topology cannot read `GITHUB_TOKEN`, a CI variable or another
  cluster's password. (A cluster `east` can read `EAST_BACKUP_*`, which a cluster `east_backup` reads
  too: give clusters aliases that are not prefixes of one another when that matters.)

Where a variable's value comes from (`lookup`): with RECONCILER_SECRETS_DIR set, the file of that name in that
directory (its content, trailing newline stripped: a mounted Kubernetes Secret volume, one key per variable, which
the kubelet rewrites when the Secret changes), else the process environment. A name is a `${NAME}` name
(`[A-Za-z_][A-Za-z0-9_]*`): it never holds a path separator or `..`, so it names a file in that directory only.
A running engine re-resolves its clients' settings every few seconds and reconnects when the result changed
(engine/clients.py `Fingerprints`): `fingerprint` is what it compares, never the values.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from reconciler import settings

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ENV_REF = re.compile(r"\$\{(" + ENV_NAME.pattern + r")\}")
#: Settings whose values are secrets: a literal value is a validation error (librdkafka's sasl.password,
#: ssl.key.password, ssl.key.pem, sasl.oauthbearer.config; Spark's spark.authenticate.secret, s3a keys, ...).
_SECRET_KEY = re.compile(
    r"(password|passphrase|secret|token|credentials?|jaas|api\.?key|access\.?key|private\.?key|user\.info"
    r"|key\.pem|keystore\.key|oauthbearer\.config|sasl\.oauthbearer\.assertion)",
    re.I,
)
#: Settings that name who connects or where its certificates are, without being secret themselves: a
#: reference may stand here too (a user name per environment, a mounted certificate path).
_IDENTITY_KEY = re.compile(
    r"^(sasl\.username|sasl\.oauthbearer\.client\.id|sasl\.kerberos\.(principal|keytab)"
    r"|ssl\.(ca|certificate|key|keystore|truststore|crl)\.(location|pem)|ssl\.keystore\.certificate\.chain)$",
    re.I,
)
#: The pseudo-key under which a cluster's bootstrap_servers is checked (it may hold a reference).
BOOTSTRAP = "bootstrap_servers"


def is_secret_key(key: str) -> bool:
    """Settings whose values are secrets (sasl.password, ssl.key.pem, sasl.oauthbearer.config, ...)."""
    return bool(_SECRET_KEY.search(key))


def may_reference(key: str) -> bool:
    """Whether `${NAME}` may stand in setting `key` of a cluster (see the module's rules)."""
    return key == BOOTSTRAP or is_secret_key(key) or bool(_IDENTITY_KEY.match(key))


def is_env_reference(value: str) -> bool:
    return bool(ENV_REF.fullmatch(value.strip()))


def suggested_env_name(alias: str, key: str) -> str:
    """The variable name we propose for cluster `alias`'s setting `key` (e.g. PRIMARY_SASL_PASSWORD)."""
    return re.sub(r"[^A-Z0-9]+", "_", f"{alias}_{key}".upper()).strip("_")


def env_prefix(alias: str) -> str:
    """The prefix of the variables cluster `alias` may read: `WEST_` for `west`, `EU_CENTRAL_` for `eu-central`."""
    return suggested_env_name(alias, "") + "_"


def references(value: str) -> list[str]:
    return ENV_REF.findall(value)


@dataclass(frozen=True)
class ReferenceProblem:
    """A `${NAME}` the rules refuse: in a setting that may not hold one, or a variable of another prefix."""

    key: str  # `bootstrap_servers` or the config key
    name: str
    env_prefix: str

    @property
    def message(self) -> str:
        if not may_reference(self.key):
            return (
                f"{self.key}: ${{{self.name}}} is not allowed here: references are resolved only in "
                "bootstrap_servers and credential settings (passwords, keys, tokens, user names, certificates)"
            )
        return (
            f"{self.key}: ${{{self.name}}} is not allowed: this cluster reads only variables named {self.env_prefix}*"
        )

    @property
    def hint(self) -> str:
        if not may_reference(self.key):
            return f"write the value of {self.key} literally; it is sent to the broker and is not a secret"
        return f"name the variable {self.env_prefix}{self.name} (a cluster reads only variables named after it)"


def reference_problems(alias: str, bootstrap_servers: str, config: Mapping[str, object]) -> list[ReferenceProblem]:
    """Every reference of cluster `alias`'s settings that the rules refuse (pure: no environment needed)."""
    prefix = env_prefix(alias)
    out: list[ReferenceProblem] = []
    for key, value in ((BOOTSTRAP, bootstrap_servers), *config.items()):
        for name in dict.fromkeys(references(str(value))):
            if not may_reference(str(key)) or not name.startswith(prefix):
                out.append(ReferenceProblem(str(key), name, prefix))
    return out


#: Kubernetes Secret references of the Spark operator (`spark.kubernetes.driver.secretKeyRef.ENV=secret:key`,
#: `spark.kubernetes.executor.secrets.NAME=/path`): names of Secrets, not secrets.
_SPARK_SECRET_REF = re.compile(r"^spark\.kubernetes\.(driver|executor)\.secret(KeyRef|s)\.", re.I)
_SPARK_ENV = re.compile(r"^spark\.(executorEnv|kubernetes\.driverEnv|yarn\.appMasterEnv)\.")


@dataclass(frozen=True)
class SparkConfProblem:
    key: str
    message: str
    hint: str


def spark_conf_problems(spark_conf: Mapping[str, object], prefixes: tuple[str, ...]) -> list[SparkConfProblem]:
    """`job.spark_conf` under the secrets rule: a literal secret is refused; `${NAME}` stands only in an
    environment setting of the driver or executors (`spark.executorEnv.NAME`) or a secret key, and reads only
    a variable of one of the topology's clusters (`prefixes`: their `env_prefix`). The engine resolves it in its own process
    when it builds its Spark context (engine/session.py), never on a command line or in a rendered file."""
    out: list[SparkConfProblem] = []
    for key, value in spark_conf.items():
        key, text = str(key), str(value)
        names = references(text)
        if _SPARK_SECRET_REF.match(key):
            continue
        if is_secret_key(key) and not is_env_reference(text):
            out.append(
                SparkConfProblem(
                    key,
                    f"job.spark_conf {key} is a literal secret",
                    "never commit secrets: put it in the engine's environment (job.secret_name on Kubernetes) "
                    f"and write `${{NAME}}` with NAME one of {', '.join(p + '*' for p in prefixes) or 'the clusters’'}",
                )
            )
            continue
        for name in dict.fromkeys(names):
            if not (_SPARK_ENV.match(key) or is_secret_key(key)):
                out.append(
                    SparkConfProblem(
                        key,
                        f"job.spark_conf {key}: ${{{name}}} is not allowed here: references are resolved only in "
                        "spark.executorEnv.* and secret settings",
                        f"write the value of {key} literally",
                    )
                )
            elif not name.startswith(prefixes) if prefixes else True:
                out.append(
                    SparkConfProblem(
                        key,
                        f"job.spark_conf {key}: ${{{name}}} is not a variable of any cluster of the topology",
                        f"name it after a cluster: {', '.join(p + '*' for p in prefixes)}",
                    )
                )
    return out


class SecretsError(Exception):
    """A cluster's settings cannot be resolved; `str()` names variables and keys, never values."""


class UnresolvedReference(SecretsError):
    def __init__(self, names: list[str]):
        self.names = names
        super().__init__(", ".join(names))


class RefusedReference(SecretsError):
    def __init__(self, problems: list[ReferenceProblem]):
        self.problems = problems
        super().__init__("; ".join(p.message for p in problems))


def lookup(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of variable `name`: the file `$RECONCILER_SECRETS_DIR/name` when the directory is set and holds
    it (its content, trailing newline stripped), else the environment's; None when neither has it. (`environ`:
    the environment, RECONCILER_SECRETS_DIR included; None: the process's.) A file that exists but cannot be read
    raises SecretsError naming the file, never falls back silently to another value."""
    env = os.environ if environ is None else environ
    directory = settings.secrets_dir(env)
    if directory is not None:
        if not ENV_NAME.fullmatch(name):  # unreachable through ENV_REF; a name is never a path
            raise SecretsError(f"{name!r} is not a variable name")
        path = directory / name
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            pass
        except (OSError, UnicodeDecodeError) as exc:
            raise SecretsError(
                f"{path}: cannot be read ({getattr(exc, 'strerror', None) or type(exc).__name__})"
            ) from None
        else:
            return text.rstrip("\r\n")
    return env.get(name)


def resolve(value: str, environ: Mapping[str, str] | None = None) -> str:
    found = {n: lookup(n, environ) for n in dict.fromkeys(references(value))}
    missing = [n for n, v in found.items() if v is None]
    if missing:
        raise UnresolvedReference(missing)
    return ENV_REF.sub(lambda m: str(found[m.group(1)]), value)


#: Settings that name a file holding a credential (a certificate, a key, a keytab): a file rewritten in place is a
#: changed credential too, so `fingerprint(..., files=True)` covers their contents, not only their paths.
_CREDENTIAL_FILE_KEY = re.compile(
    r"^(ssl\.(ca|certificate|key|keystore|truststore|crl)\.location|sasl\.kerberos\.keytab)$", re.I
)


def _file_digest(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError as exc:
        return f"unreadable: {type(exc).__name__}"


def fingerprint(resolved: Mapping[str, object], files: bool = False) -> str:
    """The sha256 of resolved client settings: what tells a running engine that a credential changed, without
    keeping or printing the values themselves. With `files`, the contents of the credential files they name
    (`ssl.*.location`, `sasl.kerberos.keytab`) count too: a certificate renewed at the same path changes it."""
    shown: dict[str, object] = {str(k): v for k, v in resolved.items()}
    if files:
        for key, value in resolved.items():
            if _CREDENTIAL_FILE_KEY.match(str(key)) and isinstance(value, str) and value:
                shown[f"{key} (content)"] = _file_digest(value)
    text = json.dumps(shown, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def client_settings(
    alias: str, bootstrap_servers: str, config: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The one resolution path of a cluster's client settings: librdkafka `bootstrap.servers` + config
    with every reference resolved. Raises RefusedReference when a reference breaks the rules (checked
    again here, whatever validated the settings before: a job spec or a file may have been edited) and
    UnresolvedReference naming all missing variables at once. Callers turn these errors into their own words (a topology diagnostic, an AdminError)."""
    problems = reference_problems(alias, bootstrap_servers, config)
    if problems:
        raise RefusedReference(problems)
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
        for value in config.values():
            for name in references(str(value)):
                try:
                    found = lookup(name, environ)
                except SecretsError:
                    continue
                if found is not None:
                    self.secrets.add(found)

    def __call__(self, text: str) -> str:
        for s in sorted((s for s in self.secrets if len(s) >= 3), key=len, reverse=True):
            text = text.replace(s, "***")
        return text
