#!/usr/bin/python3
"""kafka-python's KafkaAdminClient against a cluster of brokers (driven by
test/compat/cluster_clients_test.go).

Prints one line per call: "STEP NAME OK DETAIL" or "STEP NAME FAIL ERROR", then
"ADMIN DONE failures=N": describe_cluster (--nodes brokers, the controller one
of them), create_topics (--partitions partitions, one replica), describe_topics
(every partition led, by every broker between them), delete_topics and
list_topics after it. Metadata reaches the brokers a moment after the
controller commits it, as in Kafka, so the calls after a change retry for a few
seconds. Run it with Debian's /usr/bin/python3 (python3-kafka).
"""

import argparse
import sys
import time
import traceback

from kafka.admin import KafkaAdminClient, NewTopic

failures = 0


def step(name, fn):
    global failures
    try:
        detail = fn()
        print("STEP %s OK %s" % (name, detail), flush=True)
    except Exception as e:  # report and go on with the next call
        failures += 1
        print("STEP %s FAIL %s: %s" % (name, type(e).__name__, str(e).replace("\n", " ")), flush=True)
        traceback.print_exc(file=sys.stderr)


def check(ok, what):
    if not ok:
        raise AssertionError(what)


def settle(what, fn, seconds=10):
    """fn() until it returns something other than None, for at most seconds."""
    deadline = time.monotonic() + seconds
    attempts = 0
    while True:
        attempts += 1
        got = fn()
        if got is not None:
            return got, attempts
        if time.monotonic() > deadline:
            raise AssertionError("%s: not so after %d attempts" % (what, attempts))
        time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=6)
    args = ap.parse_args()
    topic = args.topic

    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=15000)

    def describe_cluster():
        c = admin.describe_cluster()
        ids = sorted(b["node_id"] for b in c["brokers"])
        check(len(ids) == args.nodes, "brokers %r, want %d" % (ids, args.nodes))
        check(c["controller_id"] in ids, "controller %r is not one of %r" % (c["controller_id"], ids))
        return "brokers=%s controller=%d cluster_id=%s" % (ids, c["controller_id"], c["cluster_id"])

    def create():
        resp = admin.create_topics([NewTopic(topic, num_partitions=args.partitions, replication_factor=1)],
                                   timeout_ms=10000)
        errs = [(t[0], t[1]) for t in resp.topic_errors if t[1] != 0]
        check(not errs, "topic errors %r" % errs)
        return "%s partitions=%d v%d" % (topic, args.partitions, resp.API_VERSION)

    def describe_topics():
        def led():
            d = admin.describe_topics([topic])
            if len(d) != 1 or d[0]["error_code"] != 0:
                return None
            ps = d[0]["partitions"]
            if len(ps) != args.partitions or any(p["leader"] < 0 for p in ps):
                return None
            return ps

        ps, attempts = settle("every partition led", led)
        leaders = {p["partition"]: p["leader"] for p in ps}
        for p in ps:
            check(p["replicas"] == [p["leader"]], "partition %d replicas %r, leader %d"
                  % (p["partition"], p["replicas"], p["leader"]))
        distinct = set(leaders.values())
        check(len(distinct) == min(args.nodes, args.partitions),
              "leaders %r are on %d of %d brokers" % (leaders, len(distinct), args.nodes))
        return "leaders=%s attempts=%d" % (sorted(leaders.items()), attempts)

    def delete_topics():
        resp = admin.delete_topics([topic], timeout_ms=10000)
        errs = [t for t in resp.topic_error_codes if t[1] != 0]
        check(not errs, "topic errors %r" % errs)
        return "deleted=%s" % topic

    def list_topics():
        _, attempts = settle("topic unlisted", lambda: True if topic not in admin.list_topics() else None)
        return "unlisted=%s attempts=%d" % (topic, attempts)

    step("describe_cluster", describe_cluster)
    step("create_topics", create)
    step("describe_topics", describe_topics)
    step("delete_topics", delete_topics)
    step("list_topics_after_delete", list_topics)
    admin.close()
    print("ADMIN DONE failures=%d" % failures, flush=True)
    sys.exit(0 if failures == 0 else 1)


if __name__ == "__main__":
    main()
