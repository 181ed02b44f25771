"""Write the files derived from the flow settings registry (reconciler/topology/settings_registry.py): the flow
part of schemas/topology.schema.json and the settings table of README.md. Run it after changing the registry:

    .venv/bin/python scripts/generate_settings.py

tests/unit/test_settings_registry.py fails while either file is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, whichever one the virtualenv installed

from reconciler.topology.settings_docs import write_all  # noqa: E402


def main() -> int:
    written = write_all(ROOT)
    for name in written:
        print(f"wrote {name}", file=sys.stderr)
    if not written:
        print("schemas/topology.schema.json and README.md are up to date", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
