# Adding partitions in production changes which partition a key lands on: it needs a recorded approval.
# `require_approval` names risk classes (create, config, grow, acl, delete, restart, cutover); every action of the
# plan in a named class then needs the approval.
package reconciler

import rego.v1

require_approval contains "grow" if {
	some a in input.actions
	a.risk == "grow"
	data.topology.clusters[a.cluster].tags.env == "production"
}
