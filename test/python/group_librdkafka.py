#!/usr/bin/env python3
"""A librdkafka group member (confluent-kafka) against Strand, driven by test/compat.

Consumer(group.id=...) subscribed to one topic, behaving like a service: it
processes what it polls (prints it), commits what it processed every
--commit-every records or --commit-ms, and when partitions are revoked; it never
commits a partition it no longer owns. --protocol picks group.protocol: classic
or consumer (KIP-848, where the broker assigns). It closes cleanly (commit,
leave) on SIGTERM or at --deadline-s; SIGKILL is the crash the tests want.

Output is test/grouptest's log format (see test/grouptest/log.go), one event a
line, times in microseconds since the epoch; assignments are incremental:
  assigned TIME P,P,...   revoked TIME P,...   lost TIME P,...
  processed P O KEY VALUE   committed TIME P:O,...   commitfailed TIME ERROR
  closed TIME

Run it with the virtualenv's python that has confluent-kafka.
"""

import argparse
import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def micros():
    return int(time.time() * 1e6)


def parts(tps):
    ps = sorted(tp.partition for tp in tps)
    return ",".join(str(p) for p in ps) if ps else "-"


def line(s):
    sys.stdout.write(s + "\n")
    sys.stdout.flush()


class Member:
    def __init__(self, topic):
        self.topic = topic
        self.consumer = None
        self.next = {}  # owned partition -> next offset to process
        self.committed = {}
        self.since = 0
        self.last_commit = time.monotonic()

    def commit(self, only):
        offs = []
        for p in sorted(only):
            n = self.next.get(p)
            if n is not None and n > self.committed.get(p, -1):
                offs.append(TopicPartition(self.topic, p, n))
        self.since = 0
        self.last_commit = time.monotonic()
        if not offs:
            return
        sys.stdout.flush()  # what was processed, before the commit that covers it
        try:
            res = self.consumer.commit(offsets=offs, asynchronous=False)
        except KafkaException as e:
            line("commitfailed %d %s" % (micros(), str(e).replace("\n", " ")))
            return
        done = [tp for tp in res if tp.error is None]
        for tp in done:
            self.committed[tp.partition] = tp.offset
        if done:
            line("committed %d %s" % (micros(), ",".join("%d:%d" % (tp.partition, tp.offset) for tp in done)))

    def forget(self, tps, kind):
        for tp in tps:
            self.next.pop(tp.partition, None)
            self.committed.pop(tp.partition, None)
        line("%s %d %s" % (kind, micros(), parts(tps)))

    def on_assign(self, consumer, tps):
        for tp in tps:
            self.next.pop(tp.partition, None)
            self.committed[tp.partition] = -1
        line("assigned %d %s" % (micros(), parts(tps)))

    def on_revoke(self, consumer, tps):
        self.commit([tp.partition for tp in tps])
        self.forget(tps, "revoked")

    def on_lost(self, consumer, tps):
        self.forget(tps, "lost")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--client-id", default="librdkafka")
    ap.add_argument("--protocol", default="consumer", choices=["classic", "consumer"])
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    ap.add_argument("--commit-every", type=int, default=100)
    ap.add_argument("--commit-ms", type=int, default=200)
    ap.add_argument("--deadline-s", type=float, default=180)
    args = ap.parse_args()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    m = Member(args.topic)
    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "group.protocol": args.protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": 20000,
    }
    if os.environ.get("STRAND_LIBRDKAFKA_DEBUG"):
        conf["debug"] = os.environ["STRAND_LIBRDKAFKA_DEBUG"]  # e.g. cgrp,protocol: to stderr
    if args.protocol == "classic":
        conf["session.timeout.ms"] = args.session_ms
        conf["heartbeat.interval.ms"] = args.heartbeat_ms
        conf["partition.assignment.strategy"] = "cooperative-sticky"
    consumer = Consumer(conf)
    m.consumer = consumer
    consumer.subscribe([args.topic], on_assign=m.on_assign, on_revoke=m.on_revoke, on_lost=m.on_lost)
    deadline = time.monotonic() + args.deadline_s
    while not stop and time.monotonic() < deadline:
        for r in consumer.consume(num_messages=500, timeout=0.2):
            if r.error():
                continue
            key = r.key().decode() if r.key() is not None else None
            val = r.value().decode() if r.value() is not None else None
            sys.stdout.write("processed %d %d %s %s\n" % (r.partition(), r.offset(), key, val))
            m.next[r.partition()] = r.offset() + 1
            m.since += 1
        sys.stdout.flush()
        if m.since >= args.commit_every or time.monotonic() - m.last_commit >= args.commit_ms / 1000:
            m.commit(list(m.next))
    m.commit(list(m.next))
    consumer.close()  # revokes through on_revoke, then leaves
    line("closed %d" % micros())


if __name__ == "__main__":
    main()
