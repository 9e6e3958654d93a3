package link

import (
	"testing"

	"github.com/strandlog/strand/internal/mirrorcheck"
	"github.com/strandlog/strand/internal/model"
)

// workloadChecks check, per workload topic, that a comparison of the
// mirror with its source covered what the workload wrote: every record,
// a control batch per transaction, every codec (the Java producer's lz4
// too), the cleaner's gaps, log starts moved by DeleteRecords and
// retention. A comparison that read less would pass them silently.
var workloadChecks = map[string]func(t *testing.T, w *written, rep mirrorcheck.TopicReport){
	"codecs": func(t *testing.T, w *written, rep mirrorcheck.TopicReport) {
		const perCodec = 20
		for _, p := range rep.Partitions {
			pw := w.partitions[p.Partition]
			if p.Records != int64(pw.records()) || p.Records != int64(len(codecs)*perCodec) || p.ControlBatches != 0 ||
				p.Gaps != 0 || pw.end != p.Records {
				t.Errorf("codecs/%d: %d records (wrote %d, end %d), %d control batches, %d gaps",
					p.Partition, p.Records, pw.records(), pw.end, p.ControlBatches, p.Gaps)
			}
			for c := range model.CompressionZstd + 1 {
				if p.Codecs[c] != perCodec/10 {
					t.Errorf("codecs/%d: %d batches of %s, want %d", p.Partition, p.Codecs[c], c, perCodec/10)
				}
			}
		}
	},
	"transactions": func(t *testing.T, w *written, rep mirrorcheck.TopicReport) {
		const txns = 6
		for _, p := range rep.Partitions {
			pw := w.partitions[p.Partition]
			if len(pw.aborted) != 2*4 || pw.transactions != txns {
				t.Fatalf("transactions/%d: the workload wrote %d aborted records in %d transactions", p.Partition, len(pw.aborted), pw.transactions)
			}
			// Every record, aborted ones too, and one marker per
			// transaction: nothing else in the log.
			if p.Records != int64(pw.records()) || p.ControlBatches != int64(pw.transactions) || p.Gaps != 0 ||
				pw.end != int64(pw.records()+pw.transactions) {
				t.Errorf("transactions/%d: %d records (wrote %d), %d control batches (%d transactions), %d gaps, end %d",
					p.Partition, p.Records, pw.records(), p.ControlBatches, pw.transactions, p.Gaps, pw.end)
			}
		}
	},
	"compacted": func(t *testing.T, w *written, rep mirrorcheck.TopicReport) {
		p, pw := rep.Partitions[0], w.partitions[0]
		if p.Gaps == 0 || p.Records != w.compactedTo {
			t.Errorf("compacted: %d records in a log ending at %d, %d gaps of %d offsets; the workload wrote %d, %d left by the cleaner",
				p.Records, pw.end, p.Gaps, p.GapOffsets, pw.records(), w.compactedTo)
		}
	},
	"deleted-records": func(t *testing.T, w *written, rep mirrorcheck.TopicReport) {
		const batches, start = 4, 15
		// The log starts inside the batch 10..19, which is read whole.
		if p := rep.Partitions[0]; p.Source.LogStart != start || p.Records != (batches-1)*10 || p.Batches != batches-1 || p.Gaps != 0 {
			t.Errorf("deleted-records: log start %d, %d records in %d batches, %d gaps; want %d, %d in %d, none",
				p.Source.LogStart, p.Records, p.Batches, p.Gaps, start, (batches-1)*10, batches-1)
		}
	},
	"retained": func(t *testing.T, w *written, rep mirrorcheck.TopicReport) {
		const perRound = 10
		if p := rep.Partitions[0]; p.Source.LogStart != 2*perRound || p.Records != perRound || p.Gaps != 0 {
			t.Errorf("retained: log start %d, %d records, %d gaps; want %d, %d, none", p.Source.LogStart, p.Records, p.Gaps, 2*perRound, perRound)
		}
	},
	"java-transactions": func(t *testing.T, w *written, rep mirrorcheck.TopicReport) {
		// Five transactions of 20 records, the second and the fourth
		// aborted: every record, aborted ones too, and a marker per
		// transaction in each partition it wrote.
		var committed, aborted int
		for _, p := range rep.Partitions {
			pw := w.partitions[p.Partition]
			if p.Records != int64(pw.records()) || p.ControlBatches != int64(pw.transactions) || p.Gaps != 0 ||
				pw.end != int64(pw.records()+pw.transactions) {
				t.Errorf("java-transactions/%d: %d records (wrote %d), %d control batches (%d transactions), %d gaps, end %d",
					p.Partition, p.Records, pw.records(), p.ControlBatches, pw.transactions, p.Gaps, pw.end)
			}
			committed += len(pw.committed)
			aborted += len(pw.aborted)
		}
		if committed != 3*20 || aborted != 2*20 {
			t.Errorf("java-transactions: %d records committed and %d aborted, the producer wrote 60 and 40", committed, aborted)
		}
	},
	"java": func(t *testing.T, w *written, rep mirrorcheck.TopicReport) {
		const n = 300
		var records int64
		for _, p := range rep.Partitions {
			pw := w.partitions[p.Partition]
			if p.Records != int64(pw.records()) || p.Codecs[model.CompressionLZ4] != p.Batches || p.ControlBatches != 0 {
				t.Errorf("java/%d: %d records (wrote %d), %d of %d batches lz4", p.Partition, p.Records, pw.records(),
					p.Codecs[model.CompressionLZ4], p.Batches)
			}
			records += p.Records
		}
		if records != n {
			t.Errorf("java: %d records, the Java producer wrote %d", records, n)
		}
	},
}
