package logging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/strandlog/strand/internal/lockrank"
)

// Root names the root logger, as Kafka names log4j's.
const Root = "root"

// componentKey is the attribute that names a logger's component.
const componentKey = "component"

// Components are the broker's components, listed before any of them logs.
var Components = []string{"admin", "cluster", "console", "fetcher", "group", "ledger", "link", "log",
	"protocol", "raft", "raft-transport", "replica", "server", "txn"}

// Levels are the root level and each component's own. Its methods are
// safe for concurrent use.
type Levels struct {
	root slog.LevelVar

	mu         lockrank.Mutex[lockrank.Leaf]
	components map[string]*component
}

// component holds a component's own level, when it has one.
type component struct {
	own   atomic.Bool
	level atomic.Int64
}

// NewLevels starts every component at root.
func NewLevels(root slog.Level) *Levels {
	l := &Levels{components: map[string]*component{}}
	l.root.Set(root)
	for _, name := range Components {
		l.component(name)
	}
	return l
}

func (l *Levels) component(name string) *component {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.components[name]
	if c == nil {
		c = &component{}
		l.components[name] = c
	}
	return c
}

func (l *Levels) level(c *component) slog.Level {
	if c != nil && c.own.Load() {
		return slog.Level(c.level.Load())
	}
	return l.root.Level()
}

// Describe returns each logger's level in force, by name: the root's and
// every component's, in Kafka's level names.
func (l *Levels) Describe() map[string]string {
	out := map[string]string{Root: LevelName(l.root.Level())}
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, c := range l.components {
		out[name] = LevelName(l.level(c))
	}
	return out
}

// Names lists the loggers, the root first and the components sorted.
func (l *Levels) Names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string{Root}, slices.Sorted(maps.Keys(l.components))...)
}

// The refusals of Set and Reset.
var (
	ErrUnknownLogger = errors.New("logging: unknown logger")
	ErrBadLevel      = errors.New("logging: invalid level")
	ErrResetRoot     = errors.New("logging: the root logger's level cannot be removed")
)

// Check says whether Set(name, level) would be taken.
func (l *Levels) Check(name, level string) error {
	if !l.known(name) {
		return fmt.Errorf("%w: Logger %s does not exist!", ErrUnknownLogger, name)
	}
	if _, err := ParseLevel(level); err != nil {
		return fmt.Errorf("%w: Cannot set the log level of %s to %s as it is not a supported log level. Valid log levels are %s",
			ErrBadLevel, name, level, validLevels)
	}
	return nil
}

// Set gives a logger its own level (the root's is every component's
// without one).
func (l *Levels) Set(name, level string) error {
	if err := l.Check(name, level); err != nil {
		return err
	}
	lv, _ := ParseLevel(level)
	if name == Root {
		l.root.Set(lv)
		return nil
	}
	c := l.component(name)
	c.level.Store(int64(lv))
	c.own.Store(true)
	return nil
}

// CheckReset says whether Reset(name) would be taken.
func (l *Levels) CheckReset(name string) error {
	if name == Root {
		return fmt.Errorf("%w: Removing the log level of the root logger is not allowed", ErrResetRoot)
	}
	if !l.known(name) {
		return fmt.Errorf("%w: Logger %s does not exist!", ErrUnknownLogger, name)
	}
	return nil
}

// Reset takes a component's own level away: it logs at the root level.
func (l *Levels) Reset(name string) error {
	if err := l.CheckReset(name); err != nil {
		return err
	}
	l.component(name).own.Store(false)
	return nil
}

func (l *Levels) known(name string) bool {
	if name == Root {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.components[name]
	return ok
}

// Trace is Kafka's TRACE level, below slog's DEBUG.
const Trace = slog.LevelDebug - 4

// Kafka's level names and the slog levels they stand for: TRACE below
// DEBUG, FATAL above ERROR.
var levelNames = []struct {
	name  string
	level slog.Level
}{
	{"TRACE", Trace}, {"DEBUG", slog.LevelDebug}, {"INFO", slog.LevelInfo},
	{"WARN", slog.LevelWarn}, {"ERROR", slog.LevelError}, {"FATAL", slog.LevelError + 4},
}

// validLevels lists the level names as Kafka's refusal does.
const validLevels = "DEBUG, ERROR, FATAL, INFO, TRACE, WARN"

// ParseLevel reads a level by Kafka's name for it, which is upper case.
func ParseLevel(s string) (slog.Level, error) {
	for _, n := range levelNames {
		if s == n.name {
			return n.level, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrBadLevel, s)
}

// LevelName is Kafka's name for the level that includes l.
func LevelName(l slog.Level) string {
	name := levelNames[0].name
	for _, n := range levelNames {
		if l >= n.level {
			name = n.name
		}
	}
	return name
}

// Handler passes a record on when its component's level allows it.
type Handler struct {
	inner  slog.Handler
	levels *Levels
	comp   *component // nil until a component attribute is added
}

// Wrap returns a logger whose components' levels are levels' (made from
// the lowest level logger's handler takes, when logger is not already
// wrapped), and those levels.
func Wrap(logger *slog.Logger) (*slog.Logger, *Levels) {
	if h, ok := logger.Handler().(*Handler); ok {
		return logger, h.levels
	}
	inner := logger.Handler()
	root := levelNames[len(levelNames)-1].level
	for _, n := range levelNames {
		if inner.Enabled(context.Background(), n.level) {
			root = n.level
			break
		}
	}
	levels := NewLevels(root)
	return slog.New(&Handler{inner: inner, levels: levels}), levels
}

// NewHandler wraps inner, which must take records of every level wanted
// at any time (the component levels choose).
func NewHandler(inner slog.Handler, levels *Levels) *Handler {
	return &Handler{inner: inner, levels: levels}
}

func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.levels.level(h.comp) && h.inner.Enabled(ctx, l)
}

func (h *Handler) Handle(ctx context.Context, r slog.Record) error { return h.inner.Handle(ctx, r) }

func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	next := &Handler{inner: h.inner.WithAttrs(attrs), levels: h.levels, comp: h.comp}
	for _, a := range attrs {
		if a.Key == componentKey {
			next.comp = h.levels.component(a.Value.String())
		}
	}
	return next
}

func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name), levels: h.levels, comp: h.comp}
}
