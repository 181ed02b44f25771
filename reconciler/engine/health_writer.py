"""The piece that writes an engine's verdict where Argo CD and Flux read it: its ReplicationEngine's status.

On Kubernetes the deployer renders a ReplicationEngine per engine and hands the driver its name
(RECONCILER_STATUS_RESOURCE, `NAMESPACE/NAME`). Every few seconds (`ROUND_SECONDS`) the driver reads the resource (its
spec: the flows wanted, their spec hashes, the SLOs, the generation), judges its flows with what it knows of them (each
flow's last status record and its driver thread: `observe`) by drift's judgement (`reconciler.drift.engines.
engine_status`, pure, handed over by the job's entry point), and writes the status when it differs from the one it wrote last (a JSON merge patch of the status
subresource). When the driver is asked to stop (SIGTERM: the pod deleted, the application resubmitted) it writes the
engine as stopping at once.

The API is the pod's own (https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the service account's token and
CA, both read at each call: a projected token is rotated), or RECONCILER_KUBE_API (e.g. `kubectl proxy`'s, or a
test's). A call that fails is logged (once per distinct error) and tried again next round: the engine copies on
whatever the API says.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reconciler import settings
from reconciler.contract import engine_status
from reconciler.contract.deployers import KUBERNETES
from reconciler.contract.engine import FlowState
from reconciler.contract.engine_status import Seen, Wanted
from reconciler.contract.jobstate import Deployment

log = logging.getLogger(__name__)
#: The judgement: (wanted, seen, now_ms, stopping=, previous=, instance=) -> the status (`reconciler.drift.engines.
#: engine_status`, which the job's entry point hands over: the engine does not import drift).
Judge = Callable[..., dict[str, Any]]

ROUND_SECONDS = 5.0
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeApi:
    """The two calls the engine makes to the Kubernetes API: read its ReplicationEngine, merge-patch its status."""

    def __init__(self, base: str, token_file: Path | None = None, ca_file: Path | None = None, timeout: float = 10.0):
        self.base, self.token_file, self.timeout = base.rstrip("/"), token_file, timeout
        self.context = ssl.create_default_context(cafile=str(ca_file)) if ca_file and base.startswith("https") else None

    @classmethod
    def of(cls, environ: Mapping[str, str] | None = None) -> KubeApi | None:
        """RECONCILER_KUBE_API, else the pod's own API (None outside a pod)."""
        env = os.environ if environ is None else environ
        base = settings.kube_api(environ)
        if base is not None:  # the service account's token only over TLS (never to a plain http:// address)
            token, ca = SERVICE_ACCOUNT / "token", SERVICE_ACCOUNT / "ca.crt"
            tls = base.startswith("https://")
            return cls(base, token if tls and token.is_file() else None, ca if tls and ca.is_file() else None)
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            return None
        host = f"[{host}]" if ":" in host else host
        return cls(f"https://{host}:{port}", SERVICE_ACCOUNT / "token", SERVICE_ACCOUNT / "ca.crt")

    def path(self, namespace: str, name: str, status: bool = False) -> str:
        tail = "/status" if status else ""
        return f"/apis/{engine_status.API_VERSION}/namespaces/{namespace}/{engine_status.PLURAL}/{name}{tail}"

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if self.token_file is not None:
            headers["Authorization"] = f"Bearer {self.token_file.read_text().strip()}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/merge-patch+json"
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:
            return json.loads(resp.read() or b"{}")

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call("GET", self.path(namespace, name))

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        return self._call("PATCH", self.path(namespace, name, status=True), {"status": dict(status)})


def observe(host: Any, engine: str, now: float | None = None) -> dict[str, Seen]:
    """What the engine knows of each flow it runs (`reconciler.engine.host.EngineHost`): its driver's last status
    record and the driver thread as a `Deployment`. A flow restarting in place counts as started now (it is on its
    way, not down) unless the engine itself stops; one superseded by a newer instance elsewhere is stopped on
    purpose."""
    now = time.time() if now is None else now
    out: dict[str, Seen] = {}
    for slot in list(host.slots.values()):
        if not slot.flow:
            continue
        driver = slot.driver
        reporter = getattr(driver, "reporter", None)
        record = getattr(reporter, "last_record", None)
        spec = getattr(driver, "spec", None)
        restarting = slot.state is FlowState.STOPPING and slot.running() and not host.stop_event.is_set()
        detail = {
            FlowState.BACKOFF: f"its driver ended (exit code {slot.last_exit}); it starts again after a back-off",
            FlowState.SUPERSEDED: "a newer instance of it runs elsewhere: stopped here until its spec changes",
            FlowState.STOPPING: "restarting in place",
        }.get(slot.state, f"engine {engine}")
        out[slot.flow] = Seen(
            None if restarting else record,
            Deployment(
                slot.flow,
                KUBERNETES,
                f"engine {engine}",
                spec,
                slot.running(),
                now if restarting else (slot.since or None),
                stopped=slot.state is FlowState.SUPERSEDED,
                exit_code=slot.last_exit,
                detail=detail,
                instance_id=settings.job_instance(),
            ),
        )
    return out


class StatusWriter:
    """Judges the engine every `interval` seconds and writes its ReplicationEngine's status when it changes."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        name: str,
        observe: Callable[[], Mapping[str, Seen]],
        judge: Judge,
        *,
        instance: str | None = None,
        interval: float = ROUND_SECONDS,
        clock: Callable[[], float] = time.time,
        started: threading.Event | None = None,
    ):
        self.api, self.namespace, self.name, self.observe, self.judge = api, namespace, name, observe, judge
        self.instance, self.interval, self.clock = instance, interval, clock
        self.started = started  # set once the engine has started its flows (the first round waits for it)
        self.written: dict[str, Any] | None = None  # the status this engine wrote last
        self.writes = 0
        self._said: str | None = None  # the last error logged
        self._thread: threading.Thread | None = None

    def round(self, stopping: bool = False) -> dict[str, Any] | None:
        """One judgement: read the resource, judge, write the status if it changed. The status (None: not written)."""
        try:
            obj = self.api.get(self.namespace, self.name)
            held = obj.get("status")
            status = self.judge(
                Wanted.of(obj),
                self.observe(),
                int(self.clock() * 1000),
                stopping=stopping,
                previous=held,
                instance=self.instance,
            )
            if status == held:  # nothing changed: nothing written (no update for Argo CD or Flux to process)
                return None
            self.api.patch_status(self.namespace, self.name, status)
        except (OSError, ValueError, urllib.error.URLError) as exc:
            said = _why(exc)
            if said != self._said:
                log.warning("cannot write the status of ReplicationEngine %s/%s: %s", self.namespace, self.name, said)
                self._said = said
            return None
        if self._said is not None:
            log.info("the status of ReplicationEngine %s/%s is written again", self.namespace, self.name)
            self._said = None
        self.written, self.writes = status, self.writes + 1
        return status

    def run(self, stop: threading.Event) -> None:
        """Rounds until `stop` is set (the first once the engine has started its flows); then the engine is written as
        stopping."""
        while self.started is not None and not self.started.wait(0.2):
            if stop.is_set():
                break
        self.round(stopping=stop.is_set())
        while not stop.wait(self.interval):
            self.round()
        self.round(stopping=True)

    def start(self, stop: threading.Event) -> None:
        self._thread = threading.Thread(target=self.run, args=(stop,), name="engine status", daemon=True)
        self._thread.start()

    def join(self, timeout: float = 10.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)


def _why(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        hint = {
            403: " (the driver's service account may not: the engine's Role and RoleBinding are in its manifest)",
            404: " (not there yet: the manifest is not synced, or the ReplicationEngine CRD is not installed)",
        }.get(exc.code, "")
        return f"HTTP {exc.code} {exc.reason}{hint}"
    return f"{type(exc).__name__}: {exc}"


def status_writer(
    host: Any, engine: str, judge: Judge, environ: Mapping[str, str] | None = None
) -> StatusWriter | None:
    """The engine's status writer when it has a ReplicationEngine to write to (RECONCILER_STATUS_RESOURCE) and an API
    to write through; None otherwise (the local and standalone deployers)."""
    where = settings.status_resource(environ)
    if where is None:
        return None
    api = KubeApi.of(environ)
    if api is None:
        log.warning("RECONCILER_STATUS_RESOURCE is set but there is no Kubernetes API here: no status is written")
        return None
    namespace, name = where
    return StatusWriter(
        api,
        namespace,
        name,
        lambda: observe(host, engine),
        judge,
        instance=settings.job_instance(environ),
        started=host.reconciled,
    )
