package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// timelineStep is the width of one bar of the arrival timeline.
const timelineStep = 250 * time.Millisecond

// printTimeline writes, when CHIME_BENCH_TIMELINE is set, how many first
// arrivals came in each timelineStep after the earliest scheduled time: a
// diagnosis of where a run's rate dips (a stall, a slow start), which a
// rate over the whole run hides.
func printTimeline(a arrivals, earliest int64) {
	if os.Getenv("CHIME_BENCH_TIMELINE") == "" || earliest == 0 {
		return
	}
	var buckets []int
	for i, t := range a.first {
		if a.count[i] == 0 || t < earliest {
			continue
		}
		b := int((t - earliest) / int64(timelineStep))
		for len(buckets) <= b {
			buckets = append(buckets, 0)
		}
		buckets[b]++
	}
	var sb strings.Builder
	for b, n := range buckets {
		fmt.Fprintf(&sb, "  +%5.2fs %6d/s %s\n", float64(b)*timelineStep.Seconds(), int(float64(n)/timelineStep.Seconds()), strings.Repeat("#", n/200))
	}
	fmt.Fprintf(os.Stderr, "arrivals per %s after the scheduled time:\n%s", timelineStep, sb.String())
}
