// Package testutil starts brokers for tests: in-process (StartBroker) or as
// the real binary in a child process (StartProcess), each on a free loopback
// port with its own data directory; or a cluster of processes, each in a
// network namespace of its own (StartNetCluster), whose links the test cuts.
// Tests await conditions with Eventually. README, Sections and
// CommandLines give the README's commands to the tests that run them.
package testutil
