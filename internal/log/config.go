package log

import (
	"fmt"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// FlushPolicy says when appended data is made durable.
type FlushPolicy int

const (
	// FlushEveryAppend syncs before an append that asks for durability is
	// acknowledged; concurrent appends share one fsync (group commit).
	FlushEveryAppend FlushPolicy = iota
	// FlushInterval syncs in the background every Config.FlushInterval.
	FlushInterval
	// FlushNever leaves it to the operating system (and to segment rolls and
	// clean shutdown).
	FlushNever
)

func (p FlushPolicy) String() string {
	switch p {
	case FlushEveryAppend:
		return "every-append"
	case FlushInterval:
		return "interval"
	case FlushNever:
		return "never"
	}
	return fmt.Sprintf("FlushPolicy(%d)", int(p))
}

// Set reads one of the names String returns into p, so that a flag can
// take a policy.
func (p *FlushPolicy) Set(s string) error {
	v, err := ParseFlushPolicy(s)
	if err == nil {
		*p = v
	}
	return err
}

// Type names the flag's value.
func (p *FlushPolicy) Type() string { return "policy" }

// ParseFlushPolicy reads the names String returns.
func ParseFlushPolicy(s string) (FlushPolicy, error) {
	for _, p := range []FlushPolicy{FlushEveryAppend, FlushInterval, FlushNever} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown flush policy %q (every-append, interval, never)", s)
}

// Config holds one partition log's settings. Field comments name the Kafka
// topic config each one follows; -1 means unlimited where Kafka says so.
type Config struct {
	SegmentBytes       int64         // segment.bytes
	SegmentTime        time.Duration // segment.ms
	IndexIntervalBytes int64         // index.interval.bytes
	MaxMessageBytes    int           // max.message.bytes: largest batch accepted
	RetentionTime      time.Duration // retention.ms; negative: unlimited
	RetentionBytes     int64         // retention.bytes; negative: unlimited
	Compact            bool          // cleanup.policy contains compact
	Delete             bool          // cleanup.policy contains delete
	DeleteRetention    time.Duration // delete.retention.ms: how long tombstones stay after cleaning
	MinCompactionLag   time.Duration // min.compaction.lag.ms
	LogAppendTime      bool          // message.timestamp.type=LogAppendTime
	TimestampBeforeMax time.Duration // message.timestamp.before.max.ms; 0: unchecked
	TimestampAfterMax  time.Duration // message.timestamp.after.max.ms; 0: unchecked
	FlushPolicy        FlushPolicy
	FlushInterval      time.Duration // with FlushInterval
	// FileDeleteDelay keeps deleted or replaced segment files open this long
	// so that reads (sendfile) already handed out can finish
	// (file.delete.delay.ms).
	FileDeleteDelay time.Duration
	// Compression is compression.type: with Recompress, a produced batch
	// of another codec is stored recompressed with Codec (none is
	// Kafka's "uncompressed"); without it ("producer") batches are stored
	// as sent. GzipLevel, LZ4Level and ZstdLevel are
	// compression.gzip.level, compression.lz4.level and
	// compression.zstd.level, used when recompressing.
	Compression Compression
}

// Compression is a topic's compression.type and the levels of its codecs.
type Compression struct {
	Recompress                     bool
	Codec                          model.Compression
	GzipLevel, LZ4Level, ZstdLevel int
}

// Defaults returns Kafka's topic defaults, with fsync on every acknowledged
// append.
func Defaults() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentTime:        7 * 24 * time.Hour,
		IndexIntervalBytes: 4096,
		MaxMessageBytes:    1048588,
		RetentionTime:      7 * 24 * time.Hour,
		RetentionBytes:     -1,
		Delete:             true,
		DeleteRetention:    24 * time.Hour,
		FlushPolicy:        FlushEveryAppend,
		FlushInterval:      time.Second,
		FileDeleteDelay:    time.Minute,
		Compression:        Compression{GzipLevel: -1, LZ4Level: 9, ZstdLevel: 3},
	}
}

// Validate reports the first setting out of range.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < 14:
		return fmt.Errorf("segment.bytes %d: must be at least 14", c.SegmentBytes)
	case c.SegmentTime <= 0:
		return fmt.Errorf("segment.ms %v: must be positive", c.SegmentTime)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("index.interval.bytes %d: must not be negative", c.IndexIntervalBytes)
	case c.MaxMessageBytes < 0:
		return fmt.Errorf("max.message.bytes %d: must not be negative", c.MaxMessageBytes)
	case !c.Compact && !c.Delete:
		return fmt.Errorf("cleanup.policy: must be delete, compact or both")
	case c.FlushPolicy == FlushInterval && c.FlushInterval <= 0:
		return fmt.Errorf("flush interval %v: must be positive", c.FlushInterval)
	case c.FlushPolicy < FlushEveryAppend || c.FlushPolicy > FlushNever:
		return fmt.Errorf("flush policy %v: unknown", c.FlushPolicy)
	}
	return nil
}
