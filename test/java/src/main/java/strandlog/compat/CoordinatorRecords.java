package strandlog.compat;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;

/**
 * Reads a topic of group coordinator records (__consumer_offsets) from the
 * start to its end and decodes every record with Kafka's own serde, printing
 * one line per record: "record TYPE KEY VALUE" (VALUE "tombstone" for a
 * deleted key) or "error TYPE MESSAGE" when Kafka cannot read it.
 *
 * Usage: CoordinatorRecords BOOTSTRAP TOPIC
 */
public final class CoordinatorRecords {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.EXCLUDE_INTERNAL_TOPICS_CONFIG, "false");
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(args[1])) {
                parts.add(new TopicPartition(info.topic(), info.partition()));
            }
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            var ends = consumer.endOffsets(parts);
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline && parts.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    short type = ByteBuffer.wrap(r.key()).getShort();
                    try {
                        CoordinatorRecord rec = serde.deserialize(ByteBuffer.wrap(r.key()),
                            r.value() == null ? null : ByteBuffer.wrap(r.value()));
                        String value = rec.value() == null ? "tombstone" : rec.value().message().toString();
                        System.out.println("record " + type + " " + rec.key() + " " + value);
                    } catch (RuntimeException e) {
                        System.out.println("error " + type + " " + e);
                    }
                }
            }
        }
    }
}
