package schedule_test

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

// A daily 02:30 job in Berlin on the night the clocks spring forward: 02:30
// does not exist, so it fires at 03:30 CEST, once.
func ExampleCompiled_Next() {
	c, err := schedule.Compile(&chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{
		Expr:     "30 2 * * *",
		Timezone: "Europe/Berlin",
	}}})
	if err != nil {
		panic(err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	t := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	for range 3 {
		t, _ = c.Next(t)
		fmt.Println(t.In(berlin).Format("Jan 2 15:04 MST"))
	}
	// Output:
	// Mar 29 03:30 CEST
	// Mar 30 02:30 CEST
	// Mar 31 02:30 CEST
}

// A scheduler back after a long outage asks how far behind an every-second
// job is, without stepping through every missed occurrence.
func ExampleCompiled_Latest() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, _ := schedule.Compile(&chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{
		Interval: durationpb.New(time.Second),
		StartAt:  timestamppb.New(start),
	}}})
	latest, missed, exact := c.Latest(start, start.Add(30*24*time.Hour), 100)
	fmt.Println(latest.Format(time.RFC3339), missed, exact)
	// Output: 2026-01-31T00:00:00Z 2592001 true
}

func ExampleParseCron() {
	fmt.Println(schedule.ParseCron("*/0 * * * *", ""))
	fmt.Println(schedule.ParseCron("0 9 * * MON-FRI", "Europe/Berln"))
	// Output:
	// cron.expr: cron "*/0 * * * *": minute field "*/0": step of range should be a positive number: */0; allowed: 0-59, with , - / and *
	// cron.timezone: unknown time zone "Europe/Berln"; give an IANA name such as "Europe/Berlin", or leave it empty for UTC
}
