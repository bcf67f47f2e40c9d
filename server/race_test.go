//go:build race

package server_test

// raceEnabled skips the tests whose point is memory or a send budget
// under time pressure: the race detector multiplies memory and slows the
// server several times, so their bounds say nothing there (they run in
// the ordinary test run).
const raceEnabled = true
