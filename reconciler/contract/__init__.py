"""Contracts between the reconciler and the replication job: the one home of every name and record
both sides must agree on, below both planning (`plan/`, `jobs/`, `deployers/`) and the job runtime
(`engine/`). Nothing here imports either side, Spark, or the CLI. The flow id both sides name a flow
by is the topology's (`topology/flow_id.py`).

    spec       JobSpec: what a job runs, its hash, and the "needs a restart" rule (HOT_RELOADABLE)
    status     the status record a job publishes and the reconciler reads (STATUS_TOPIC)
    deployers  deployer names and their deployment options
"""
