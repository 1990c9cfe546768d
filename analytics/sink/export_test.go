package sink

// WithAfterInsert returns cfg with a hook run between an insert and its
// commit; its error ends Run there, as a crash would.
func WithAfterInsert(cfg Config, f func() error) Config {
	cfg.afterInsert = f
	return cfg
}
