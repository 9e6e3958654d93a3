#!/usr/bin/env python3
"""A share group member with librdkafka (confluent-kafka's ShareConsumer)
against Strand (driven by test/compat/share_test.go).

share_librdkafka.py BOOTSTRAP TOPIC GROUP COUNT MODE
    Reads TOPIC as a member of the share group GROUP until COUNT records are
    settled (accepted or rejected), then closes. MODE explicit acknowledges
    each record: a value ending in 0 is rejected, one ending in 1 released at
    its first delivery (so it comes back), the others accepted; then
    commit_sync. MODE implicit leaves it to the consumer (every record of a
    poll accepted at the next). It prints, one line each:
      delivered VALUE COUNT        a record handed to it, with its delivery count
      settled VALUE accept|reject  an acknowledgement the broker confirmed
      error DETAIL                 anything unexpected (exit status 1)
"""
import sys
import time

from confluent_kafka import AcknowledgeType, ShareConsumer


def main():
    bootstrap, topic, group, count, mode = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": mode})
    c.subscribe([topic])
    settled = set()
    # Within the test's two minutes, so that a stall says how far it got.
    deadline = time.monotonic() + 90
    try:
        while len(settled) < count:
            if time.monotonic() > deadline:
                print("error settled %d of %d in 90 s" % (len(settled), count), flush=True)
                return 1
            msgs = c.poll(0.5)
            acks = {}
            for m in msgs:
                if m.error() is not None:
                    print("error poll: %s" % m.error(), flush=True)
                    return 1
                v = m.value().decode()
                print("delivered %s %d" % (v, m.delivery_count()), flush=True)
                kind = "accept"
                if mode == "explicit":
                    if v.endswith("0"):
                        kind = "reject"
                        c.acknowledge(m, AcknowledgeType.REJECT)
                    elif v.endswith("1") and m.delivery_count() == 1:
                        kind = "release"
                        c.acknowledge(m, AcknowledgeType.RELEASE)
                    else:
                        c.acknowledge(m)
                acks.setdefault((m.topic(), m.partition()), []).append((v, kind))
            if not acks:
                continue
            results = c.commit_sync(30)
            for tp, err in results.items():
                key = (tp.topic, tp.partition)
                if err is not None:
                    print("error commit %s-%d: %s" % (tp.topic, tp.partition, err), flush=True)
                    return 1
                for v, kind in acks.pop(key, []):
                    if kind != "release":
                        settled.add(v)
                        print("settled %s %s" % (v, kind), flush=True)
            for key, left in acks.items():
                print("error no result for %s-%d (%d acknowledgements)" % (key[0], key[1], len(left)), flush=True)
                return 1
    finally:
        c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
