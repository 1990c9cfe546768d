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
//
// Run does all of that. A process whose later parts are built from what
// its first ones give (chime's roles, from the embedded broker's address)
// calls Start for the first stages, adds the rest, and Runs: one group
// then holds every part, and stops the first ones last. A Group is used
// from one goroutine.
type Group struct {
	// Logger gets a line for each part that fails; nil: slog.Default().
	Logger *slog.Logger

	stages  [][]Part
	onReady []onReady

	// What Start began: the stages and OnReady callbacks it reached, and
	// the watchers that tell a part's failure (the first one closes
	// failed) or call the callbacks.
	begun, watched int
	watch          context.Context
	stopWatching   context.CancelFunc
	watchers       sync.WaitGroup
	failOnce       sync.Once
	failed         chan struct{}
	failedPart     Part
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

// OnReady has the group call fn once every one of parts is ready (a role's
// "ready" log line); not if one stops before.
func (g *Group) OnReady(fn func(), parts ...Part) *Group {
	g.onReady = append(g.onReady, onReady{fn: fn, parts: parts})
	return g
}

// Parts lists the group's parts, stage by stage.
func (g *Group) Parts() []Part { return slices.Concat(g.stages...) }

// init readies the watchers' state on first use.
func (g *Group) init() {
	if g.failed == nil {
		g.failed = make(chan struct{})
		g.watch, g.stopWatching = context.WithCancel(context.Background())
	}
}

// Start starts the stages added since the last Start, stage by stage, and
// returns once they are ready; or, without waiting for the rest, when ctx
// ends (its error) or a part of the group fails to start or stops (what
// it stopped with). The parts run until Stop, not until ctx ends: they
// stop in order. After an error the caller stops the group.
func (g *Group) Start(ctx context.Context) error {
	g.init()
	// The parts stop when Stop stops them, in order, not all at once when
	// ctx ends.
	pctx := context.WithoutCancel(ctx)
	for _, o := range g.onReady[g.watched:] {
		g.watchers.Go(func() {
			if Wait(g.watch, o.parts...) == nil {
				o.fn()
			}
		})
	}
	g.watched = len(g.onReady)
	for g.begun < len(g.stages) {
		stage := g.stages[g.begun]
		g.begun++ // started, ready or not: never started twice
		for _, p := range stage {
			if err := p.Start(pctx); err != nil {
				return fmt.Errorf("%s: %w", p.Name(), err)
			}
			g.watchers.Go(func() {
				select {
				case <-p.Stopped():
					g.failOnce.Do(func() {
						g.failedPart = p
						close(g.failed)
					})
				case <-g.watch.Done():
				}
			})
		}
		if err := g.waitStage(ctx, stage); err != nil {
			return err
		}
	}
	return nil
}

// Run starts the parts (those a Start did not) and returns once ctx ends
// (nil) or a part stopped by itself (its error), after stopping every
// part. A part that fails to start or stops before it was ready ends Run
// the same way. A group runs once.
func (g *Group) Run(ctx context.Context) error {
	defer g.Stop()
	if err := g.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopping before the process was ready
		}
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case <-g.failed:
		p := g.failedPart
		g.logger().Error("part stopped; stopping the others", "part", p.Name(), "err", errOf(p))
		return fmt.Errorf("%s: %w", p.Name(), errOf(p))
	}
}

// Stop stops every part of the group, stage by stage in reverse (the parts
// of one stage together), and returns once they have stopped. Parts of the
// stages not reached are stopped too: they never start. Run stops the
// group before it returns; a caller that started it without Run stops it.
// A second Stop does nothing more.
func (g *Group) Stop() {
	g.init()
	// The watchers end before the parts are stopped: a stop the group
	// makes is not a failure.
	g.stopWatching()
	g.watchers.Wait()
	for _, stage := range slices.Backward(g.stages) {
		var wg sync.WaitGroup
		for _, p := range stage {
			wg.Go(p.Stop)
		}
		wg.Wait()
	}
}

func (g *Group) logger() *slog.Logger {
	if g.Logger == nil {
		return slog.Default()
	}
	return g.Logger
}

// waitStage waits until every part of stage is ready, or one of the group
// fails.
func (g *Group) waitStage(ctx context.Context, stage []Part) error {
	for _, p := range stage {
		select {
		case <-p.Started():
		case <-ctx.Done():
			return ctx.Err()
		case <-g.failed:
			f := g.failedPart
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
