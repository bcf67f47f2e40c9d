//go:build race

package inbound

// raceEnabled skips the memory measurement, which the race detector
// distorts and slows down.
const raceEnabled = true
