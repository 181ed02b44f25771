"""The HTML drift report renders in a real browser: headless Chromium takes a screenshot and dumps the DOM.

Skipped (with the reason) only when no Chromium binary exists; scripts/test.sh installs Debian's
`chromium` when it can. `RECONCILER_CHROMIUM` names a binary explicitly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.render import drift_html
from reconciler.state.live import AclBinding
from reconciler.state.live import AclOperation as Op
from reconciler.state.live import AclPermission as Perm
from tests.plan_helpers import World, topology
from tests.unit.test_drift_report import FLOWS, SLO, healthy, report_of

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def chromium_binary() -> str | None:
    explicit = os.environ.get("RECONCILER_CHROMIUM")
    if explicit:
        return explicit if shutil.which(explicit) else None
    return next((shutil.which(c) for c in CANDIDATES if shutil.which(c)), None)


def run_chromium(binary: str, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    profile.mkdir()
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = chromium_binary()
    if binary is None:
        pytest.skip(
            "no Chromium binary (chromium, chromium-browser, google-chrome) on PATH: "
            "install Debian's `chromium` (scripts/test.sh does when it can) to check the HTML report renders"
        )
    return binary


def test_html_report_renders_in_headless_chromium(chromium, tmp_path):
    w = World(
        topology(
            FLOWS.replace("flows:\n", "flows:\n  - {source: west, target: north, enabled: false}\n"),
            {"west": "127.0.0.1:1", "east": "127.0.0.1:2", "north": "127.0.0.1:3"},
            extra=SLO,
        )
    )
    w["west"].add_topic("orders", 3)
    w["west"].add_topic("payments", 2)
    w["east"].add_topic("audit", 1)
    w["west"].acls.add(AclBinding("orders", "User:alice", "*", Op.READ, Perm.ALLOW))
    w.apply(w.plan())
    del w["east"].topics["west.payments"]
    w["east"].add_topic("west.legacy", 1)
    topo = w.topology
    report = report_of(w, statuses={"west->east": healthy(topo, "west->east", lag_total=4_321)})
    page = tmp_path / "drift.html"
    page.write_text(drift_html.render(report, topo), encoding="utf-8")

    shot = tmp_path / "drift.png"
    done = run_chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, "a blank page compresses to a few kB"
    assert int.from_bytes(data[16:20], "big") == 1400  # IHDR width

    dom = run_chromium(chromium, tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    for text in (
        "DRIFT",
        "Drift report: test",
        "Topology",
        "Replication lag per flow",
        "west.payments",
        "west.legacy",
        "job of flow east-&gt;west is not running",
        "4,321",
        "Flows and jobs",
    ):
        assert text in html, text
    assert html.count('class="cluster cluster-') == 3 and 'class="flow flow-drift"' in html
    assert 'class="flow flow-disabled"' in html and 'class="bar bar-over"' in html
