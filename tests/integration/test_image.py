"""The job image built and run on this machine (issue 33): the project's Dockerfile built with buildah on a base made
from Debian's packages (tests/integration/image_build.py; cached under ~/.cache/reconciler/image/), then an engine
run in it the way the Spark operator's driver pod runs it: the image's entry point (`/opt/entrypoint.sh driver`),
uid 185, the image's working directory, the SparkApplication's main file, arguments, Spark settings and driver
environment, and the files of its ConfigMap as rendered mounted read-only at the engine mount. It copies every
record between two embedded Tansu brokers (host network) exactly as they are on the source. Skips, saying why,
where buildah or debootstrap is missing or cannot work (not root, Debian unreachable)."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from reconciler import logs
from reconciler.deployers.kubernetes import ENGINE_MOUNT, render
from tests.integration import image_build
from tests.integration.mirror_helpers import count_topic, create_topic, read_topic, spec_for, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RECORDS = 20_000
PARTITIONS = 4
BOUND_S = 400.0  # the engine's own end (--max-seconds), should the test not stop it


@pytest.fixture(scope="module")
def job_image(pytestconfig) -> tuple[image_build.Buildah, str]:
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:  # the build takes minutes: shown as it goes, not captured
        with capture.global_and_fixture_disabled():
            print(f"[image] {line}", flush=True)

    try:
        return image_build.build(say)
    except image_build.Unavailable as exc:
        pytest.skip(f"the job image cannot be built here: {exc}")


@pytest.fixture
def container(job_image) -> Iterator[tuple[image_build.Buildah, str]]:
    b, image = job_image
    ctr = b.run("from", "--pull=false", "--name", f"reconciler-test-{uuid.uuid4().hex[:8]}", image)
    try:
        yield b, ctr
    finally:
        subprocess.run(b.cmd("rm", ctr), capture_output=True, timeout=120)


def _in_container(b: image_build.Buildah, ctr: str, *args: str) -> list[str]:
    """`buildah run` as the image's user, on the host's network (the brokers are on its loopback)."""
    return b.cmd("run", "--isolation", "chroot", "--network", "host", "--user", "185:185", *args, ctr, "--")


def test_the_images_working_directory_is_writable_by_its_user(container):
    b, ctr = container
    r = subprocess.run(
        [*_in_container(b, ctr), "sh", "-c", "id -u; pwd; touch probe && ls /opt/reconciler/jobs/mirror_job.py"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["185", "/opt/spark/work-dir", "/opt/reconciler/jobs/mirror_job.py"]


def _produce(bootstrap: str, topic: str) -> None:
    p = Producer(logs.client_config({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True}))
    for i in range(RECORDS):
        p.produce(topic, f"value-{i}-".encode() * (1 + i % 5), f"key-{i}".encode(), i % PARTITIONS)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0, "every record produced"


def _driver_command(app: dict, pod_uid: str) -> tuple[list[str], list[str]]:
    """What the operator's driver pod runs for this SparkApplication (local master here): the environment (the
    driver pod template's container `env`, fieldRefs as the pod's) and `/opt/entrypoint.sh driver` with the
    application's settings."""
    spec = app["spec"]
    [container] = spec["driver"]["template"]["spec"]["containers"]
    env = [f"{e['name']}={e['value'] if 'value' in e else pod_uid}" for e in container["env"]]
    conf = {**spec["sparkConf"], "spark.ui.enabled": "false"}
    cmd = ["/opt/entrypoint.sh", "driver", "--master", "local[2]"]
    for k, v in sorted(conf.items()):
        cmd += ["--conf", f"{k}={v}"]
    cmd += [spec["mainApplicationFile"], *spec["arguments"], "--max-seconds", str(BOUND_S)]
    return env, cmd


@pytest.mark.spark
def test_an_engine_in_the_image_copies_every_record_from_the_rendered_configmap(container, fresh_clusters, tmp_path):
    b, ctr = container
    west, east = fresh_clusters
    create_topic(west.bootstrap, "orders", PARTITIONS)
    _produce(west.bootstrap, "orders")
    spec = spec_for(west, east, topics_include=("orders",))
    config_map, app, *_ = render(spec, {"image": "reconciler-job:test", "metrics_port": 0})
    engine = tmp_path / "engine"  # the ConfigMap's volume: one file per key, read-only
    engine.mkdir(mode=0o755)
    for key, text in config_map["data"].items():
        (engine / key).write_text(text)
        (engine / key).chmod(0o644)
    env, cmd = _driver_command(app, str(uuid.uuid4()))
    run = _in_container(
        b,
        ctr,
        "--volume",
        f"{engine}:{ENGINE_MOUNT}:ro",
        *(a for e in env for a in ("--env", e)),
        "--env",
        "SPARK_DRIVER_BIND_ADDRESS=127.0.0.1",
        # a container's hostname resolves in a pod, not here
        "--env",
        "SPARK_LOCAL_HOSTNAME=localhost",
    )
    log = tmp_path / "driver.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*run, *cmd], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:

        def arrived() -> bool:
            assert proc.poll() is None, f"the engine ended (exit {proc.returncode}):\n{log.read_text()[-4000:]}"
            return count_topic(east.bootstrap, "west.orders", PARTITIONS) >= RECORDS

        wait_for(arrived, 300, interval=2, what=f"{RECORDS} records copied by the engine in the image")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    source = read_topic(west.bootstrap, "orders", PARTITIONS)
    target = read_topic(east.bootstrap, "west.orders", PARTITIONS)
    assert sum(map(len, target.values())) == RECORDS
    for p in range(PARTITIONS):
        assert [(r.key, r.value) for r in target[p]] == [(r.key, r.value) for r in source[p]], f"partition {p}"
