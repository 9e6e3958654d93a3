// Package cluster holds the cluster metadata, the way KRaft does: a log of
// records (records.go) applied in order to an image (image.go) on every
// broker. The image has the cluster id, the broker registrations (listener,
// rack, broker epoch, fenced or not), the topics with their ids, configs
// and each partition's replicas, in-sync set, leader, leader epoch and
// partition epoch, the dynamic broker configs and the producer-id blocks,
// and the cluster links (links.go): other clusters mirrored here, and the
// mark of each mirror topic (its link, mirroring or stopped). A mirror
// topic takes its source's topic id; producer ids its source's batches
// carry are reserved (ProducerIDsReserved), so none is handed out here.
//
// Store is a broker's view: reads answer from the image at once; a change
// is proposed as a record and returns once applied here, with the outcome
// of the checks the record made when it applied. Two backends order the
// records:
//   - a single node (file.go, OpenFile): no log, but the image after each
//     record, replaced atomically and fsynced before the change returns;
//   - a cluster (raftstore.go, OpenRaft): the metadata quorum's Raft log
//     (cluster/raft, the only importer of the Raft library), with the image
//     as the log's state machine and its snapshots.
//
// One contract suite (contract_test.go) runs over both.
//
// Invariants:
//   - apply is deterministic: it reads only the record and the image, so
//     brokers that applied the same records hold equal images. What depends
//     on chance (topic ids, where placement starts) travels in the record.
//   - A record that fails its checks changes nothing but the applied index.
//   - Placement (placement.go) happens when the record applies, over the
//     brokers live in the image then.
//
// Liveness (controller.go): the quorum's leader is the active controller.
// It fences a broker it has not heard from for the session timeout and
// unfences a registered broker once it is heard from and caught up to its
// own registration. Fencing moves or drops the broker's leaderships
// (image.fence), unfencing gives back the leaderless ones it is in sync for.
//
// Processes of one node id: each Store is one process, named by a random
// incarnation that its registrations and its Raft messages carry. Contact
// is judged per incarnation, so a restarted broker does not keep its dead
// predecessor alive. Another process of the node registers only once the
// old registration is fenced (ErrDuplicateBrokerRegistration before); the
// old process, if it runs on, learns that it is superseded (Superseded) or
// finds its Raft log no longer fits the leader's (Stopped), and stops.
//
// Locking: Store.mu guards the image; the Raft loop takes it to apply, so
// nothing may hold it while proposing or asking the Raft node's status.
// Store.pidMu serialises producer-id blocks. Methods copy what they return.
package cluster
