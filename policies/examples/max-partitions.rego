# No topic with more than 48 partitions, created or grown: more needs a capacity review first.
package reconciler

import rego.v1

max_partitions := 48

partitions(a) := a.partitions if a.kind == "create_topic"

partitions(a) := a.total if a.kind == "add_partitions"

deny contains msg if {
	some a in input.actions
	partitions(a) > max_partitions
	msg := sprintf("topic %s on %s would have %d partitions, more than %d", [a.topic, a.cluster, partitions(a), max_partitions])
}
