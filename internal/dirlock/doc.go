// Package dirlock keeps a directory to one process at a time, as Kafka's
// .lock files do: a broker holds its data directory, and the metadata
// quorum's directory inside it, from before it reads anything there until
// it has closed everything it wrote there.
//
// Layout: the lock is the file .lock in the directory it guards. Holding
// the lock is holding flock(2) LOCK_EX on that file, taken with LOCK_NB so
// that a second taker fails at once instead of waiting. The holder writes
// its process id into the file (decimal, then a newline), only so that a
// refused taker can name it; the pid is never trusted for anything else.
//
// Rules:
//   - The lock belongs to the open file description, not to the process:
//     a second Acquire of the same directory in the same process fails as
//     one from another process does. Two in-process brokers (dev-cluster,
//     tests) therefore need two directories.
//   - The kernel drops the lock when the holder's descriptor closes,
//     including when the process dies (kill -9): a stale .lock file never
//     keeps a directory from its next broker.
//   - The file is never removed. Removing it on release would let a taker
//     that opened the old file lock it while a third process creates and
//     locks a new one, so both would hold the directory.
//   - Release closes the descriptor; nothing may write in the directory
//     after it.
package dirlock
