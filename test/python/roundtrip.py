#!/usr/bin/python3
"""kafka-python round trip against Strand (driven by test/compat/python_test.go).

Produces N keyed records (acks=all, compressed), then reads the topic back with
an assign-style KafkaConsumer (assign + seek_to_beginning, no group).

Output, one line each:
  acked I PARTITION OFFSET        for record I (key key-(I%7), value value-I)
  record PARTITION OFFSET KEY VALUE   every consumed record, by (partition, offset)
  consumed N sha256=HEX           SHA-256 over "partition:offset:key:value\\n" in that order

Run it with Debian's /usr/bin/python3, which has python3-kafka.
"""

import argparse
import hashlib
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def key(i):
    return "key-%d" % (i % 7)


def value(i):
    return "value-%d" % i


def produce(args):
    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap,
        acks="all",
        compression_type=None if args.compression == "none" else args.compression,
        key_serializer=str.encode,
        value_serializer=str.encode,
        request_timeout_ms=15000,
        batch_size=args.batch_size,
        retries=args.retries,
    )
    futures = [producer.send(args.topic, key=key(i), value=value(i)) for i in range(args.n)]
    producer.flush(timeout=60)
    failed = 0
    for i, f in enumerate(futures):
        try:
            md = f.get(timeout=30)
            print("acked %d %d %d" % (i, md.partition, md.offset))
        except Exception as e:  # report every failure, keep going
            failed += 1
            print("failed %d %r" % (i, e))
    producer.close(timeout=10)
    print("produced %d failed %d" % (args.n - failed, failed), flush=True)
    return failed == 0


def consume(args):
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        key_deserializer=bytes.decode,
        value_deserializer=bytes.decode,
    )
    deadline = time.time() + 60
    parts = None
    while parts is None and time.time() < deadline:
        parts = consumer.partitions_for_topic(args.topic)
        if parts is None:
            time.sleep(0.2)
    if parts is None:
        print("no metadata for topic %s" % args.topic, file=sys.stderr)
        return False
    tps = [TopicPartition(args.topic, p) for p in sorted(parts)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    got = []
    while len(got) < args.n and time.time() < deadline:
        for recs in consumer.poll(timeout_ms=500).values():
            got.extend(recs)
    consumer.close()
    got.sort(key=lambda r: (r.partition, r.offset))
    h = hashlib.sha256()
    for r in got:
        h.update(("%d:%d:%s:%s\n" % (r.partition, r.offset, r.key, r.value)).encode())
        print("record %d %d %s %s" % (r.partition, r.offset, r.key, r.value))
    print("consumed %d sha256=%s" % (len(got), h.hexdigest()), flush=True)
    return len(got) >= args.n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("-n", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=16384, help="the producer's batch_size; 0 sends each record alone")
    ap.add_argument("--retries", type=int, default=0, help="the producer's retries")
    ap.add_argument("--compression", default="gzip", help="none, gzip (built in), or lz4/snappy/zstd when their modules are installed")
    ap.add_argument("--skip-produce", action="store_true", help="only consume N records")
    args = ap.parse_args()
    import kafka

    print("kafka-python %s" % kafka.__version__, file=sys.stderr)
    ok = True
    if not args.skip_produce:
        ok = produce(args)
    ok = consume(args) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
