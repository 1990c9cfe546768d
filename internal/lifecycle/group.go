package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// Group runs the parts of a process: stage by stage, each stage once every
// part of the stages before it is ready (a processor reads views that
// have caught up); until the context ends or a part fails; then stops them
// in the reverse order (the views outlive the processors reading them).
type Group struct {
	// Logger gets a line for each part that fails; nil: slog.Default().
	Logger *slog.Logger

	stages  [][]Part
	onReady []onReady
}

type onReady struct {
	fn    func()
	parts []Part
}

// Add appends a stage of parts, started together once the stages added
// before are ready.
func (g *Group) Add(parts ...Part) *Group {
	g.stages = append(g.stages, parts)
	return g
}

// OnReady has Run call fn once every one of parts is ready (a role's
// "ready" log line); not if one stops before.
func (g *Group) OnReady(fn func(), parts ...Part) *Group {
	g.onReady = append(g.onReady, onReady{fn: fn, parts: parts})
	return g
}

// Parts lists the group's parts, stage by stage.
func (g *Group) Parts() []Part { return slices.Concat(g.stages...) }

// Run starts the parts and returns once ctx ends (nil) or a part stopped
// by itself (its error), after stopping every part. A part that fails to
// start or stops before it was ready ends Run the same way. A group runs
// once.
func (g *Group) Run(ctx context.Context) error {
	log := g.Logger
	if log == nil {
		log = slog.Default()
	}
	// The parts stop when Run stops them, in order, not all at once when
	// ctx ends.
	pctx := context.WithoutCancel(ctx)
	// Parts of the stages not reached are stopped too: they never start.
	defer func() {
		for _, stage := range slices.Backward(g.stages) {
			var wg sync.WaitGroup
			for _, p := range stage {
				wg.Go(p.Stop)
			}
			wg.Wait()
		}
	}()
	failed := make(chan Part, len(g.Parts()))
	// The watchers end before the parts are stopped: a stop Run makes is
	// not a failure.
	watch, stopWatching := context.WithCancel(context.Background())
	var watchers sync.WaitGroup
	defer watchers.Wait()
	defer stopWatching()
	for _, o := range g.onReady {
		watchers.Go(func() {
			if Wait(watch, o.parts...) == nil {
				o.fn()
			}
		})
	}
	for _, stage := range g.stages {
		for _, p := range stage {
			if err := p.Start(pctx); err != nil {
				return fmt.Errorf("%s: %w", p.Name(), err)
			}
			watchers.Go(func() {
				select {
				case <-p.Stopped():
					failed <- p
				case <-watch.Done():
				}
			})
		}
		if err := waitStage(ctx, failed, stage); err != nil {
			if ctx.Err() != nil {
				return nil // stopping before the process was ready
			}
			return err
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case p := <-failed:
		log.Error("part stopped; stopping the others", "part", p.Name(), "err", errOf(p))
		return fmt.Errorf("%s: %w", p.Name(), errOf(p))
	}
}

// waitStage waits until every part of stage is ready, or one of the group
// fails.
func waitStage(ctx context.Context, failed <-chan Part, stage []Part) error {
	for _, p := range stage {
		select {
		case <-p.Started():
		case <-ctx.Done():
			return ctx.Err()
		case f := <-failed:
			return fmt.Errorf("%s: %w", f.Name(), errOf(f))
		}
		select {
		case <-p.Stopped():
			return fmt.Errorf("%s stopped before it was ready: %w", p.Name(), errOf(p))
		default:
		}
	}
	return nil
}

// errOf is why p stopped.
func errOf(p Part) error {
	if err := p.Err(); err != nil {
		return err
	}
	return ErrStopped
}
