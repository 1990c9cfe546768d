package sink

import "github.com/chime-sched/chime/analytics"

// WithAfterInsert returns cfg with a hook run between an insert and its
// commit; its error ends Run there, as a crash would.
func WithAfterInsert(cfg Config, f func() error) Config {
	cfg.afterInsert = f
	return cfg
}

// WithAfterDay returns cfg with a hook run after the rows of days[i] of a
// batch are stored, before the next day's; its error ends Run there, as a
// crash would.
func WithAfterDay(cfg Config, f func(days []analytics.Day, i int) error) Config {
	cfg.afterDay = f
	return cfg
}
