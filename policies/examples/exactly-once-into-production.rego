# Flows into production deliver exactly once (KIP-656): a consumer there never sees a record twice after a
# failover or a restart. Judged on the resolved topology (data.topology), not on the plan's actions: it holds
# whatever the plan changes.
package reconciler

import rego.v1

deny contains msg if {
	some flow in data.topology.flows
	flow.enabled
	data.topology.clusters[flow.target].tags.env == "production"
	flow.settings.delivery != "exactly-once"
	msg := {
		"msg": sprintf("delivers %s into production; set delivery: exactly-once", [flow.settings.delivery]),
		"object": sprintf("flow %s", [flow.name]),
		"cluster": flow.target,
	}
}
