package store

import "testing"

func TestCompareReleases(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
		ok   bool
	}{
		{"0.4.0", "0.4.0", 0, true},
		{"0.4.0", "0.5.0", -1, true},
		{"0.10.0", "0.9.9", 1, true},
		{"1.0.0", "0.99.99", 1, true},
		{"0.4.0-dev", "0.4.0", -1, true},
		{"0.4.0", "0.4.0-dev", 1, true},
		{"0.5.0-dev", "0.4.0", 1, true},
		{"0.5.0-alpha", "0.5.0-beta", -1, true},
		{"", "0.4.0", 0, false},
		{"0.4", "0.4.0", 0, false},
		{"0.4.0-", "0.4.0", 0, false},
		{"v0.4.0", "0.4.0", 0, false},
		{"0.04.0", "0.4.0", 0, false},
		{"0.4.x", "0.4.0", 0, false},
	} {
		got, ok := compareReleases(tc.a, tc.b)
		if got != tc.want || ok != tc.ok {
			t.Errorf("compareReleases(%q, %q) = %d, %v; want %d, %v", tc.a, tc.b, got, ok, tc.want, tc.ok)
		}
	}
}
