"""Interop with MirrorMaker 2: import MM2 properties files and Strimzi `KafkaMirrorMaker2` resources
into a topology, export a topology back to them. Pure: text in, text out (the CLI does the I/O).

properties.py   Java .properties syntax with line numbers
mm2_keys.py     the MM2 keys we map and MM2's defaults (derived from topology/settings_registry.py)
mm2_import.py   MM2 properties -> TopologyDraft
mm2_export.py   Topology -> MM2 properties
strimzi.py      KafkaMirrorMaker2 <-> MM2 properties (then the same mapping)
draft.py        the typed intermediate, its YAML, and validation with the project's own validator
"""
