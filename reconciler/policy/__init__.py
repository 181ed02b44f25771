"""Policy as code (`plan --policy PATH`, `apply --policy PATH`, docs/policy.md): rules an organisation puts on
every plan, in Rego (policy/rego.py, conftest style) or as built-in YAML rules (policy/rules.py), read and applied
by policy/engine.py. What they find, and the approval a plan records, is plan/policy_record.py."""
