package logging

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestComponentLevels: a component logs at its own level once it has one,
// at the root's otherwise, and back at the root's when its own is taken
// away; loggers made from a component's keep its level.
func TestComponentLevels(t *testing.T) {
	var out bytes.Buffer
	levels := NewLevels(slog.LevelInfo)
	logger := slog.New(NewHandler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: Trace}), levels))
	group := logger.With("component", "group").With("group", "orders")
	replica := logger.With("component", "replica")
	logged := func(l *slog.Logger, level slog.Level) bool {
		out.Reset()
		l.Log(t.Context(), level, "x")
		return out.Len() > 0
	}
	if logged(group, slog.LevelDebug) || !logged(group, slog.LevelInfo) {
		t.Errorf("at the root's INFO: debug %v, info %v", logged(group, slog.LevelDebug), logged(group, slog.LevelInfo))
	}
	if err := levels.Set("group", "TRACE"); err != nil {
		t.Fatal(err)
	}
	if !logged(group, Trace) || logged(replica, slog.LevelDebug) {
		t.Errorf("group at TRACE: group's trace logged %v, replica's debug logged %v", logged(group, Trace), logged(replica, slog.LevelDebug))
	}
	if err := levels.Set(Root, "ERROR"); err != nil {
		t.Fatal(err)
	}
	if logged(replica, slog.LevelWarn) || !logged(group, slog.LevelDebug) || logged(logger, slog.LevelInfo) {
		t.Errorf("root at ERROR, group at TRACE: levels %v", levels.Describe())
	}
	if err := levels.Reset("group"); err != nil {
		t.Fatal(err)
	}
	if logged(group, slog.LevelWarn) || !logged(group, slog.LevelError) {
		t.Errorf("group's level removed: it logs as the root (ERROR): levels %v", levels.Describe())
	}
	want := map[string]string{Root: "ERROR", "group": "ERROR", "replica": "ERROR"}
	for name, level := range want {
		if got := levels.Describe()[name]; got != level {
			t.Errorf("%s described at %s, want %s", name, got, level)
		}
	}
	if names := levels.Names(); names[0] != Root || len(names) != len(Components)+1 {
		t.Errorf("loggers %v: the root first, then the %d components", names, len(Components))
	}
}

func TestLevelRefusals(t *testing.T) {
	levels := NewLevels(slog.LevelInfo)
	for _, tc := range []struct {
		err  error
		want error
		msg  string
	}{
		{levels.Set("no.such", "DEBUG"), ErrUnknownLogger, "Logger no.such does not exist!"},
		{levels.Set("group", "debug"), ErrBadLevel, "Cannot set the log level of group to debug as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"},
		{levels.Set("group", "OFF"), ErrBadLevel, "OFF"},
		{levels.Reset(Root), ErrResetRoot, "Removing the log level of the root logger is not allowed"},
		{levels.Reset("no.such"), ErrUnknownLogger, "does not exist"},
	} {
		if !errors.Is(tc.err, tc.want) || !strings.Contains(tc.err.Error(), tc.msg) {
			t.Errorf("%v, want %v saying %q", tc.err, tc.want, tc.msg)
		}
	}
	if got := levels.Describe()["group"]; got != "INFO" {
		t.Errorf("after refusals group is at %s", got)
	}
}

// TestWrap: a logger not made with levels gets them, starting at the
// lowest level its handler takes; one made with them keeps them.
func TestWrap(t *testing.T) {
	plain := slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	wrapped, levels := Wrap(plain)
	if got := levels.Describe()[Root]; got != "WARN" {
		t.Errorf("root of a WARN handler: %s", got)
	}
	if again, same := Wrap(wrapped); again != wrapped || same != levels {
		t.Errorf("wrapping twice made new levels")
	}
}
