package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestLogFormat: text, json, and auto (JSON when stderr is not a
// terminal, as under a service manager or in a container); another value
// is refused naming the setting.
func TestLogFormat(t *testing.T) {
	for _, c := range []struct{ format, want string }{{"json", `{"time":`}, {"JSON", `{"time":`}, {"text", "time="}} {
		var buf bytes.Buffer
		l, err := newLogger(c.format, &buf)
		if err != nil {
			t.Fatal(err)
		}
		l.Info("hello")
		if !strings.HasPrefix(buf.String(), c.want) {
			t.Errorf("%s: %q", c.format, buf.String())
		}
	}
	f, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := newLogger("auto", f)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hello")
	if b, _ := os.ReadFile(f.Name()); !strings.HasPrefix(string(b), `{"time":`) {
		t.Errorf("auto on a file: %q", b)
	}
	if _, err := newLogger("xml", os.Stderr); err == nil || !strings.Contains(err.Error(), "COMM_LOG_FORMAT") {
		t.Errorf("xml: %v", err)
	}
}
