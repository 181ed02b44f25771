"""Write the files derived from the code: from the flow settings registry (reconciler/topology/settings_registry.py)
the flow part of schemas/topology.schema.json and the settings reference (docs/reference/settings.md); the
MirrorMaker 2 key table of docs/interop.md (reconciler/interop/mm2_keys.py, derived from the registry); from the
command line and reconciler/settings.py the CLI and environment references (docs/reference/). Run it after
changing any of them:

    .venv/bin/python scripts/generate_settings.py

tests/unit/test_settings_registry.py, test_interop_meaning.py and tests/unit/test_docs.py fail while a file is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, whichever one the virtualenv installed

from reconciler.cli.reference import pages  # noqa: E402
from reconciler.interop import keys_doc  # noqa: E402
from reconciler.topology.settings_docs import write_all  # noqa: E402


def main() -> int:
    written = write_all(ROOT) + keys_doc.write(ROOT)
    for name, text in pages().items():
        path = ROOT / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(name)
    for name in written:
        print(f"wrote {name}", file=sys.stderr)
    if not written:
        print("every generated file is up to date", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
