// Package testutil starts brokers for tests: in-process (StartBroker) or as
// the real binary in a child process (StartProcess), each on a free loopback
// port with its own data directory.
package testutil
