# Data residency: topics whose name ends in `.pii` are created only on clusters of region eu (the cluster's
# `region` tag). A plan that would copy one elsewhere is refused.
package reconciler

import rego.v1

deny contains msg if {
	some a in input.actions
	a.kind == "create_topic"
	regex.match(`.*\.pii`, a.topic)
	region := object.get(data.topology.clusters[a.cluster].tags, "region", "none")
	region != "eu"
	msg := sprintf("topic %s on %s (region %s): personal data stays in the EU", [a.topic, a.cluster, region])
}
