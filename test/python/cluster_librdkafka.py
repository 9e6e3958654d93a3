#!/usr/bin/env python3
"""librdkafka (confluent-kafka) against a cluster of brokers (driven by
test/compat/cluster_clients_test.go).

Run it with the virtualenv .ci/run creates (confluent-kafka from PyPI), not
with Debian's python3-kafka. Output follows Compat.java's, so that the
tests parse both alike.

produce BOOTSTRAP TOPIC N [PROP=VALUE...]
    A Producer (librdkafka's defaults, acks=all, plus PROPs) sends record i as
    key key-(i%7), value value-i, and waits for every delivery report:
      acked I PARTITION OFFSET        delivered
      failed I ERROR                  not delivered
      produced N failed F

consume BOOTSTRAP TOPIC GROUP N [PROP=VALUE...]
    A Consumer in GROUP subscribed to TOPIC (auto.offset.reset=earliest, no
    auto commit) reads until it has N records or compat.deadline.ms (60000)
    passes, commits what it read (synchronously), and closes:
      record PARTITION OFFSET KEY VALUE   in the order they arrived
      consumed N sha256=HEX               over "p:o:k:v\\n" by (partition, offset)

metadata BOOTSTRAP TOPIC
    The Producer's metadata (one Metadata request):
      broker ID HOST:PORT
      controller ID
      partition P LEADER
"""

import hashlib
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer


def line(s):
    sys.stdout.write(s.replace("\n", " ") + "\n")


def props(pairs):
    out = {}
    for kv in pairs:
        k, _, v = kv.partition("=")
        out[k] = v
    return out


def produce(bootstrap, topic, n, extra):
    conf = {"bootstrap.servers": bootstrap, "message.timeout.ms": 30000}
    conf.update(props(extra))
    p = Producer(conf)
    failed = []

    def report(i):
        def cb(err, msg):
            if err is not None:
                failed.append(i)
                line("failed %d %s" % (i, err))
            else:
                line("acked %d %d %d" % (i, msg.partition(), msg.offset()))

        return cb

    for i in range(n):
        while True:
            try:
                p.produce(topic, key="key-%d" % (i % 7), value="value-%d" % i, on_delivery=report(i))
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                p.poll(0.1)
        p.poll(0)
    left = p.flush(60)
    line("produced %d failed %d" % (n - len(failed) - left, len(failed) + left))
    sys.stdout.flush()
    return not failed and left == 0


def consume(bootstrap, topic, group, n, extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    settings = props(extra)
    deadline = time.monotonic() + int(settings.pop("compat.deadline.ms", "60000")) / 1000
    conf.update(settings)
    c = Consumer(conf)
    c.subscribe([topic])
    got = []
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(num_messages=500, timeout=0.5):
            if m.error() is not None:
                # Partition EOF and the like are events, not records; a real
                # error ends the run.
                if m.error().fatal() or not m.error().retriable():
                    print("consume error: %s" % m.error(), file=sys.stderr)
                continue
            got.append((m.partition(), m.offset(), m.key().decode(), m.value().decode()))
            line("record %d %d %s %s" % got[-1])
    ok = len(got) >= n
    try:
        if got:
            c.commit(asynchronous=False)
    except KafkaException as e:
        print("commit: %s" % e, file=sys.stderr)
        ok = False
    c.close()
    h = hashlib.sha256()
    for p, o, k, v in sorted(got):
        h.update(("%d:%d:%s:%s\n" % (p, o, k, v)).encode())
    line("consumed %d sha256=%s" % (len(got), h.hexdigest()))
    sys.stdout.flush()
    return ok


def metadata(bootstrap, topic):
    p = Producer({"bootstrap.servers": bootstrap})
    md = p.list_topics(topic, timeout=20)
    for b in sorted(md.brokers.values(), key=lambda b: b.id):
        line("broker %d %s:%d" % (b.id, b.host, b.port))
    line("controller %d" % md.controller_id)
    t = md.topics[topic]
    if t.error is not None:
        print("topic %s: %s" % (topic, t.error), file=sys.stderr)
        return False
    for part in sorted(t.partitions.values(), key=lambda p: p.id):
        line("partition %d %d" % (part.id, part.leader))
    sys.stdout.flush()
    return True


def main():
    a = sys.argv[1:]
    if len(a) >= 4 and a[0] == "produce":
        ok = produce(a[1], a[2], int(a[3]), a[4:])
    elif len(a) >= 5 and a[0] == "consume":
        ok = consume(a[1], a[2], a[3], int(a[4]), a[5:])
    elif len(a) == 3 and a[0] == "metadata":
        ok = metadata(a[1], a[2])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
