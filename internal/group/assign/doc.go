// Package assign holds the server-side partition assignors of the consumer
// group protocol of KIP-848: given a group's members, their subscriptions
// and current assignments, and the subscribed topics, an assignor computes
// the group's target assignment. The group coordinator calls it; the
// package knows nothing of records, epochs or reconciliation.
//
// It follows Apache Kafka 4's group-coordinator assignors: UniformAssignor
// with its UniformHomogeneousAssignmentBuilder and
// UniformHeterogeneousAssignmentBuilder, and RangeAssignor.
//
// # Rules every assignor keeps
//
//   - Every partition of every subscribed topic goes to exactly one member
//     that subscribes to the topic.
//   - A member that subscribes to nothing gets an empty assignment. Topics
//     missing from Spec.Topics are ignored.
//   - The same spec gives the same assignment, whatever the order of its
//     members, their topics or their current partitions.
//   - A malformed spec (an empty or duplicate member id, a duplicate
//     instance id, a negative partition count, racks not matching the
//     partition count) returns an error wrapping ErrInvalidSpec.
//   - Cost is about linear in members plus partitions; balancing adds a
//     log factor per moved partition. 1000 partitions over 1000 members,
//     or 10,000 over 50, take a few milliseconds.
//
// # uniform (the default)
//
// When all members subscribe to the same topics:
//
//   - Balance: each member gets total/members partitions, and
//     total%members of them get one more.
//   - Stickiness: a member keeps its current partitions up to its quota.
//     When one joins a balanced group of N, only about 1/(N+1) of the
//     partitions move; when one leaves, only its partitions move; when
//     nothing changes, nothing moves.
//   - The partitions that must move go to the members below quota in
//     member id order, each taking a run in topic and partition order.
//
// Otherwise:
//
//   - Each member keeps its current partitions of topics it still
//     subscribes to.
//   - The other partitions go, topic by topic, to the least loaded
//     subscriber of the topic. Topics with the most partitions per
//     subscriber go first.
//   - Then partitions move from the most loaded subscriber of a topic that
//     holds one of its partitions to its least loaded subscriber while the
//     two differ by more than one, topic after topic, until a round over
//     all topics moves nothing or 16 rounds have run (the tests' random
//     groups always settle before). Loads end balanced as far as the
//     subscriptions allow, as in Kafka: per topic, no move between two of
//     its subscribers would narrow their gap.
//   - Which partitions move: first those going back to a member that owned
//     them when the run started; then a giver gives what it got during the
//     run before what it owned, its last partitions first.
//
// # range
//
//   - Per topic, its subscribers are ordered: static members first, by
//     instance id, then the others by member id.
//   - With P partitions and S subscribers, each gets a contiguous range of
//     P/S partitions, and the first P%S get one more. Topics with the same
//     partition count and subscribers line up: a member gets the same
//     partition numbers of each.
//   - Current is ignored, as in Kafka 4 (3.8's sticky version could not
//     keep co-partitioning). A static member keeps its ranges across
//     restarts because its instance id keeps its place in the order.
//
// # Racks
//
// Kafka 4's server-side assignors ignore racks: they were taken out in 3.8
// (KAFKA-16694) and not put back. This package uses them only as a
// tie-break, and only when some member's rack and some topic's replica
// racks are known; otherwise the rack code does not run.
//
//   - uniform: racks never change how many partitions a member gets, or
//     of each topic when subscriptions differ, nor which members give or
//     take. With the same subscriptions they never change how many
//     partitions stay either; with different ones a later balancing round
//     could in principle send back one partition more or less (the tests'
//     random groups show none). Racks change which partitions move: a
//     member giving partitions up keeps those with a replica on its rack,
//     and a member taking partitions takes those with a replica on its
//     rack first. Stickiness comes before racks: a partition going back to
//     its original owner, or one a member got during the run, moves first.
//   - range: each member still gets the count of plain ranges. As in the
//     classic RangeAssignor of KIP-881, a rack pass first gives partition
//     p of a co-partitioned set of topics to the first member, in range
//     order, with quota left and a replica of p on its rack in each topic;
//     a member with no rack matches any partition. The rest fill the
//     remaining quotas in order. When every partition matches every
//     member the result is plain ranges.
//
// # Deliberate differences from Kafka
//
//   - Members are taken in member id order and topics in name order where
//     Kafka uses hash-map order or topic ids, so results are reproducible.
//   - uniform, same subscriptions: the spare partitions (total%members) go
//     first to members already holding more than the minimum, so a
//     balanced group never moves. Kafka gives them to the first members it
//     meets.
//   - uniform, different subscriptions: when balancing moves partitions
//     it first sends back those whose original owner is taking, and a
//     giver passes on what it got during the run before what it owned.
//     Kafka moves the most loaded member's last partitions. Over the
//     tests' random groups this moves within about half a percent of the
//     fewest partitions that reach the same loads.
//   - A partition claimed in the current assignments of two members stays
//     with the one with the smaller member id instead of being trusted
//     twice.
//   - Topics are named, not identified by topic id: the caller passes the
//     current assignment of the topics as they exist now, and drops a
//     deleted topic's partitions when one is recreated under its name.
package assign
