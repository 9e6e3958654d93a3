// Package acl decides what a principal may do, with Kafka's authorizer
// rules (StandardAuthorizer): access control entries on literal and
// prefixed resource patterns, deny winning over allow, the operations an
// allow implies (READ, WRITE, DELETE and ALTER imply DESCRIBE;
// ALTER_CONFIGS implies DESCRIBE_CONFIGS), host and wildcard matching,
// super users, and allow.everyone.if.no.acl.found for resources no entry
// names. It also validates new entries and matches the filters of
// DescribeAcls and DeleteAcls. It keeps no state beyond the lists it is
// built from: the cluster metadata holds them.
package acl
