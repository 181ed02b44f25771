"""Plans: the desired state (desired.py), the typed actions that take live clusters to it, and the findings on the way."""

# The job action kinds (plan/job_actions.py, built on plan/actions.py) register themselves in
# ACTION_TYPES when imported; importing them here, with the package, means every importer of
# plan.actions sees them without plan.actions importing its own extension (no cycle).
from reconciler.plan import job_actions as _job_actions  # noqa: F401
