package server

import (
	"errors"
	"fmt"

	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/telemetry"
)

// decompressTelemetry undoes a telemetry push's codec with the log's
// codecs, bounded by the push's limit (telemetry.max.bytes): a payload
// that would decompress past it is refused as too large once the limit is
// reached, never decompressed whole.
func decompressTelemetry(codec int8, src []byte, limit int) ([]byte, error) {
	out, err := log.Decompress(codec, src, limit)
	if errors.Is(err, log.ErrDecompressTooLarge) {
		return nil, fmt.Errorf("%w: %v", telemetry.ErrTooLarge, err)
	}
	return out, err
}
