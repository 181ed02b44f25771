# No ACL for everybody: a plan never grants an ALLOW to the wildcard principal `User:*` (ACL sync copies the
# source topic's READ ACLs to its remote topic, a wildcard one included). Grant named principals on the source,
# or turn ACL sync off for the flow.
package reconciler

import rego.v1

deny contains msg if {
	some a in input.actions
	a.kind == "create_acl"
	a.acl.principal == "User:*"
	a.acl.permission == "ALLOW"
	msg := sprintf("%s on %s would let every principal %s topic %s", [a.description, a.cluster, a.acl.operation, a.acl.topic])
}
