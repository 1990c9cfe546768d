package dispatcher

import (
	"strconv"
	"strings"
)

// The done set in a commit's metadata: the offsets completed beyond the
// committed offset, so that the partition's next owner skips them
// (consumer.go, "Handover"). Offsets are written relative to the committed
// offset, as ranges: "chime-done/1:2,4-9,12" with the committed offset 100
// means 102, 104..109 and 112 completed. Kafka bounds metadata
// (offset.metadata.max.bytes, 4096 by default), so the set is cut at
// maxDoneMeta bytes, dropping the farthest ranges: suppression is best
// effort.

const (
	donePrefix  = "chime-done/1:"
	maxDoneMeta = 2048
)

// encodeDone describes the done entries at or after base; entries are in
// offset order.
func encodeDone(base int64, entries []*entry) string {
	var b strings.Builder
	b.WriteString(donePrefix)
	empty := true
	for i := 0; i < len(entries); i++ {
		e := entries[i]
		if !e.done || e.offset < base {
			continue
		}
		j := i
		for j+1 < len(entries) && entries[j+1].done {
			j++
		}
		r := strconv.FormatInt(e.offset-base, 10)
		if j > i {
			r += "-" + strconv.FormatInt(entries[j].offset-base, 10)
		}
		if b.Len()+len(r)+1 > maxDoneMeta {
			break
		}
		if !empty {
			b.WriteByte(',')
		}
		b.WriteString(r)
		empty = false
		i = j
	}
	if empty {
		return ""
	}
	return b.String()
}

// decodeDone reads encodeDone's text back into the set of offsets to
// skip. Anything it does not recognise (another client's metadata, a
// newer format) is an empty set.
func decodeDone(base int64, meta string) map[int64]bool {
	rest, ok := strings.CutPrefix(meta, donePrefix)
	if !ok || rest == "" {
		return nil
	}
	skip := map[int64]bool{}
	for _, r := range strings.Split(rest, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil || a < 0 {
			return nil
		}
		z := a
		if isRange {
			if z, err = strconv.ParseInt(hi, 10, 64); err != nil || z < a {
				return nil
			}
		}
		// A range spans only completed records, but may cover offsets
		// that hold no record (compaction, transaction markers): no
		// record of them arrives, so marking them costs nothing.
		if z-a > 1<<20 {
			return nil
		}
		for o := a; o <= z; o++ {
			skip[base+o] = true
		}
	}
	return skip
}
