// Package fetchpos carries what consumers read from the brokers that
// answer their fetches to the brokers that coordinate their groups. In a
// cluster a partition's leader is often not its group's coordinator, and
// the hand-off figures (what the previous owner was sent, where the new
// one began, how long the partition went unread) need the fetches.
//
// Every broker's Publisher sees its consumers' fetches (it wraps the
// broker's own coordinator, which sees them at once), gathers them into
// spans (per client and partition: the first fetch of the interval, and
// how far the client read by its end) and, every interval, appends one
// record of the spans to a partition of __strand_fetch_positions that it
// leads. Every broker's Follower reads every partition of the topic from
// its end at start-up and gives the other brokers' spans to its
// coordinator (group.Coordinator.FetchedElsewhere). A partition's fetches
// are all answered by its leader, so one partition's spans reach a
// coordinator in the order they were read.
//
// # The topic
//
// __strand_fetch_positions is internal, with one partition per broker
// registered when it is created, cleanup.policy=delete and ten minutes'
// retention: it is a channel, not a store. Each record's key is the
// writing broker's node id in decimal, its value a JSON object:
//
//	{
//	  "v": 1,
//	  "node": 2,                    the broker that answered the fetches
//	  "spans": [{
//	    "addr": "10.0.0.1:53122",   the client's address, as the broker saw it
//	    "client_id": "orders-1",
//	    "topic": "orders", "partition": 3,
//	    "first_offset": 1200,       the first fetch's offset ...
//	    "first_sent": 1250,         ... the end of what it was sent ...
//	    "log_start": 0,             ... the partition's log start then ...
//	    "first_arrived_us": 1764781200123456,  ... and when it arrived (Unix µs)
//	    "offset": 1300,             the highest fetch offset of the span
//	    "sent": 1350,               the highest end sent
//	    "answered_us": 1764781200323456        when its last fetch was answered
//	  }]
//	}
//
// The topic's own reads are not published.
package fetchpos
