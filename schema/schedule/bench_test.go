package schedule

import (
	"testing"
	"time"
)

func BenchmarkCronNextBerlin(b *testing.B) {
	c, _ := Compile(cronSched("*/15 * * * *", "Europe/Berlin"))
	t := utc(2026, 3, 29, 0, 50, 0)
	for b.Loop() {
		c.Next(t)
	}
}

func BenchmarkCronNextLeapDayDST(b *testing.B) {
	c, _ := Compile(cronSched("0 0 29 2 *", "America/New_York"))
	t := utc(2097, 3, 1, 0, 0, 0)
	for b.Loop() {
		c.Next(t)
	}
}

func BenchmarkCronLatestAfterMonth(b *testing.B) {
	c, _ := Compile(cronSched("* * * * * *", "Europe/Berlin"))
	from := utc(2026, 1, 1, 0, 0, 0)
	for b.Loop() {
		c.Latest(from, from.Add(30*24*time.Hour), 1000)
	}
}

func BenchmarkCronLatestMillennia(b *testing.B) {
	c, _ := Compile(cronSched("0 0 29 2 1", "Australia/Lord_Howe"))
	from := utc(1, 3, 1, 0, 0, 0)
	for b.Loop() {
		c.Latest(from, utc(9999, 12, 1, 0, 0, 0), 10)
	}
}
