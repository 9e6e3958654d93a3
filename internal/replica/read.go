package replica

import "github.com/strandlog/strand/internal/log"

// ReadUpTo returns the batches at offset below bound, which the caller took
// from HighWatermark or LastStableOffset: a fetch that reports an offset and
// reads up to it must use one value for both, or records past what it
// reports (and past the aborted transactions it lists) could reach the
// client. bound must not exceed the high watermark.
func (p *Partition) ReadUpTo(offset int64, maxBytes int, bound int64) (log.Section, error) {
	return p.log.Read(offset, maxBytes, bound)
}
