"""Settings read from environment variables: the one place they are read and parsed.

Every RECONCILER_* variable is a `Setting` here (the table below), read through its function
(`settings.lease_ttl()`, `settings.state_dir()`, ...), which takes an optional `environ` mapping (tests
pass one; None: the process environment). A malformed value never raises where it is read (module
constants elsewhere, `DEFAULT_TTL = settings.lease_ttl()`, are evaluated at import, before the command
line runs): the reader returns the default. `check()` reads every setting again and prints one line per
malformed one, `error: RECONCILER_X=abc is not ...: <meaning>, default ...; set it to e.g. RECONCILER_X=... or unset it`; the
CLI's `main()` and the replication job's entry point (jobs/mirror_job.py) call it first and exit 1,
nothing changed. An unset or empty variable is its default.

| variable                      | default     | meaning                                                        |
|-------------------------------|-------------|----------------------------------------------------------------|
| RECONCILER_ADMIN_TIMEOUT      | 15          | seconds an admin call to a cluster may take                    |
| RECONCILER_LEASE_TTL          | 60          | seconds an apply lease lives without renewal                   |
| RECONCILER_JOB_START_GRACE    | 180         | seconds a new job may run before it must report status         |
| RECONCILER_MAX_REMOTE_TOPICS  | 10000       | remote topics validate/plan accept before refusing (multiplication) |
| RECONCILER_MAX_FLOWS          | 5000        | flows a topology (or an import) may declare before it is refused |
| RECONCILER_DEV_ENGINE         | tansu       | the embedded brokers' engine: `dev up`, `demo`, the test brokers (tansu, noida) |
| RECONCILER_JOBS               | on          | `off`: plans leave replication jobs out (topics, configs, ACLs only) |
| RECONCILER_LOG_FORMAT         | text        | `json`: every log line (CLI stderr, the job's log) one JSON object |
| RECONCILER_KUBECTL            | kubectl     | the kubectl program the kubernetes deployer runs (`kubectl_apply`) |
| RECONCILER_STATE_DIR          | .reconciler | local state: dev brokers, local jobs, rendered manifests       |
| RECONCILER_METRICS_PORT       | 0           | the job's Prometheus port (0: none; `auto`: any free port); set by the deployers |
| RECONCILER_METRICS_BIND       | 127.0.0.1   | the address the job's /metrics listens on; set by the deployers (kubernetes: 0.0.0.0) |
| RECONCILER_TEST_TXN_DELAY_MS  | 0           | tests only: milliseconds an exactly-once task waits before committing |
| RECONCILER_TEST_PLAN_SCHEMA   | off         | tests only: every plan JSON document made is checked against schemas/plan.schema.json |
| RECONCILER_JOB_INSTANCE       | (unset)     | the id of a job instance, set by the deployer on every process of it |
| RECONCILER_JOB_DIR            | (unset)     | the job's state directory, set by the deployer                 |
| RECONCILER_PLAN_KEY           | (unset)     | the secret that signs saved plans (`plan --out`) and verifies them (`apply FILE`) |
| RECONCILER_PLAN_KEY_PREVIOUS  | (unset)     | during a key rotation: the former key, accepted to verify (never to sign) |
| RECONCILER_SECRETS_DIR        | (unset)     | a directory of credential files: `${NAME}` reads the file NAME there before the environment |
| RECONCILER_STATUS_RESOURCE    | (unset)     | `NAMESPACE/NAME` of the ReplicationEngine an engine writes its verdict to; set by the kubernetes deployer |
| RECONCILER_KUBE_API           | (unset)     | the Kubernetes API an engine writes its status to (unset: the pod's, from KUBERNETES_SERVICE_HOST) |
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TextIO, TypeVar

T = TypeVar("T")

#: The environment every process of a job instance carries (the deployer sets it; Spark hands it on to the
#: driver and the Python workers): one id per start, and the job's state directory. The deployer finds every
#: process of an instance, and leftovers of earlier instances of the same flow, by these.
INSTANCE_ENV = "RECONCILER_JOB_INSTANCE"
JOB_DIR_ENV = "RECONCILER_JOB_DIR"

#: The environment variable the deployers hand a job its metrics port in (0 or unset: no HTTP server; the
#: metrics port contract between the deployers and a job: reconciler/contract/metrics.py).
PORT_ENV = "RECONCILER_METRICS_PORT"
#: The port of a job's metrics on Kubernetes (9404: the JMX exporter's port in Strimzi, where MM2 is scraped).
KUBERNETES_PORT = 9404
#: The environment variable the deployers hand a job the address of its /metrics in (issue 45: the endpoint has no
#: authentication, so a job binds the loopback interface unless told otherwise; docs/security.md).
BIND_ENV = "RECONCILER_METRICS_BIND"
#: Where a job's /metrics listens by default: this machine only (local and spark-standalone deployers).
LOOPBACK = "127.0.0.1"
#: Every interface: the kubernetes deployer's choice (the pod network; Prometheus scrapes the pod's address).
ALL_INTERFACES = "0.0.0.0"
#: $RECONCILER_METRICS_PORT's value for "bind any free port" (what the local deployers hand a job).
AUTO = "auto"
#: `metrics_port`'s answer for AUTO: the job binds port 0 and reports the port it got.
AUTO_PORT = -1
#: The longest value an error message repeats whole (a longer one is cut, its length said).
_SHOWN = 80


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One environment variable: `parse` turns its text into a value or raises ValueError saying what it must
    be ("a whole number >= 1"); `example` is a good value for the error's hint."""

    name: str
    default: T
    meaning: str
    parse: Callable[[str], T]
    example: str

    def raw(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The variable's text, None when unset or blank."""
        value = (os.environ if environ is None else environ).get(self.name)
        return value.strip() if value is not None and value.strip() else None

    def __call__(self, environ: Mapping[str, str] | None = None) -> T:
        raw = self.raw(environ)
        if raw is None:
            return self.default
        try:
            return self.parse(raw)
        except ValueError:
            return self.default  # check() says why, before any command does anything

    def problem(self, environ: Mapping[str, str] | None = None) -> str | None:
        """What is wrong with the variable's value (one line), None when it is fine or unset."""
        raw = self.raw(environ)
        if raw is None:
            return None
        try:
            self.parse(raw)
        except ValueError as exc:
            shown = raw if len(raw) <= _SHOWN else f"{raw[:_SHOWN]}... ({len(raw):,} characters)"
            return (
                f"{self.name}={shown} is not {exc}: {self.meaning}, default {self.default_text}; "
                f"set it to e.g. {self.name}={self.example} or unset it"
            )
        return None

    @property
    def default_text(self) -> str:
        if self.default is None:
            return "unset"
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        return f"{self.default:g}" if isinstance(self.default, float) else str(self.default)


#: Every setting, by name: what `check()` reads.
TABLE: dict[str, Setting] = {}


def _setting(name: str, default: T, meaning: str, parse: Callable[[str], T], example: str) -> Setting[T]:
    TABLE[name] = setting = Setting(name, default, meaning, parse, example)
    return setting


# --- parsers: text -> value, or ValueError saying what the text must be ------------------------------------
def _number(integer: bool, minimum: float) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        try:
            value: float = int(raw) if integer else float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < minimum:
            raise ValueError(f"{'a whole number' if integer else 'a number'} >= {minimum:g}")
        return value

    return parse


def _one_of(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw.lower() not in choices:
            raise ValueError(f"one of {', '.join(choices)}")
        return raw.lower()

    return parse


_SWITCH = {"on": True, "true": True, "yes": True, "1": True, "off": False, "false": False, "no": False, "0": False}


def _switch(raw: str) -> bool:
    if raw.lower() not in _SWITCH:
        raise ValueError("on or off (also true/false, yes/no, 1/0)")
    return _SWITCH[raw.lower()]


def _port(raw: str) -> int:
    if raw.lower() == AUTO:
        return AUTO_PORT
    if not raw.isdigit() or int(raw) > 65535:
        raise ValueError(f"a port number (0-65535; 0: no metrics) or {AUTO!r}")
    return int(raw)


def _address(raw: str) -> str:
    import ipaddress

    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:
        raise ValueError("an IP address (127.0.0.1: this machine only; 0.0.0.0: every interface)") from None


def _program(raw: str) -> str:
    if shutil.which(raw) is None:
        raise ValueError("a program on PATH or an executable file")
    return raw


def _directory(raw: str) -> Path:
    path = Path(raw).resolve()
    for p in (path, *path.parents):  # the directory, or the nearest part of it that exists, must be a directory
        if p.exists():
            if not p.is_dir():
                raise ValueError("a directory (it is a file)" if p == path else f"a directory ({p} is a file)")
            return path
    return path


# --- the settings --------------------------------------------------------------------------------------------
ADMIN_TIMEOUT = _setting(
    "RECONCILER_ADMIN_TIMEOUT", 15.0, "seconds an admin call to a cluster may take", _number(False, 0.001), "15"
)
LEASE_TTL = _setting(
    "RECONCILER_LEASE_TTL", 60.0, "seconds an apply lease lives without renewal", _number(False, 0.001), "60"
)
JOB_START_GRACE = _setting(
    "RECONCILER_JOB_START_GRACE",
    180.0,
    "seconds a new job may run before it must report status",
    _number(False, 0.001),
    "180",
)
MAX_REMOTE_TOPICS = _setting(
    "RECONCILER_MAX_REMOTE_TOPICS",
    10_000,
    "how many remote topics validate and plan accept before refusing",
    lambda raw: int(_number(True, 1)(raw)),
    "10000",
)
MAX_FLOWS = _setting(
    "RECONCILER_MAX_FLOWS",
    5_000,
    "how many flows a topology or an import may declare before it is refused",
    lambda raw: int(_number(True, 1)(raw)),
    "5000",
)
DEV_ENGINE = _setting(
    "RECONCILER_DEV_ENGINE", "tansu", "the embedded brokers' engine", _one_of("tansu", "noida"), "noida"
)
JOBS = _setting("RECONCILER_JOBS", True, "whether plans include replication jobs", _switch, "off")
LOG_FORMAT = _setting("RECONCILER_LOG_FORMAT", "text", "the format of log lines", _one_of("text", "json"), "json")
KUBECTL = _setting("RECONCILER_KUBECTL", "kubectl", "the kubectl the kubernetes deployer runs", _program, "kubectl")
STATE_DIR = _setting(
    "RECONCILER_STATE_DIR",
    Path(".reconciler"),
    "where local state is kept: dev brokers, local jobs, manifests",
    _directory,
    ".reconciler",
)
METRICS_PORT = _setting(PORT_ENV, 0, "the replication job's metrics port", _port, str(KUBERNETES_PORT))
METRICS_BIND = _setting(
    BIND_ENV, LOOPBACK, "the address the replication job's /metrics listens on", _address, ALL_INTERFACES
)
TEST_TXN_DELAY_MS = _setting(
    "RECONCILER_TEST_TXN_DELAY_MS",
    0.0,
    "tests only: milliseconds an exactly-once task waits before committing",
    _number(False, 0),
    "0",
)
#: The test suite sets it for the whole session (tests/conftest.py): every plan JSON document the reconciler makes,
#: in the test process and in every CLI it starts, is checked against the schema where it is made
#: (reconciler/plan/document.py); a document that does not follow the schema is an error, not an output.
TEST_PLAN_SCHEMA = _setting(
    "RECONCILER_TEST_PLAN_SCHEMA",
    False,
    "tests only: check every plan JSON document against schemas/plan.schema.json as it is made",
    _switch,
    "on",
)

JOB_INSTANCE: Setting[str | None] = _setting(
    INSTANCE_ENV, None, "a job instance's id, set by the deployer", str, "(unset: the deployer sets it)"
)
JOB_DIR: Setting[Path | None] = _setting(
    JOB_DIR_ENV, None, "a job's state directory, set by the deployer", _directory, "(unset: the deployer sets it)"
)
#: The keys of saved plans (docs/security.md, "Saved plans: signing and verification"). Any text is a key (its
#: length is checked where it is used, without ever printing it: a malformed-value line would show the secret).
PLAN_KEY_ENV = "RECONCILER_PLAN_KEY"
PLAN_KEY_PREVIOUS_ENV = "RECONCILER_PLAN_KEY_PREVIOUS"
PLAN_KEY: Setting[str | None] = _setting(
    PLAN_KEY_ENV, None, "the key that signs and verifies saved plans", str, "(from the CI's secret store)"
)
PLAN_KEY_PREVIOUS: Setting[str | None] = _setting(
    PLAN_KEY_PREVIOUS_ENV, None, "the former plan key, accepted to verify during a rotation", str, "(unset)"
)
#: A directory of credential files, one per variable (a mounted Kubernetes Secret volume): `${NAME}` resolves from
#: the file `$RECONCILER_SECRETS_DIR/NAME` before the environment, and a rewritten file is picked up by a running
#: engine (topology/secrets.py; docs/security.md, "Rotating credentials").
SECRETS_DIR_ENV = "RECONCILER_SECRETS_DIR"
SECRETS_DIR: Setting[Path | None] = _setting(
    SECRETS_DIR_ENV,
    None,
    "a directory of credential files, read before the environment",
    _directory,
    "/etc/reconciler/secrets",
)

#: The ReplicationEngine (`NAMESPACE/NAME`) an engine writes its verdict to (contract/engine_status.py), set on the
#: driver by the kubernetes deployer; and the API it is written through (unset: the pod's own, in-cluster).
STATUS_RESOURCE_ENV = "RECONCILER_STATUS_RESOURCE"
KUBE_API_ENV = "RECONCILER_KUBE_API"


def _namespaced_name(raw: str) -> str:
    namespace, _, name = raw.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError("NAMESPACE/NAME")
    return raw


def _url(raw: str) -> str:
    if not raw.startswith(("https://", "http://")):
        raise ValueError("an http(s) URL")
    return raw.rstrip("/")


STATUS_RESOURCE: Setting[str | None] = _setting(
    STATUS_RESOURCE_ENV,
    None,
    "the ReplicationEngine an engine writes its status to, set by the kubernetes deployer",
    _namespaced_name,
    "replication/mirror-engine-east",
)
KUBE_API: Setting[str | None] = _setting(
    KUBE_API_ENV, None, "the Kubernetes API an engine writes its status to", _url, "http://127.0.0.1:8001"
)


def admin_timeout(environ: Mapping[str, str] | None = None) -> float:
    return ADMIN_TIMEOUT(environ)


def lease_ttl(environ: Mapping[str, str] | None = None) -> float:
    return LEASE_TTL(environ)


def job_start_grace(environ: Mapping[str, str] | None = None) -> float:
    return JOB_START_GRACE(environ)


def max_remote_topics(environ: Mapping[str, str] | None = None) -> int:
    """How many remote topics a topology may make before validate and plan refuse (read on each call)."""
    return MAX_REMOTE_TOPICS(environ)


def max_flows(environ: Mapping[str, str] | None = None) -> int:
    """How many flows one topology may declare (each is planned, validated and run: a topology past this is
    refused when it is read, before the work grows with it; read on each call)."""
    return MAX_FLOWS(environ)


def dev_engine(environ: Mapping[str, str] | None = None) -> str:
    """The engine of the embedded brokers unless a command says otherwise (read on each call)."""
    return DEV_ENGINE(environ)


def jobs_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """False with RECONCILER_JOBS=off: plans leave replication jobs out (jobs run by other tooling)."""
    return JOBS(environ)


def log_format(environ: Mapping[str, str] | None = None) -> str:
    """`json` or `text`."""
    return LOG_FORMAT(environ)


def kubectl(environ: Mapping[str, str] | None = None) -> str:
    return KUBECTL(environ)


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the reconciler keeps local state (dev brokers, local jobs, manifests), absolute."""
    return STATE_DIR(environ).resolve()


def metrics_port(environ: Mapping[str, str] | None = None) -> int:
    """The job's metrics port (0: off; AUTO_PORT for `auto`)."""
    return METRICS_PORT(environ)


def metrics_bind(environ: Mapping[str, str] | None = None) -> str:
    """The address the job's /metrics listens on (127.0.0.1 unless the deployer says otherwise)."""
    return METRICS_BIND(environ)


def txn_delay_for_tests(environ: Mapping[str, str] | None = None) -> float:
    """Seconds an exactly-once task waits, records written, before committing (fault-injection tests only)."""
    return TEST_TXN_DELAY_MS(environ) / 1000.0


def plan_schema_check(environ: Mapping[str, str] | None = None) -> bool:
    """Whether each plan JSON document is checked against its schema as it is made (the test suite's setting)."""
    return TEST_PLAN_SCHEMA(environ)


def job_instance(environ: Mapping[str, str] | None = None) -> str | None:
    """The id of the job instance this process belongs to (None: not started by a deployer)."""
    return JOB_INSTANCE(environ)


def job_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The state directory of the job this process belongs to (None: not started by a deployer)."""
    return JOB_DIR(environ)


def secrets_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The directory of credential files `${NAME}` reads before the environment (None: the environment only)."""
    return SECRETS_DIR(environ)


def status_resource(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(namespace, name) of the ReplicationEngine this engine writes its status to (None: none)."""
    raw = STATUS_RESOURCE(environ)
    return None if raw is None else (raw.partition("/")[0], raw.partition("/")[2])


def kube_api(environ: Mapping[str, str] | None = None) -> str | None:
    """The Kubernetes API to write an engine's status through (None: the pod's own)."""
    return KUBE_API(environ)


def plan_keys(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The saved-plan keys that are set, by variable name: the current one first, then the previous one."""
    keys = {PLAN_KEY_ENV: PLAN_KEY(environ), PLAN_KEY_PREVIOUS_ENV: PLAN_KEY_PREVIOUS(environ)}
    return {name: key for name, key in keys.items() if key}


# --- generic readers (a value with no variable of its own in the table) -------------------------------------
def seconds(name: str, default: float, what: str, environ: Mapping[str, str] | None = None) -> float:
    """A duration in seconds (> 0) from `name`, else `default` (also for a malformed value)."""
    return Setting(name, default, what, _number(False, 0.001), f"{default:g}")(environ)


def count(name: str, default: int, what: str, environ: Mapping[str, str] | None = None) -> int:
    """A whole number >= 1 from `name`, else `default` (also for a malformed value)."""
    return Setting(name, default, what, lambda raw: int(_number(True, 1)(raw)), str(default))(environ)


def choice(
    name: str, default: str, choices: tuple[str, ...], what: str, environ: Mapping[str, str] | None = None
) -> str:
    """One of `choices` from `name`, else `default` (also for a value not among them)."""
    return Setting(name, default, what, _one_of(*choices), default)(environ)


def duration(text: str) -> float:
    """A duration given on the command line: `90`, `90s`, `5m`, `1h` (seconds, minutes, hours); >= 0.
    Raises ValueError with a message that says what is accepted."""
    raw = text.strip().lower()
    unit = {"s": 1, "m": 60, "h": 3600}.get(raw[-1:], None)
    number = raw[:-1] if unit else raw
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not a duration: use seconds or a number with s, m or h (e.g. 90s, 5m)")
    return value


# --- the check ------------------------------------------------------------------------------------------------
def errors(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every malformed setting of `environ` (default: the process environment), one line each."""
    found = (setting.problem(environ) for setting in TABLE.values())
    return [line for line in found if line is not None]


def check(environ: Mapping[str, str] | None = None, stream: TextIO | None = None) -> int:
    """Print `error: ...` for every malformed setting to `stream` (stderr); 1 if there was any, else 0."""
    bad = errors(environ)
    for line in bad:
        print(f"error: {line}", file=stream or sys.stderr)
    return 1 if bad else 0
