# A config change never shortens retention: consumers that rely on the longer retention would lose records.
# Written as an OPA 0.x policy (`deny[msg] { ... }`, `input.actions[_]`), as many existing conftest policies are:
# it runs unchanged.
package reconciler

deny[msg] {
	a := input.actions[_]
	a.kind == "set_config"
	a.key == "retention.ms"
	a.current != null
	to_number(a.value) >= 0
	to_number(a.current) > to_number(a.value)
	msg := sprintf("%s on %s: retention.ms %s -> %s would shorten retention", [a.topic, a.cluster, a.current, a.value])
}

deny[msg] {
	a := input.actions[_]
	a.kind == "set_config"
	a.key == "retention.ms"
	a.current == "-1"
	a.value != "-1"
	msg := sprintf("%s on %s: retention.ms -1 (forever) -> %s would shorten retention", [a.topic, a.cluster, a.value])
}
