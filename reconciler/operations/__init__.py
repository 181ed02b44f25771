"""Operations: what each command does, between the CLI (arguments, rendering) and the pure stages.

    backend   Backend: every dependency an operation has on the outside world (cluster admins,
              job deployers and status reader, heartbeat reader, mirror client factory, git, clock), passed in like
              Terraform's backend; tests pass an in-memory one instead of patching module globals
    observe   read the clusters, job statuses, heartbeats and applied records once -> Observation
    plan      desired state (once) + topic/ACL diff + job diff over an Observation -> Plan
    apply     lease, re-read, stale check, re-plan under the lease, execute, record
    handlers  the executor's handler table: every action kind's handler, named in one function
    drift     a view of the plan and the observation -> DriftReport
    status    every job of a topology: desired x deployed x reported -> StatusReport (typed JobRows)
    offsets   `offsets translate`, `failover`, `reachability` over the Backend's mirror client factory
    lock      force-unlock: find a live lease claim, confirm, withdraw it -> UnlockOutcome

Every command is one of these over the Backend the CLI hands it (`func(args, backend)`); git is read
once per command through `backend.git` and handed to the planners as data.

Data flows one way: topology -> observe -> plan -> (apply | drift) -> render (in the CLI).
"""
