"""The executor's handler table: which function runs each kind of plan action, named here.

Nothing registers itself on import: the apply operation builds this table and hands it to
`reconciler.apply.executor.execute`. A new action kind gets its handler in this one function
(tests/unit/test_handler_table.py names any kind without one).
"""

from __future__ import annotations

from reconciler.apply import executor
from reconciler.apply.executor import Handler, TypedHandler
from reconciler.jobplan import handlers as jobs
from reconciler.plan.actions import (
    ActionKind,
    AddPartitions,
    CreateAcl,
    CreateTopic,
    DeleteAcl,
    DeleteConfig,
    DeleteTopic,
    RecordOwnership,
    SetConfig,
)
from reconciler.plan.engine_actions import ReplaceEngine


def handler_table() -> dict[ActionKind, Handler]:
    """Every action kind's handler: topics, configs and ACLs through the cluster admins, jobs through the deployers."""
    return {
        ActionKind.CREATE_TOPIC: TypedHandler(CreateTopic, executor.create_topics),
        ActionKind.SET_CONFIG: TypedHandler(SetConfig, executor.set_configs),
        ActionKind.ADD_PARTITIONS: TypedHandler(AddPartitions, executor.add_partitions),
        ActionKind.CREATE_ACL: TypedHandler(CreateAcl, executor.create_acls),
        ActionKind.DELETE_ACL: TypedHandler(DeleteAcl, executor.delete_acls),
        ActionKind.DELETE_CONFIG: TypedHandler(DeleteConfig, executor.delete_configs),
        ActionKind.DELETE_TOPIC: TypedHandler(DeleteTopic, executor.delete_topics),
        ActionKind.RECORD_OWNERSHIP: TypedHandler(RecordOwnership, executor.record_ownership),
        ActionKind.DEPLOY_JOB: jobs.deploy_jobs,
        ActionKind.UPDATE_JOB: jobs.update_jobs,
        ActionKind.RESTART_JOB: jobs.restart_jobs,
        ActionKind.STOP_JOB: jobs.stop_jobs,
        ActionKind.REPLACE_ENGINE: TypedHandler(ReplaceEngine, jobs.replace_engines),
    }
