"""Risk classes: what kind of change an action is, for policies (`plan --policy DIR`, reconciler/policy/) and
approvals. Declared here once; every action type names its class in `RISK` (plan/actions.py, plan/job_actions.py),
and the plan JSON carries it on each action as `risk` (docs/plan-json.md, schemas/plan.schema.json).

| class | actions |
|---|---|
| create | a topic or a flow's job comes into being (`create_topic`, `deploy_job`) |
| config | a topic config is set, a running job takes a new spec in place, an owner's claims are recorded (`set_config`, `update_job`, `record_ownership`) |
| grow | partitions are added (`add_partitions`) |
| acl | an ACL is created (`create_acl`) |
| delete | something is removed: every `-` action, what `prune:` allows (`delete_topic`, `delete_config`, `delete_acl`, `stop_job`) |
| restart | a job (or its whole engine) stops and starts again (`restart_job`) |
| cutover | a flow's engine is replaced by another one while replication goes on |
"""

from __future__ import annotations

import enum


class Risk(str, enum.Enum):
    CREATE = "create"
    CONFIG = "config"
    GROW = "grow"
    ACL = "acl"
    DELETE = "delete"
    RESTART = "restart"
    CUTOVER = "cutover"
