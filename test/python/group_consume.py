#!/usr/bin/python3
"""A kafka-python group member against Strand (driven by test/compat/group_python_test.go).

KafkaConsumer(group_id=...) subscribed to one topic, behaving like a service: it
processes what it polls (prints it), commits what it processed every
--commit-every records or --commit-ms, and when partitions are revoked; it never
commits a partition it no longer owns. It closes cleanly (commit, LeaveGroup) on
SIGTERM or at --deadline-s; SIGKILL is the crash the tests want.

Output is test/grouptest's log format (see test/grouptest/log.go), one event a
line, times in microseconds since the epoch:
  assigned TIME P,P,...   revoked TIME P,...   processed P O KEY VALUE
  committed TIME P:O,...  commitfailed TIME ERROR   closed TIME

Run it with Debian's /usr/bin/python3 (python3-kafka).
"""

import argparse
import signal
import sys
import time

from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.structs import OffsetAndMetadata

ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}


def micros():
    return int(time.time() * 1e6)


def parts(tps):
    ps = sorted(tp.partition for tp in tps)
    return ",".join(str(p) for p in ps) if ps else "-"


def line(s):
    sys.stdout.write(s + "\n")
    sys.stdout.flush()


class Member(ConsumerRebalanceListener):
    def __init__(self):
        self.consumer = None
        self.next = {}  # owned: TopicPartition -> next offset to process
        self.committed = {}
        self.since = 0
        self.last_commit = time.monotonic()

    def commit(self, only):
        offs = {}
        for tp in only:
            n = self.next.get(tp)
            if n is not None and n > self.committed.get(tp, -1):
                offs[tp] = OffsetAndMetadata(n, "")
        self.since = 0
        self.last_commit = time.monotonic()
        if not offs:
            return
        sys.stdout.flush()  # what was processed, before the commit that covers it
        try:
            self.consumer.commit(offsets=offs)
        except Exception as e:  # CommitFailedError and the like: report, go on
            line("commitfailed %d %s: %s" % (micros(), type(e).__name__, str(e).replace("\n", " ")))
            return
        for tp, om in offs.items():
            self.committed[tp] = om.offset
        line("committed %d %s" % (micros(), ",".join("%d:%d" % (tp.partition, om.offset)
                                                       for tp, om in sorted(offs.items()))))

    def forget(self, tps, kind):
        for tp in tps:
            self.next.pop(tp, None)
            self.committed.pop(tp, None)
        line("%s %d %s" % (kind, micros(), parts(tps)))

    def on_partitions_revoked(self, revoked):
        self.commit(list(revoked))
        self.forget(revoked, "revoked")

    def on_partitions_assigned(self, assigned):
        for tp in assigned:
            self.next.pop(tp, None)
            self.committed[tp] = -1
        line("assigned %d %s" % (micros(), parts(assigned)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--client-id", default="kafka-python")
    ap.add_argument("--assignor", default="range", choices=sorted(ASSIGNORS))
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    ap.add_argument("--max-poll-interval-ms", type=int, default=20000)
    ap.add_argument("--commit-every", type=int, default=100)
    ap.add_argument("--commit-ms", type=int, default=200)
    ap.add_argument("--deadline-s", type=float, default=180)
    args = ap.parse_args()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    m = Member()
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        max_poll_interval_ms=args.max_poll_interval_ms,
        partition_assignment_strategy=[ASSIGNORS[args.assignor]],
        key_deserializer=bytes.decode,
        value_deserializer=bytes.decode,
    )
    m.consumer = consumer
    consumer.subscribe([args.topic], listener=m)
    deadline = time.monotonic() + args.deadline_s
    while not stop and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=200).values():
            for r in recs:
                sys.stdout.write("processed %d %d %s %s\n" % (r.partition, r.offset, r.key, r.value))
                m.next[TopicPartition(r.topic, r.partition)] = r.offset + 1
                m.since += 1
        sys.stdout.flush()
        if m.since >= args.commit_every or time.monotonic() - m.last_commit >= args.commit_ms / 1000:
            m.commit(list(m.next))
    m.commit(list(m.next))
    # kafka-python's close leaves the group without calling the listener.
    consumer.close(autocommit=False)
    line("closed %d" % micros())


if __name__ == "__main__":
    main()
