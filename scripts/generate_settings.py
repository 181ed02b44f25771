"""Write the files derived from the flow settings registry (reconciler/topology/settings_registry.py): the flow
part of schemas/topology.schema.json and the settings table of README.md; and the MirrorMaker 2 key table of
docs/interop.md (from reconciler/interop/mm2_keys.py, derived from the registry). Run it after changing the registry:

    .venv/bin/python scripts/generate_settings.py

tests/unit/test_settings_registry.py fails while either file is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, whichever one the virtualenv installed

from reconciler.interop import keys_doc  # noqa: E402
from reconciler.topology.settings_docs import write_all  # noqa: E402


def main() -> int:
    written = write_all(ROOT) + keys_doc.write(ROOT)
    for name in written:
        print(f"wrote {name}", file=sys.stderr)
    if not written:
        print("schemas/topology.schema.json, README.md and docs/interop.md are up to date", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
