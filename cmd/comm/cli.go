package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/comm-gateway/comm/client"
)

// Exit codes of the client commands.
const (
	exitOK     = 0
	exitFailed = 1 // the gateway refused, or it could not be reached
	exitUsage  = 2 // bad flags or arguments
	exitConfig = 3 // no API key or base URL
)

// cliError carries an exit code.
type cliError struct {
	code int
	err  error
}

func (e cliError) Error() string { return e.err.Error() }

// connect returns a client from the environment and .env.
func connectClient() (*client.Client, error) {
	c, err := client.New()
	if err != nil {
		return nil, cliError{exitConfig, err}
	}
	return c, nil
}

// output prints v as JSON (--json) or through the text printer.
func output(asJSON bool, v any, text func(w io.Writer)) {
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetEscapeHTML(false)
		enc.Encode(v)
		return
	}
	text(os.Stdout)
}

func table(w io.Writer, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// signalContext ends at Ctrl-C or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// spinner shows a progress line on stderr while waiting, on a terminal.
type spinner struct {
	stop chan struct{}
	done chan struct{}
}

func startSpinner(msg string) *spinner {
	s := &spinner{stop: make(chan struct{}), done: make(chan struct{})}
	if !isTerminal(os.Stderr) {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		frames := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
		t := time.NewTicker(120 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(os.Stderr, "\r%c %s", frames[i%len(frames)], msg)
			select {
			case <-s.stop:
				fmt.Fprint(os.Stderr, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *spinner) Stop() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// runExec runs a shell command with input on stdin and returns its stdout.
func runExec(ctx context.Context, command string, input []byte, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Stdin = strings.NewReader(string(input))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("--exec %q: %w", command, err)
	}
	return strings.TrimRight(string(out), "\n"), nil
}
