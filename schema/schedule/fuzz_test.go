package schedule

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// Seconds of the protobuf timestamp range, 0001-01-01 to 9999-12-31.
const (
	minTimestamp = -62135596800
	maxTimestamp = 253402300799
)

// clampTime maps any int64 into the valid timestamp range, so the fuzzer
// spends its time on valid schedules rather than on range errors.
func clampTime(sec int64) time.Time {
	span := int64(maxTimestamp - minTimestamp)
	off := sec % span
	if off < 0 {
		off += span
	}
	return time.Unix(minTimestamp+off, 0).UTC()
}

func FuzzCompile(f *testing.F) {
	f.Add(uint8(2), "30 2 * * *", "Europe/Berlin", int64(0), int64(0), int64(0), int64(0), int64(1774747800), uint8(0))
	f.Add(uint8(2), "*/15 * * * *", "America/New_York", int64(0), int64(1772900000), int64(1773000000), int64(time.Minute), int64(1772950000), uint8(3))
	f.Add(uint8(2), "0 0 29 2 *", "", int64(0), int64(0), int64(0), int64(0), int64(4076000000), uint8(1))
	f.Add(uint8(2), "@weekly", "Australia/Lord_Howe", int64(0), int64(0), int64(0), int64(0), int64(1790000000), uint8(2))
	f.Add(uint8(2), "*/0 * * * *", "", int64(0), int64(0), int64(0), int64(0), int64(0), uint8(0))
	f.Add(uint8(2), "TZ=", "", int64(0), int64(0), int64(0), int64(0), int64(0), uint8(0))
	f.Add(uint8(2), "CRON_TZ=Europe/Berlin", "", int64(0), int64(0), int64(0), int64(0), int64(0), uint8(0))
	f.Add(uint8(2), "1-2-3 */99999999999999 ? JAN-dec sun", "Local", int64(0), int64(0), int64(0), int64(0), int64(0), uint8(0))
	f.Add(uint8(2), "59 59 23 31 12 6", "Pacific/Kiritimati", int64(0), int64(-62135596800), int64(253402300799), int64(0), int64(253402300000), uint8(5))
	f.Add(uint8(1), "", "", int64(time.Second), int64(0), int64(0), int64(0), int64(1700000000), uint8(4))
	f.Add(uint8(1), "", "", int64(7*time.Second), int64(-62135596800), int64(0), int64(time.Second), int64(253402300799), uint8(9))
	f.Add(uint8(1), "", "", int64(999*time.Millisecond), int64(0), int64(0), int64(0), int64(0), uint8(0))
	f.Add(uint8(0), "", "", int64(0), int64(1700000000), int64(0), int64(-1), int64(1700000001), uint8(1))

	f.Fuzz(func(t *testing.T, kind uint8, expr, tz string, interval, startSec, endSec, jitter, probeSec int64, maxCount uint8) {
		s := &chimev1.Schedule{}
		start, end := clampTime(startSec), clampTime(endSec)
		switch kind % 3 {
		case 0:
			s.Kind = &chimev1.Schedule_At{At: timestamppb.New(start)}
		case 1:
			e := &chimev1.Every{Interval: durationpb.New(time.Duration(interval))}
			if startSec != 0 {
				e.StartAt = timestamppb.New(start)
			}
			if endSec != 0 {
				e.EndAt = timestamppb.New(end)
			}
			s.Kind = &chimev1.Schedule_Every{Every: e}
		case 2:
			cr := &chimev1.Cron{Expr: expr, Timezone: tz}
			if startSec != 0 {
				cr.StartAt = timestamppb.New(start)
			}
			if endSec != 0 {
				cr.EndAt = timestamppb.New(end)
			}
			s.Kind = &chimev1.Schedule_Cron{Cron: cr}
		}
		if jitter != 0 {
			s.Jitter = durationpb.New(time.Duration(jitter))
		}
		_ = ParseCron(expr, tz)
		c, err := Compile(s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Compile error %T is not *Error: %v", err, err)
			}
			return
		}
		if j := c.MaxJitter(); j < 0 || j > MaxJitter {
			t.Fatalf("jitter %s out of range", j)
		}
		if d := Jitter(c.MaxJitter(), expr, uint64(probeSec)); d < 0 || (c.MaxJitter() > 0 && d >= c.MaxJitter()) {
			t.Fatalf("Jitter = %s, max %s", d, c.MaxJitter())
		}

		probe := clampTime(probeSec)
		c = c.WithAnchor(start)
		first, ok := c.First(start)
		if !ok {
			return
		}
		n, ok := c.Next(probe)
		if ok {
			if !n.After(probe) {
				t.Fatalf("Next(%s) = %s, not after", probe, n)
			}
			if again, ok := c.Next(n.Add(-time.Nanosecond)); !ok || !again.Equal(n) {
				t.Fatalf("Next(%s) = %s but Next just before it = %s, %v", probe, n, again, ok)
			}
			if n2, ok := c.Next(n); ok && !n2.After(n) {
				t.Fatalf("Next(%s) = %s, not after", n, n2)
			}
		}

		if probe.Before(first) {
			return
		}
		latest, count, _ := c.Latest(first, probe, int(maxCount%16))
		if count < 1 || latest.Before(first) || latest.After(probe) {
			t.Fatalf("Latest(%s, %s) = %s, %d", first, probe, latest, count)
		}
		if after, ok := c.Next(latest); ok && !after.After(probe) {
			t.Fatalf("Latest(%s, %s) = %s, but %s is later and due", first, probe, latest, after)
		}
	})
}
