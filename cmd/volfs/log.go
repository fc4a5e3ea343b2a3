package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"log/syslog"
	"os"
)

// logConfig is where and how volfs logs.
type logConfig struct {
	level  string // debug, info, warn, error
	format string // text or json
	file   string // append here; "" for stderr, or syslog in the background
	// background is set in a --daemon child, whose stderr goes nowhere:
	// without a file it logs to syslog.
	background bool
}

// newLogger builds the logger of c. A log file or syslog connection it
// opens stays open for the life of the process.
func newLogger(c logConfig) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	var newHandler func(io.Writer) slog.Handler
	switch c.format {
	case "text":
		newHandler = func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, opts) }
	case "json":
		newHandler = func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, opts) }
	default:
		return nil, fmt.Errorf("--log-format: want text or json, got %q", c.format)
	}
	switch {
	case c.file != "":
		f, err := openLogFile(c.file)
		if err != nil {
			return nil, err
		}
		return slog.New(newHandler(f)), nil
	case c.background:
		w, err := syslog.New(syslog.LOG_DAEMON|syslog.LOG_INFO, "volfs")
		if err != nil {
			// The parent warned the user already (see daemonize).
			return slog.New(newHandler(io.Discard)), nil
		}
		return slog.New(newSyslogHandler(w, newHandler)), nil
	}
	return slog.New(newHandler(os.Stderr)), nil
}

// openLogFile opens path for appending, creating it if needed.
func openLogFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--log-file: %w", err)
	}
	return f, nil
}

// syslogHandler sends each record to syslog at the priority of its level,
// formatted by one of four handlers of the same kind (one per priority), so
// that journalctl -p and syslog filters see warnings and errors as such.
type syslogHandler struct {
	debug, info, warn, err slog.Handler
}

func newSyslogHandler(w *syslog.Writer, newHandler func(io.Writer) slog.Handler) *syslogHandler {
	return &syslogHandler{
		debug: newHandler(priorityWriter(w.Debug)),
		info:  newHandler(priorityWriter(w.Info)),
		warn:  newHandler(priorityWriter(w.Warning)),
		err:   newHandler(priorityWriter(w.Err)),
	}
}

// priorityWriter writes each record (slog handlers write one per call) as
// one syslog message.
type priorityWriter func(string) error

func (w priorityWriter) Write(p []byte) (int, error) {
	if err := w(string(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *syslogHandler) pick(l slog.Level) slog.Handler {
	switch {
	case l >= slog.LevelError:
		return h.err
	case l >= slog.LevelWarn:
		return h.warn
	case l >= slog.LevelInfo:
		return h.info
	}
	return h.debug
}

func (h *syslogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.pick(l).Enabled(ctx, l)
}

func (h *syslogHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.pick(r.Level).Handle(ctx, r)
}

func (h *syslogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &syslogHandler{h.debug.WithAttrs(attrs), h.info.WithAttrs(attrs), h.warn.WithAttrs(attrs), h.err.WithAttrs(attrs)}
}

func (h *syslogHandler) WithGroup(name string) slog.Handler {
	return &syslogHandler{h.debug.WithGroup(name), h.info.WithGroup(name), h.warn.WithGroup(name), h.err.WithGroup(name)}
}
