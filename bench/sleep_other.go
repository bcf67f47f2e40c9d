//go:build !linux

package bench

import "time"

// sleepUntil sleeps until t, where no finer sleep is at hand.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }
