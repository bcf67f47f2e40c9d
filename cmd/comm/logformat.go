package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
)

// newLogger makes serve's logger on w (stderr) in format: "text" (for
// people), "json" (one object a line, for log collectors) or "auto": text
// when w is a terminal, JSON otherwise.
func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch strings.ToLower(strings.TrimSpace(format)) {
	case "auto", "":
		if f, ok := w.(*os.File); ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
			return slog.New(slog.NewTextHandler(w, nil)), nil
		}
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("--log-format (COMM_LOG_FORMAT) must be text, json or auto, not %q", format)
}
