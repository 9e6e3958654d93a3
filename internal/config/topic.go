package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// Errors for config changes (Kafka INVALID_CONFIG; an unknown name is also
// INVALID_CONFIG in Kafka's answer to CreateTopics and AlterConfigs).
var (
	ErrInvalidConfig = errors.New("config: invalid value")
	ErrUnknownConfig = errors.New("config: unknown config")
)

// ValueError is a config value that cannot be taken, named as it was given
// and said as Kafka's ConfigException says it (Invalid value 1d for
// configuration retention.ms: Not a number of type LONG), which is what clients show
// from the answer's error message. It is an ErrInvalidConfig.
type ValueError struct {
	Name, Value string
	Err         error // the reason, an ErrInvalidConfig
}

func (e *ValueError) Error() string {
	why := strings.TrimPrefix(e.Err.Error(), ErrInvalidConfig.Error()+": ")
	return fmt.Sprintf("Invalid value %s for configuration %s: %s", e.Value, e.Name, why)
}

func (e *ValueError) Unwrap() error { return e.Err }

// RefusedError is a refusal of a kind (ErrInvalidConfig,
// ErrInvalidRequest, ErrUnknownConfig) said in Kafka's words alone.
type RefusedError struct {
	Kind    error
	Message string
}

func (e *RefusedError) Error() string { return e.Message }
func (e *RefusedError) Unwrap() error { return e.Kind }

func refused(kind error, format string, args ...any) error {
	return &RefusedError{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// unknownTopicConfig is a topic config Strand does not serve, said as
// Kafka says it.
type unknownTopicConfig struct{ name string }

func (e *unknownTopicConfig) Error() string { return "Unknown topic config name: " + e.name }
func (e *unknownTopicConfig) Unwrap() error { return ErrUnknownConfig }

// Type is Kafka's DescribeConfigs config type.
type Type int8

const (
	TypeUnknown Type = 0 // what Kafka gives a logger's level
	TypeBoolean Type = 1
	TypeString  Type = 2
	TypeInt     Type = 3
	TypeShort   Type = 4
	TypeLong    Type = 5
	TypeDouble  Type = 6
	TypeList    Type = 7
	TypeClass   Type = 8
	// TypePassword is a secret: described as sensitive, its value never shown.
	TypePassword Type = 9
)

// TopicDef defines one topic-level config.
type TopicDef struct {
	Name       string
	BrokerName string // the broker-level default's name (the synonym)
	Type       Type
	Doc        string
	// Get reads the value from a log's settings, so a default shows the
	// broker's value.
	Get func(c replica.Config) string
	// Set parses v into c.
	Set func(c *replica.Config, v string) error
	// Flag is strand serve's flag for the broker-wide default, writing
	// where Field points, and Aliases other config file keys for it (as
	// BrokerDef's).
	Flag    string
	Field   func(c *replica.Config) any
	Aliases []Alias
}

const maxLong = math.MaxInt64

func msGet(f func(c replica.Config) time.Duration) func(replica.Config) string {
	return func(c replica.Config) string {
		d := f(c)
		if d < 0 {
			return "-1"
		}
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
}

func msSet(min int64, f func(c *replica.Config, d time.Duration)) func(*replica.Config, string) error {
	return func(c *replica.Config, v string) error {
		n, err := parseLong(v, min)
		if err != nil {
			return err
		}
		if n < 0 || n > int64(math.MaxInt64/time.Millisecond) {
			f(c, -1)
		} else {
			f(c, time.Duration(n)*time.Millisecond)
		}
		return nil
	}
}

func parseLong(v string, min int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: Not a number of type LONG", ErrInvalidConfig)
	}
	if n < min {
		return 0, fmt.Errorf("%w: Value must be at least %d", ErrInvalidConfig, min)
	}
	return n, nil
}

// levelSet parses a codec level: def (the codec's default, which Kafka
// also takes) or one in [min, max].
func levelSet(def, min, max int, field func(c *replica.Config) *int) func(c *replica.Config, v string) error {
	return func(c *replica.Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case err != nil:
			return fmt.Errorf("%w: Not a number of type INT", ErrInvalidConfig)
		case n != def && (n < min || n > max):
			return fmt.Errorf("%w: Value must be between %d and %d", ErrInvalidConfig, min, max)
		}
		*field(c) = n
		return nil
	}
}

// TopicDefs are the topic configs Strand serves, in Kafka's names.
var TopicDefs = []TopicDef{
	{Name: "cleanup.policy", BrokerName: "log.cleanup.policy", Type: TypeList,
		Doc: "delete, compact, or both (comma separated).",
		Get: func(c replica.Config) string {
			var p []string
			if c.Delete {
				p = append(p, "delete")
			}
			if c.Compact {
				p = append(p, "compact")
			}
			return strings.Join(p, ",")
		},
		Set: func(c *replica.Config, v string) error {
			c.Delete, c.Compact = false, false
			for _, p := range strings.Split(v, ",") {
				switch strings.TrimSpace(p) {
				case "delete":
					c.Delete = true
				case "compact":
					c.Compact = true
				default:
					return fmt.Errorf("%w: %q is neither delete nor compact", ErrInvalidConfig, strings.TrimSpace(p))
				}
			}
			return nil
		}},
	{Name: "compression.type", BrokerName: "compression.type", Type: TypeString,
		Doc: "The codec batches are stored in: uncompressed, gzip, snappy, lz4 or zstd, a batch of another codec recompressed on its way in; producer keeps the producer's.",
		Get: func(c replica.Config) string {
			if !c.Compression.Recompress {
				return "producer"
			}
			if c.Compression.Codec == model.CompressionNone {
				return "uncompressed"
			}
			return c.Compression.Codec.String()
		},
		Set: func(c *replica.Config, v string) error {
			codecs := map[string]model.Compression{"uncompressed": model.CompressionNone, "gzip": model.CompressionGzip,
				"snappy": model.CompressionSnappy, "lz4": model.CompressionLZ4, "zstd": model.CompressionZstd}
			if v == "producer" {
				c.Compression.Recompress = false
				return nil
			}
			codec, ok := codecs[v]
			if !ok {
				return fmt.Errorf("%w: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer", ErrInvalidConfig)
			}
			c.Compression.Recompress, c.Compression.Codec = true, codec
			return nil
		}},
	{Name: "compression.gzip.level", BrokerName: "compression.gzip.level", Type: TypeInt,
		Doc: "The gzip level of batches the topic recompresses: 1 to 9, or -1 for gzip's default.",
		Get: func(c replica.Config) string { return strconv.Itoa(c.Compression.GzipLevel) },
		Set: levelSet(-1, 1, 9, func(c *replica.Config) *int { return &c.Compression.GzipLevel })},
	{Name: "compression.lz4.level", BrokerName: "compression.lz4.level", Type: TypeInt,
		Doc: "The LZ4 level of batches the topic recompresses, 1 to 17 (levels above 9 compress as 9).",
		Get: func(c replica.Config) string { return strconv.Itoa(c.Compression.LZ4Level) },
		Set: levelSet(9, 1, 17, func(c *replica.Config) *int { return &c.Compression.LZ4Level })},
	{Name: "compression.zstd.level", BrokerName: "compression.zstd.level", Type: TypeInt,
		Doc: "The zstd level of batches the topic recompresses, -131072 to 22 (compressed at the nearest of four speeds).",
		Get: func(c replica.Config) string { return strconv.Itoa(c.Compression.ZstdLevel) },
		Set: levelSet(3, -131072, 22, func(c *replica.Config) *int { return &c.Compression.ZstdLevel })},
	{Name: "delete.retention.ms", BrokerName: "log.cleaner.delete.retention.ms", Type: TypeLong,
		Doc: "How long tombstones are kept after their segment is cleaned.",
		Get: msGet(func(c replica.Config) time.Duration { return c.DeleteRetention }),
		Set: msSet(0, func(c *replica.Config, d time.Duration) { c.DeleteRetention = d })},
	{Name: "file.delete.delay.ms", BrokerName: "log.segment.delete.delay.ms", Type: TypeLong,
		Doc: "How long a deleted segment's file stays open for reads in flight.",
		Get: msGet(func(c replica.Config) time.Duration { return c.FileDeleteDelay }),
		Set: msSet(0, func(c *replica.Config, d time.Duration) { c.FileDeleteDelay = d })},
	{Name: "flush.messages", BrokerName: "log.flush.interval.messages", Type: TypeLong,
		Doc: "1 (the default) syncs every acknowledged write to disk before answering; any other value leaves syncing to flush.ms or the OS. strand serve's --fsync says it in words: every-append (1), interval (every --fsync-interval-ms) or never.",
		Get: func(c replica.Config) string {
			if c.FlushPolicy == log.FlushEveryAppend {
				return "1"
			}
			return strconv.FormatInt(maxLong, 10)
		},
		Set: func(c *replica.Config, v string) error {
			n, err := parseLong(v, 1)
			if err != nil {
				return err
			}
			if n == 1 {
				c.FlushPolicy = log.FlushEveryAppend
			} else if c.FlushPolicy == log.FlushEveryAppend {
				c.FlushPolicy = log.FlushNever
			}
			return nil
		},
		Flag: "fsync", Field: func(c *replica.Config) any { return &c.FlushPolicy }},
	{Name: "flush.ms", BrokerName: "log.flush.interval.ms", Type: TypeLong,
		Doc: "With flush.messages above 1 (--fsync interval), sync in the background this often.",
		Get: func(c replica.Config) string {
			if c.FlushPolicy == log.FlushInterval {
				return strconv.FormatInt(c.FlushInterval.Milliseconds(), 10)
			}
			return strconv.FormatInt(maxLong, 10)
		},
		Set: func(c *replica.Config, v string) error {
			n, err := parseLong(v, 0)
			if err != nil {
				return err
			}
			if c.FlushPolicy != log.FlushEveryAppend && n < maxLong {
				c.FlushPolicy, c.FlushInterval = log.FlushInterval, time.Duration(max(n, 1))*time.Millisecond
			}
			return nil
		},
		Flag: "fsync-interval-ms", Field: func(c *replica.Config) any { return &c.FlushInterval }},
	{Name: "index.interval.bytes", BrokerName: "log.index.interval.bytes", Type: TypeInt,
		Doc: "Bytes of batches between offset index entries.",
		Get: func(c replica.Config) string { return strconv.FormatInt(c.IndexIntervalBytes, 10) },
		Set: func(c *replica.Config, v string) error {
			n, err := parseLong(v, 0)
			c.IndexIntervalBytes = n
			return err
		}},
	{Name: "max.message.bytes", BrokerName: "message.max.bytes", Type: TypeInt,
		Doc: "The largest record batch accepted.",
		Get: func(c replica.Config) string { return strconv.Itoa(c.MaxMessageBytes) },
		Set: func(c *replica.Config, v string) error {
			n, err := parseLong(v, 0)
			if err == nil && n > math.MaxInt32 {
				err = fmt.Errorf("%w: %d is above the maximum %d", ErrInvalidConfig, n, math.MaxInt32)
			}
			c.MaxMessageBytes = int(n)
			return err
		},
		Flag: "max-message-bytes", Field: func(c *replica.Config) any { return &c.MaxMessageBytes }},
	{Name: "message.timestamp.after.max.ms", BrokerName: "log.message.timestamp.after.max.ms", Type: TypeLong,
		Doc: "How far in the future a record's timestamp may be.",
		Get: func(c replica.Config) string { return tsWindowGet(c.TimestampAfterMax) },
		Set: func(c *replica.Config, v string) error { return tsWindowSet(&c.TimestampAfterMax, v) }},
	{Name: "message.timestamp.before.max.ms", BrokerName: "log.message.timestamp.before.max.ms", Type: TypeLong,
		Doc: "How far in the past a record's timestamp may be.",
		Get: func(c replica.Config) string { return tsWindowGet(c.TimestampBeforeMax) },
		Set: func(c *replica.Config, v string) error { return tsWindowSet(&c.TimestampBeforeMax, v) }},
	{Name: "message.timestamp.type", BrokerName: "log.message.timestamp.type", Type: TypeString,
		Doc: "CreateTime (the producer's) or LogAppendTime (the broker's).",
		Get: func(c replica.Config) string {
			if c.LogAppendTime {
				return "LogAppendTime"
			}
			return "CreateTime"
		},
		Set: func(c *replica.Config, v string) error {
			switch v {
			case "CreateTime":
				c.LogAppendTime = false
			case "LogAppendTime":
				c.LogAppendTime = true
			default:
				return fmt.Errorf("%w: CreateTime or LogAppendTime", ErrInvalidConfig)
			}
			return nil
		}},
	throttledReplicas("leader", "whose leaders send to followers out of sync",
		func(c *replica.Config) *string { return &c.LeaderThrottledReplicas }),
	throttledReplicas("follower", "that, out of sync, copy from their leaders",
		func(c *replica.Config) *string { return &c.FollowerThrottledReplicas }),
	{Name: "min.compaction.lag.ms", BrokerName: "log.cleaner.min.compaction.lag.ms", Type: TypeLong,
		Doc: "The minimum age of a record before compaction may remove it.",
		Get: msGet(func(c replica.Config) time.Duration { return c.MinCompactionLag }),
		Set: msSet(0, func(c *replica.Config, d time.Duration) { c.MinCompactionLag = d })},
	{Name: "min.insync.replicas", BrokerName: "min.insync.replicas", Type: TypeInt,
		Doc: "In-sync replicas an acks=all write needs: fewer, and it is refused with NOT_ENOUGH_REPLICAS.",
		Get: func(c replica.Config) string { return strconv.Itoa(max(c.MinInSyncReplicas, 1)) },
		Set: func(c *replica.Config, v string) error {
			n, err := parseLong(v, 1)
			if err == nil && n > math.MaxInt16 {
				return fmt.Errorf("%w: %d is above the maximum %d", ErrInvalidConfig, n, math.MaxInt16)
			}
			c.MinInSyncReplicas = int(n)
			return err
		}},
	{Name: "retention.bytes", BrokerName: "log.retention.bytes", Type: TypeLong,
		Doc: "Delete the oldest segments beyond this size; -1 for no limit.",
		Get: func(c replica.Config) string { return strconv.FormatInt(max(c.RetentionBytes, -1), 10) },
		Set: func(c *replica.Config, v string) error {
			n, err := parseLong(v, -1)
			c.RetentionBytes = n
			return err
		},
		Flag: "retention-bytes", Field: func(c *replica.Config) any { return &c.RetentionBytes }},
	{Name: "retention.ms", BrokerName: "log.retention.ms", Type: TypeLong,
		Doc:  "Delete segments whose newest record is older than this; -1 for no limit.",
		Get:  msGet(func(c replica.Config) time.Duration { return c.RetentionTime }),
		Set:  msSet(-1, func(c *replica.Config, d time.Duration) { c.RetentionTime = d }),
		Flag: "retention-ms", Field: func(c *replica.Config) any { return &c.RetentionTime },
		Aliases: []Alias{{Key: "log.retention.hours", Unit: time.Hour}, {Key: "log.retention.minutes", Unit: time.Minute}}},
	{Name: "segment.bytes", BrokerName: "log.segment.bytes", Type: TypeInt,
		Doc: "Roll a new segment file at this size.",
		Get: func(c replica.Config) string { return strconv.FormatInt(c.SegmentBytes, 10) },
		Set: func(c *replica.Config, v string) error {
			n, err := parseLong(v, 14)
			if err == nil && n > math.MaxInt32 {
				err = fmt.Errorf("%w: %d is above the maximum %d", ErrInvalidConfig, n, math.MaxInt32)
			}
			c.SegmentBytes = n
			return err
		},
		Flag: "segment-bytes", Field: func(c *replica.Config) any { return &c.SegmentBytes }},
	{Name: "segment.ms", BrokerName: "log.roll.ms", Type: TypeLong,
		Doc:  "Roll a new segment file at this age.",
		Get:  msGet(func(c replica.Config) time.Duration { return c.SegmentTime }),
		Set:  msSet(1, func(c *replica.Config, d time.Duration) { c.SegmentTime = d }),
		Flag: "segment-ms", Field: func(c *replica.Config) any { return &c.SegmentTime },
		Aliases: []Alias{{Key: "log.roll.hours", Unit: time.Hour}}},
	{Name: UncleanLeaderElection, BrokerName: UncleanLeaderElection, Type: TypeBoolean,
		Doc: "Let a replica that is not in sync lead when no in-sync one can, losing what it lacks.",
		Get: func(c replica.Config) string { return strconv.FormatBool(c.UncleanLeaderElection) },
		Set: func(c *replica.Config, v string) error {
			switch strings.ToLower(v) {
			case "true", "false":
				c.UncleanLeaderElection = strings.EqualFold(v, "true")
				return nil
			}
			return fmt.Errorf("%w: true or false", ErrInvalidConfig)
		}},
}

// UncleanLeaderElection is the topic config that allows an out-of-sync
// replica to lead; the cluster metadata reads it when it elects.
const UncleanLeaderElection = "unclean.leader.election.enable"

func tsWindowGet(d time.Duration) string {
	if d <= 0 {
		return strconv.FormatInt(maxLong, 10)
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

func tsWindowSet(d *time.Duration, v string) error {
	n, err := parseLong(v, 0)
	if err != nil {
		return err
	}
	if n >= int64(math.MaxInt64/time.Millisecond) {
		*d = 0
	} else {
		*d = time.Duration(n) * time.Millisecond
	}
	return nil
}

// throttledReplicas defines the side's (leader or follower)
// replication.throttled.replicas topic config, kept where field says.
func throttledReplicas(side, what string, field func(c *replica.Config) *string) TopicDef {
	return TopicDef{Name: side + ".replication.throttled.replicas", Type: TypeList,
		Doc: "Replicas (partition:broker pairs, or * for all) " + what + " at no more than " + side + ".replication.throttled.rate.",
		Get: func(c replica.Config) string { return *field(&c) },
		Set: func(c *replica.Config, v string) error {
			*field(c) = v
			return checkThrottledReplicas(v)
		}}
}

// checkThrottledReplicas validates a throttled replicas list: empty, "*",
// or partition:broker pairs separated by commas.
func checkThrottledReplicas(v string) error {
	if v = strings.TrimSpace(v); v == "" || v == "*" {
		return nil
	}
	for _, pair := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if _, err := strconv.ParseInt(p, 10, 32); !ok || err != nil {
			return fmt.Errorf("%w: throttled replica %q is not partition:broker", ErrInvalidConfig, pair)
		}
		if _, err := strconv.ParseInt(b, 10, 32); err != nil {
			return fmt.Errorf("%w: throttled replica %q is not partition:broker", ErrInvalidConfig, pair)
		}
	}
	return nil
}

// LookupTopicDef finds a topic config by name.
func LookupTopicDef(name string) (*TopicDef, bool) {
	for i := range TopicDefs {
		if TopicDefs[i].Name == name {
			return &TopicDefs[i], true
		}
	}
	return nil, false
}

// TopicConfig applies a topic's overrides to the broker's defaults, in
// the order of TopicDefs (so flush.ms sees flush.messages' outcome).
func TopicConfig(defaults replica.Config, overrides map[string]string) (replica.Config, error) {
	c := defaults
	for name := range overrides {
		if _, ok := LookupTopicDef(name); !ok {
			return c, &unknownTopicConfig{name: name}
		}
	}
	for _, d := range TopicDefs {
		v, ok := overrides[d.Name]
		if !ok {
			continue
		}
		if err := d.Set(&c, v); err != nil {
			return c, &ValueError{Name: d.Name, Value: v, Err: err}
		}
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return c, nil
}
