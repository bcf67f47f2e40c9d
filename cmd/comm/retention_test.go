package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseRetention(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"off", 0}, {"OFF", 0}, {"0", 0},
		{"90d", 90 * day}, {"36h", 36 * time.Hour}, {"1d12h", 36 * time.Hour}, {" 7d ", 7 * day}, {"1m", time.Minute},
	} {
		got, err := parseRetention(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseRetention(%q) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"90", "d", "-1d", "1.5d", "90days", "30s", "1w", "forever", "1d-1h"} {
		_, err := parseRetention(bad)
		if err == nil {
			t.Errorf("parseRetention(%q) accepted", bad)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "COMM_EVENT_RETENTION") || !strings.Contains(msg, "--event-retention") || !strings.Contains(msg, bad) {
			t.Errorf("parseRetention(%q): %q does not name the setting and the value", bad, msg)
		}
	}
}
