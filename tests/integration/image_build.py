"""The job image built on this machine with buildah (issue 33): no image registry is reachable here and podman cannot
start containers, so the base is made from Debian's packages (debootstrap of bookworm, whose python3 is the image's
3.11) and the project's Dockerfile is built FROM it (`--build-arg BASE_IMAGE`) with chroot isolation. Both images
are kept in a buildah store of their own under ~/.cache/reconciler/image/ (`rm -r` it to start over), tagged by a
hash of what they are made of: the base by its suite, mirror and packages, the job image by the base, the
Dockerfile and every file it copies. pip in the build reaches PyPI with the host's CA bundle (the Dockerfile's
`ca-bundle` secret); buildah passes the host's proxy variables on by itself.

`Unavailable` says why the image cannot be built here (no buildah or debootstrap, not root, Debian unreachable)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# python3-venv: the Dockerfile makes its virtual environment with it (python's official image has it built in).
BASE_PACKAGES = ("ca-certificates", "python3", "python3-venv")
BASE_NAME = "localhost/reconciler-base"
JOB_NAME = "localhost/reconciler-job"
IGNORED = ("__pycache__", ".pyc")  # .dockerignore's patterns: not in the image, not in its hash
CA_CANDIDATES = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
DEBIAN_CA = "/etc/ssl/certs/ca-certificates.crt"


class Unavailable(Exception):
    """The image cannot be built on this machine; the message says why and what would make it possible."""


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "reconciler" / "image"


def ca_bundle() -> Path | None:
    """The host's CA bundle, which pip in the build needs behind a TLS-intercepting proxy: pip's or the TLS
    variables' file, else Debian's bundle; None when the host has none."""
    for var in CA_CANDIDATES:
        if (value := os.environ.get(var)) and Path(value).is_file():
            return Path(value)
    return Path(DEBIAN_CA) if Path(DEBIAN_CA).is_file() else None


def copied_sources(dockerfile: str) -> list[str]:
    """The build-context paths the Dockerfile's COPY lines name (not `COPY --from`)."""
    out: list[str] = []
    for line in re.findall(r"^COPY (?!--from)(.+)$", dockerfile, re.M):
        out += [w for w in line.split()[:-1] if not w.startswith("--")]
    return out


def _files(paths: Iterable[Path]) -> Iterable[Path]:
    for p in paths:
        if p.is_dir():
            yield from _files(sorted(p.iterdir()))
        elif not any(part == IGNORED[0] for part in p.parts) and not p.name.endswith(IGNORED[1]):
            yield p


def job_image_key(base: str, root: Path = ROOT) -> str:
    """The job image's tag: a hash of its base, the Dockerfile and every file the Dockerfile copies (path, mode,
    bytes)."""
    text = (root / "Dockerfile").read_text()
    h = hashlib.sha256(f"{base}\n{text}".encode())
    for f in _files(root / s for s in copied_sources(text)):
        h.update(f"\0{f.relative_to(root)}\0{f.stat().st_mode & 0o111}\0".encode() + f.read_bytes())
    return h.hexdigest()[:16]


def base_image_key() -> str:
    made_of = {"suite": SUITE, "mirror": MIRROR, "packages": BASE_PACKAGES, "variant": "minbase", "v": 1}
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:16]


class Progress:
    """Runs a long command with its output in a log file, saying on `say` what step it is at, and at least every
    `beat` seconds that it is alive; a failure raises with the log's tail."""

    def __init__(self, say: Callable[[str], None], beat: float = 30.0):
        self.say, self.beat = say, beat

    def run(self, cmd: list[str], log: Path, *, steps: str, what: str, timeout: float) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        tail: deque[str] = deque(maxlen=40)
        start = time.monotonic()
        self.say(f"{what} (log: {log})")
        with log.open("w") as out:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
            done = threading.Event()

            def heartbeat() -> None:
                while not done.wait(self.beat):
                    last = tail[-1].strip()[:100] if tail else ""
                    self.say(f"  ... {what}: {time.monotonic() - start:.0f} s ({last})")

            threading.Thread(target=heartbeat, daemon=True).start()
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    out.write(line)
                    tail.append(line)
                    if re.match(steps, line):
                        self.say(f"  {line.strip()[:140]}")
                    if time.monotonic() - start > timeout:
                        proc.kill()
                        raise RuntimeError(f"{what}: no end after {timeout:.0f} s; {log}")
                rc = proc.wait()
            finally:
                done.set()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if rc != 0:
            raise RuntimeError(f"{what} failed (exit {rc}); the end of {log}:\n" + "".join(tail))
        self.say(f"{what}: done in {time.monotonic() - start:.0f} s")


@dataclass(frozen=True)
class Buildah:
    """buildah on a store of its own (`home`/storage), so the test's images neither meet nor disturb others'."""

    home: Path

    def cmd(self, *args: str) -> list[str]:
        return ["buildah", "--root", str(self.home / "storage"), "--runroot", str(self.home / "run"), *args]

    def run(self, *args: str, timeout: float = 120) -> str:
        r = subprocess.run(self.cmd(*args), capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"buildah {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
        return r.stdout.strip()

    def has_image(self, name: str) -> bool:
        r = subprocess.run(self.cmd("inspect", "--type", "image", name), capture_output=True, timeout=60)
        return r.returncode == 0

    def images(self, repository: str) -> list[str]:
        out = self.run("images", "--format", "{{.Name}}:{{.Tag}}")
        return [n for n in out.splitlines() if n.startswith(repository + ":")]


def check_available() -> None:
    """Raises Unavailable saying why buildah cannot build the image here."""
    missing = [t for t in ("buildah", "debootstrap") if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
    if missing:
        raise Unavailable(f"{' and '.join(missing)} not installed (apt-get install buildah debootstrap)")
    if os.geteuid() != 0:
        raise Unavailable("building the image with debootstrap and buildah's chroot isolation needs root")


def _debian_reachable() -> None:
    try:
        with urllib.request.urlopen(f"{MIRROR}/dists/{SUITE}/Release", timeout=20) as r:
            r.read(64)
    except OSError as exc:
        raise Unavailable(f"Debian's mirror {MIRROR} is not reachable ({exc}): the base image cannot be made") from exc


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve()) + "/"
    with open("/proc/mounts") as f:
        points = [line.split()[1].replace("\\040", " ") for line in f]
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


def _remove_rootfs(path: Path) -> None:
    """A debootstrap tree, after unmounting what an interrupted debootstrap left mounted in it (its /proc, /sys):
    never removing through a mount."""
    if not path.exists():
        return
    for point in _mounts_under(path):
        subprocess.run(["umount", "-l", point], check=False)
    if _mounts_under(path):
        raise RuntimeError(f"{path} still has mounts in it: not removed")
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=True)


def base_image(b: Buildah, progress: Progress) -> str:
    """Debian bookworm with python3 (and venv) from Debian's packages, as a local image; made once per key."""
    name = f"{BASE_NAME}:{base_image_key()}"
    if b.has_image(name):
        progress.say(f"base image {name}: cached")
        return name
    _debian_reachable()
    rootfs = b.home / "rootfs"
    _remove_rootfs(rootfs)
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    try:
        progress.run(
            [debootstrap, "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE, str(rootfs), MIRROR],
            b.home / "logs" / "debootstrap.log",
            steps=r"I: (Retrieving Release|Validating Packages|Installing core|Unpacking the base|Configuring the base|Base system installed)",
            what=f"debootstrap {SUITE} ({', '.join(BASE_PACKAGES)})",
            timeout=900,
        )
        for d in ("var/cache/apt/archives", "var/lib/apt/lists"):  # what apt fetched, as Debian's images do
            for f in (rootfs / d).glob("*"):
                if f.is_file():
                    f.unlink()
        try:
            ctr = b.run("from", "scratch")
        except RuntimeError as exc:
            raise Unavailable(f"buildah cannot make a container here: {exc}") from exc
        try:
            mnt = b.run("mount", ctr)
            subprocess.run(["cp", "-a", f"{rootfs}/.", mnt], check=True, timeout=600)
            b.run("umount", ctr)
            b.run(
                "config",
                "--env",
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "--cmd",
                "/bin/bash",
                "--label",
                f"reconciler.base={base_image_key()}",
                ctr,
            )
            b.run("commit", "--rm", ctr, name, timeout=600)
        except BaseException:
            subprocess.run(b.cmd("rm", ctr), capture_output=True)
            raise
    finally:
        _remove_rootfs(rootfs)
    progress.say(f"base image {name}: made")
    return name


def job_image(b: Buildah, progress: Progress, base: str, root: Path = ROOT) -> str:
    """The project's Dockerfile built FROM `base`; once per key. Earlier job images of this store are removed."""
    name = f"{JOB_NAME}:{job_image_key(base, root)}"
    if b.has_image(name):
        progress.say(f"job image {name}: cached")
        return name
    ca = ca_bundle()
    secret = ["--secret", f"id=ca-bundle,src={ca}"] if ca else []
    progress.run(
        b.cmd(
            "bud",
            "--isolation",
            "chroot",
            "--layers",
            "--build-arg",
            f"BASE_IMAGE={base}",
            *secret,
            "-f",
            str(root / "Dockerfile"),
            "-t",
            name,
            str(root),
        ),
        b.home / "logs" / "build.log",
        steps=r"STEP \d+/\d+",
        what=f"building the job image {name}" + (f" (CA bundle {ca})" if ca else ""),
        timeout=1500,
    )
    drop_others(b, name)
    return name


def drop_others(b: Buildah, name: str) -> None:
    """Earlier job images of the store, and the layers only they used, are removed (the store stays bounded)."""
    if old := [n for n in b.images(JOB_NAME) if n != name]:
        subprocess.run(b.cmd("rmi", *old), capture_output=True, timeout=600)
        subprocess.run(b.cmd("rmi", "--prune"), capture_output=True, timeout=600)


def probe(b: Buildah, image: str) -> None:
    """Raises Unavailable when buildah cannot run a container of `image` here (chroot isolation, host network)."""
    ctr = b.run("from", "--pull=false", image)
    try:
        b.run("run", "--isolation", "chroot", "--network", "host", ctr, "--", "true")
    except RuntimeError as exc:
        raise Unavailable(f"buildah cannot run a container here: {exc}") from exc
    finally:
        subprocess.run(b.cmd("rm", ctr), capture_output=True, timeout=120)


def build(say: Callable[[str], None]) -> tuple[Buildah, str]:
    """The job image (building what the cache lacks): the store and the image's name."""
    check_available()
    b = Buildah(cache_dir())
    progress = Progress(say)
    base = base_image(b, progress)
    probe(b, base)  # before the long build: a machine where no container runs skips here
    return b, job_image(b, progress, base)
