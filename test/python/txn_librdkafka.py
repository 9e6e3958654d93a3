#!/usr/bin/env python3
"""Transactions with librdkafka (confluent-kafka) against Strand (driven by
test/compat/txn_librdkafka_test.go).

Run it with the virtualenv .ci/run creates (confluent-kafka from PyPI, which
ships librdkafka in its wheel), not with Debian's python3-kafka. The modes and
their output follow the Java helper's (test/java Txn.java), so that the tests
parse both alike; anything unexpected is an "error ..." line and exit status 1.

transform BOOTSTRAP IN OUT GROUP TXNID COUNT ABORT_EVERY [PROP=VALUE...]
    Consume-transform-produce, exactly once: a read_committed Consumer in GROUP
    (subscribed to IN, no auto commit) and a transactional Producer (TXNID).
    Each consume() call of up to compat.max.poll.records records is one
    transaction: every input record (k, v) becomes (k, v + "-out-" + txn) on
    OUT, and the consumer's positions go into the transaction with
    send_offsets_to_transaction(consumer.position(assignment),
    consumer.consumer_group_metadata()). Every ABORT_EVERY-th transaction (0:
    none) is flushed and then aborted, and the consumer seeks back to the
    group's committed offsets (consumer.committed(), an OffsetFetch with
    require_stable). It stops once COUNT input records are committed (the input
    must start at offset 0). A transaction that fails with an abortable error
    is aborted, or when even that fails the producer is replaced by a new one
    with the same transactional id, and the consumer goes back to the committed
    offsets; a fatal error (fenced) ends the run.
      initialized                              init_transactions succeeded (init-retry DETAIL: it failed)
      out TXN PARTITION OFFSET KEY VALUE       a record the transaction wrote (after flush/commit)
      committed-txn TXN RECORDS P:NEXT,...     a committed transaction and the offsets it committed
      aborted-txn TXN RECORDS                  an aborted transaction
      failed-txn TXN DETAIL                    a failed transaction (reinit TXN DETAIL: a new producer)
      rewind TXN P:OFFSET,...|-                the committed offsets the consumer went back to (-1: none)
      done COMMITTED                           all input committed
    Settings: compat.deadline.ms (120000), compat.max.poll.records (10); other
    PROPs go to the producer or the consumer when prefixed producer. or
    consumer. (prefix removed).

read-committed BOOTSTRAP TOPIC EXPECTED [PROP=VALUE...]
    A read_committed Consumer, assigned every partition from the beginning (no
    group), until it has seen EXPECTED records and its position reached the
    last stable offset of every partition (or it idles for compat.idle.ms,
    10000, or compat.deadline.ms, 60000, passes).
      rec PARTITION OFFSET KEY VALUE
      caughtup true|false                      positions at the last stable offsets when it stopped
      seen N

fence BOOTSTRAP TOPIC TXNID N
    Two producers with one transactional id. "STEP name OK|FAIL detail" lines
    (steps first-init, first-commit, first-open, second-init, first-fenced,
    second-commit) and
      out first-committed|first-open|second PARTITION OFFSET KEY VALUE
    The first producer commits N records "a-committed-i", then writes N records
    "a-open-i" (flushed) in a transaction it leaves open; the second producer's
    init_transactions must fence it and abort that transaction; the first's
    next produce and commit must fail, with a fatal error or a fenced one
    (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, _FENCED); the second then commits
    N records "b-i". Keys are key-(i%7).
"""

import sys
import time

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

OP_TIMEOUT = 30  # seconds, for the transactional calls


def line(s):
    sys.stdout.write(s.replace("\n", " ") + "\n")
    sys.stdout.flush()


def error(s):
    line("error " + s)


def describe(e):
    """An exception as one line: the KafkaError's name, code and flags."""
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        ke = e.args[0]
        flags = [f for f, on in (("fatal", ke.fatal()), ("retriable", ke.retriable()),
                                 ("abortable", ke.txn_requires_abort())) if on]
        return "KafkaException: %s(%d)%s: %s" % (ke.name(), ke.code(), "[" + ",".join(flags) + "]" if flags else "",
                                                 ke.str())
    return "%s: %s" % (type(e).__name__, e)


def kafka_error(e):
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return e.args[0]
    return None


FENCED_CODES = (KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH, KafkaError._FENCED)


def fenced(e):
    """Whether e is the broker fencing a producer (or the fatal error librdkafka raises for it)."""
    ke = kafka_error(e)
    return ke is not None and (ke.fatal() or ke.code() in FENCED_CODES)


def key(i):
    return "key-%d" % (i % 7)


def props(args):
    m = {}
    for a in args:
        k, eq, v = a.partition("=")
        if not eq:
            usage()
        m[k] = v
    return m


def usage():
    sys.stderr.write(
        "usage: txn_librdkafka.py transform BOOTSTRAP IN OUT GROUP TXNID COUNT ABORT_EVERY [PROP=VALUE...]\n"
        "       txn_librdkafka.py read-committed BOOTSTRAP TOPIC EXPECTED [PROP=VALUE...]\n"
        "       txn_librdkafka.py fence BOOTSTRAP TOPIC TXNID N\n")
    sys.exit(2)


def producer_conf(bootstrap, txn_id):
    return {
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "transaction.timeout.ms": 60000,
        "message.timeout.ms": 30000,
        "socket.timeout.ms": 10000,
        "linger.ms": 5,
    }


def consumer_conf(bootstrap):
    return {
        "bootstrap.servers": bootstrap,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "socket.timeout.ms": 10000,
    }


def offsets(m):
    """{partition: offset} as "P:O,..." by partition, or "-"."""
    if not m:
        return "-"
    return ",".join("%d:%d" % (p, m[p]) for p in sorted(m))


class Sent:
    """Records produced, and their delivery reports."""

    def __init__(self):
        self.records = []  # (key, value)
        self.reports = {}  # index -> (partition, offset) or error

    def produce(self, producer, topic, k, v):
        i = len(self.records)
        self.records.append((k, v))

        def report(err, msg):
            self.reports[i] = err if err is not None else (msg.partition(), msg.offset())

        producer.produce(topic, key=k, value=v, on_delivery=report)

    def print(self, producer, tag):
        """Prints "out TAG P O K V" for every record; all must be delivered (after a flush or commit)."""
        producer.poll(0)  # serve the delivery reports the commit left queued
        missing = [i for i in range(len(self.records)) if i not in self.reports]
        if missing:
            producer.flush(10)
        lines = []
        for i, (k, v) in enumerate(self.records):
            r = self.reports.get(i)
            if not isinstance(r, tuple):
                raise RuntimeError("record %s=%s of %s: delivery report %s" % (k, v, tag, r))
            lines.append("out %s %d %d %s %s" % (tag, r[0], r[1], k, v))
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()


def init_producer(conf, deadline):
    """A transactional producer after init_transactions, retried (a broker may be restarting)."""
    while True:
        p = Producer(conf)
        try:
            p.init_transactions(OP_TIMEOUT)
            line("initialized")
            return p
        except KafkaException as e:
            line("init-retry " + describe(e))
            if time.monotonic() > deadline:
                raise
            ke = kafka_error(e)
            if ke is not None and ke.retriable():
                # init_transactions may be called again after a retriable error
                try:
                    p.init_transactions(OP_TIMEOUT)
                    line("initialized")
                    return p
                except KafkaException as e2:
                    line("init-retry " + describe(e2))
            time.sleep(0.5)


def rewind(consumer, position, txn, deadline):
    """After an abort: the consumer goes back to the group's committed offsets, or to the start of a
    partition with none."""
    while True:
        try:
            assigned = consumer.assignment()
            committed = consumer.committed(assigned, timeout=OP_TIMEOUT) if assigned else []
            rewound = {}
            for tp in committed:
                if tp.error is not None:
                    raise KafkaException(tp.error)
                if tp.offset < 0:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING))
                    rewound[tp.partition] = -1
                    position.pop(tp.partition, None)
                else:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset))
                    rewound[tp.partition] = tp.offset
                    position[tp.partition] = tp.offset
            line("rewind %d %s" % (txn, offsets(rewound)))
            return
        except KafkaException as e:
            line("rewind-retry %d %s" % (txn, describe(e)))
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def transform(bootstrap, inp, out, group, txn_id, count, abort_every, extra):
    deadline = time.monotonic() + int(extra.get("compat.deadline.ms", "120000")) / 1000
    max_poll = int(extra.get("compat.max.poll.records", "10"))
    pconf = producer_conf(bootstrap, txn_id)
    cconf = consumer_conf(bootstrap)
    cconf["group.id"] = group
    for k, v in extra.items():
        if k.startswith("producer."):
            pconf[k[len("producer."):]] = v
        elif k.startswith("consumer."):
            cconf[k[len("consumer."):]] = v

    # The group's committed offsets as far as this application knows them: from
    # its commits and from what it read back after an abort or a failure. The
    # input starts at offset 0, so their sum is the number of input records
    # committed.
    position = {}
    txn = 0
    producer = init_producer(pconf, deadline)
    consumer = Consumer(cconf)
    try:
        consumer.subscribe([inp], on_assign=lambda c, ps: line("assigned %d" % len(ps)),
                           on_revoke=lambda c, ps: line("revoked %d" % len(ps)))
        while sum(position.values()) < count:
            if time.monotonic() > deadline:
                error("time limit: %d of %d input records committed after %d transactions"
                      % (sum(position.values()), count, txn))
                return 1
            msgs = consumer.consume(num_messages=max_poll, timeout=0.2)
            recs = []
            for m in msgs:
                if m.error() is not None:
                    line("consume-error " + describe(KafkaException(m.error())))
                    continue
                recs.append(m)
            if not recs:
                continue
            txn += 1
            sent = Sent()
            nxt = {}
            try:
                producer.begin_transaction()
                for m in recs:
                    v = m.value().decode() + "-out-" + str(txn)
                    sent.produce(producer, out, m.key().decode(), v)
                    producer.poll(0)
                # The next offset of every assigned partition that has one:
                # what this transaction commits.
                pos = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
                nxt = {tp.partition: tp.offset for tp in pos}
                producer.send_offsets_to_transaction(pos, consumer.consumer_group_metadata(), OP_TIMEOUT)
                if abort_every > 0 and txn % abort_every == 0:
                    # The records reach the log before the abort, so that
                    # readers can tell the abort from a transaction that never
                    # wrote anything.
                    producer.flush(OP_TIMEOUT)
                    sent.print(producer, str(txn))
                    producer.abort_transaction(OP_TIMEOUT)
                    line("aborted-txn %d %d" % (txn, len(sent.records)))
                    rewind(consumer, position, txn, deadline)
                    continue
                producer.commit_transaction(OP_TIMEOUT)
            except KafkaException as e:
                ke = kafka_error(e)
                if ke is not None and ke.fatal():
                    raise  # fenced by another instance (or worse): this one must stop
                # Whether the transaction committed is unknown (a commit that
                # timed out may have completed): abort what can be aborted and
                # go back to what the group committed.
                line("failed-txn %d %s" % (txn, describe(e)))
                try:
                    producer.abort_transaction(OP_TIMEOUT)
                except KafkaException as e2:
                    line("reinit %d %s" % (txn, describe(e2)))
                    producer = init_producer(pconf, deadline)
                rewind(consumer, position, txn, deadline)
                continue
            sent.print(producer, str(txn))
            position.update(nxt)
            line("committed-txn %d %d %s" % (txn, len(sent.records), offsets(nxt)))
        line("done %d" % sum(position.values()))
    finally:
        consumer.close()
        producer.flush(5)
    return 0


def read_committed(bootstrap, topic, expected, extra):
    deadline = time.monotonic() + int(extra.get("compat.deadline.ms", "60000")) / 1000
    idle = int(extra.get("compat.idle.ms", "10000")) / 1000
    conf = consumer_conf(bootstrap)
    conf["group.id"] = "strand-compat-read-committed"  # required by librdkafka; nothing is committed
    consumer = Consumer(conf)
    seen = 0
    caught_up = False
    try:
        md = consumer.list_topics(topic, timeout=OP_TIMEOUT)
        t = md.topics[topic]
        if t.error is not None:
            raise KafkaException(t.error)
        tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(t.partitions)]
        consumer.assign(tps)
        last = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last < idle:
            msgs = consumer.consume(num_messages=500, timeout=0.2)
            lines = []
            for m in msgs:
                if m.error() is not None:
                    error("consume " + describe(KafkaException(m.error())))
                    continue
                lines.append("rec %d %d %s %s" % (m.partition(), m.offset(), m.key().decode(), m.value().decode()))
            if lines:
                sys.stdout.write("\n".join(lines) + "\n")
                sys.stdout.flush()
                seen += len(lines)
                last = time.monotonic()
            if seen >= expected:
                # For read_committed, the high watermark librdkafka lists is
                # the last stable offset.
                caught_up = True
                for tp in consumer.position([TopicPartition(topic, x.partition) for x in tps]):
                    _, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
                    if tp.offset < high:
                        caught_up = False
                if caught_up:
                    break
    finally:
        consumer.close()
    line("caughtup " + ("true" if caught_up else "false"))
    line("seen %d" % seen)
    return 0


failures = 0


def step(name, fn):
    global failures
    try:
        detail = fn()
        line("STEP %s OK %s" % (name, detail))
        return True
    except Exception as e:  # report and let the caller decide
        failures += 1
        line("STEP %s FAIL %s" % (name, describe(e)))
        return False


def check(ok, what):
    if not ok:
        raise AssertionError(what)


def fence(bootstrap, topic, txn_id, n):
    first = Producer(producer_conf(bootstrap, txn_id))
    second = None

    def send_n(p, prefix):
        sent = Sent()
        for i in range(n):
            sent.produce(p, topic, key(i), "%s-%d" % (prefix, i))
            p.poll(0)
        return sent

    def first_init():
        first.init_transactions(OP_TIMEOUT)
        return ""

    def first_commit():
        first.begin_transaction()
        sent = send_n(first, "a-committed")
        first.commit_transaction(OP_TIMEOUT)
        sent.print(first, "first-committed")
        return "records=%d" % n

    def first_open():
        first.begin_transaction()
        sent = send_n(first, "a-open")
        check(first.flush(OP_TIMEOUT) == 0, "records left unflushed")
        sent.print(first, "first-open")
        return "records=%d" % n

    if not (step("first-init", first_init) and step("first-commit", first_commit) and step("first-open", first_open)):
        return 1
    t0 = time.monotonic()
    second = Producer(producer_conf(bootstrap, txn_id))

    def second_init():
        second.init_transactions(OP_TIMEOUT)
        return "took=%dms" % ((time.monotonic() - t0) * 1000)

    if not step("second-init", second_init):
        return 1

    def first_fenced():
        seen = []
        fenced_seen = False
        late = Sent()
        send_failed = False
        try:
            late.produce(first, topic, key(0), "a-late-0")
            first.flush(OP_TIMEOUT)
            r = late.reports.get(0)
            if isinstance(r, tuple):
                seen.append("send=ok %d/%d" % r)
            else:
                send_failed = True
                ke = r if isinstance(r, KafkaError) else None
                fenced_seen |= ke is not None and (ke.fatal() or ke.code() in FENCED_CODES)
                seen.append("send=" + (describe(KafkaException(r)) if ke is not None else "no report"))
        except KafkaException as e:
            send_failed = True
            fenced_seen |= fenced(e)
            seen.append("send=" + describe(e))
        end_failed = False
        abortable = False
        try:
            first.commit_transaction(OP_TIMEOUT)
            seen.append("commit=ok")
        except KafkaException as e:
            end_failed = True
            fenced_seen |= fenced(e)
            ke = kafka_error(e)
            abortable = ke is not None and ke.txn_requires_abort()
            seen.append("commit=" + describe(e))
        if not fenced_seen and abortable:
            # An abortable error lets the application abort: that must be
            # refused as fenced.
            try:
                first.abort_transaction(OP_TIMEOUT)
                seen.append("abort=ok")
            except KafkaException as e:
                fenced_seen |= fenced(e)
                seen.append("abort=" + describe(e))
        check(send_failed, "the fenced producer's send succeeded: %s" % " | ".join(seen))
        check(end_failed, "the fenced producer's commit succeeded: %s" % " | ".join(seen))
        check(fenced_seen, "no fatal or fenced error: %s" % " | ".join(seen))
        return " | ".join(seen)

    step("first-fenced", first_fenced)

    def second_commit():
        second.begin_transaction()
        sent = send_n(second, "b")
        second.commit_transaction(OP_TIMEOUT)
        sent.print(second, "second")
        return "records=%d" % n

    step("second-commit", second_commit)
    first.flush(0)
    second.flush(5)
    line("FENCE DONE failures=%d" % failures)
    return 0 if failures == 0 else 1


def main(argv):
    if len(argv) < 2:
        usage()
    mode, args = argv[1], argv[2:]
    try:
        if mode == "transform" and len(args) >= 7:
            return transform(args[0], args[1], args[2], args[3], args[4], int(args[5]), int(args[6]),
                             props(args[7:]))
        if mode == "read-committed" and len(args) >= 3:
            return read_committed(args[0], args[1], int(args[2]), props(args[3:]))
        if mode == "fence" and len(args) == 4:
            return fence(args[0], args[1], args[2], int(args[3]))
        usage()
    except Exception as e:  # anything unexpected: one error line, exit 1
        error("unexpected " + describe(e))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
