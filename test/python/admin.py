#!/usr/bin/python3
"""kafka-python's KafkaAdminClient against Strand (driven by test/compat/python_test.go).

Prints one line per call: "STEP NAME OK DETAIL" or "STEP NAME FAIL ERROR", then
"ADMIN DONE failures=N". Run it with Debian's /usr/bin/python3 (python3-kafka).
"""

import argparse
import sys
import time
import traceback

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic

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


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    args = ap.parse_args()
    topic = args.topic

    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=15000)

    def create():
        resp = admin.create_topics(
            [NewTopic(topic, num_partitions=3, replication_factor=1, topic_configs={"retention.ms": "3600000"})],
            timeout_ms=10000,
        )
        errs = [(t[0], t[1]) for t in resp.topic_errors if t[1] != 0]
        check(not errs, "topic errors %r" % errs)
        return "%s v%d" % (topic, resp.API_VERSION)

    def list_topics():
        # Metadata can trail the creation for an instant in Kafka; not here,
        # but give it the same grace a real cluster needs.
        for _ in range(20):
            names = admin.list_topics()
            if topic in names:
                return "contains=%s" % topic
            time.sleep(0.1)
        raise AssertionError("%s missing from %r" % (topic, names))

    def describe_configs():
        resp = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        # One response per broker asked; each resource: (error_code, error_message,
        # resource_type, resource_name, config_entries)
        for r in resp:
            for res in r.resources:
                check(res[0] == 0, "error %d %s" % (res[0], res[1]))
                for entry in res[4]:
                    if entry[0] == "retention.ms":
                        check(entry[1] == "3600000", "retention.ms=%r" % entry[1])
                        return "retention.ms=%s v%d" % (entry[1], r.API_VERSION)
        raise AssertionError("retention.ms not described: %r" % resp)

    def describe_topics():
        d = admin.describe_topics([topic])
        check(len(d) == 1 and d[0]["error_code"] == 0, "describe %r" % d)
        n = len(d[0]["partitions"])
        check(n == 3, "partitions=%d" % n)
        return "partitions=%d" % n

    def create_partitions():
        resp = admin.create_partitions({topic: NewPartitions(total_count=5)}, timeout_ms=10000)
        errs = [t for t in resp.topic_errors if t[1] != 0]
        check(not errs, "topic errors %r" % errs)
        d = admin.describe_topics([topic])
        n = len(d[0]["partitions"])
        check(n == 5, "partitions after create_partitions=%d" % n)
        return "partitions=%d" % n

    def delete_topics():
        resp = admin.delete_topics([topic], timeout_ms=10000)
        errs = [t for t in resp.topic_error_codes if t[1] != 0]
        check(not errs, "topic errors %r" % errs)
        for _ in range(20):
            if topic not in admin.list_topics():
                return "deleted=%s" % topic
            time.sleep(0.1)
        raise AssertionError("%s still listed after delete" % topic)

    step("create_topics", create)
    step("list_topics", list_topics)
    step("describe_topics", describe_topics)
    step("describe_configs", describe_configs)
    step("create_partitions", create_partitions)
    step("delete_topics", delete_topics)
    admin.close()
    print("ADMIN DONE failures=%d" % failures, flush=True)
    sys.exit(0 if failures == 0 else 1)


if __name__ == "__main__":
    main()
