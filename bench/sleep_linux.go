package bench

import (
	"syscall"
	"time"
)

// sleepUntil returns at t, within tens of microseconds. Go's timers wake
// a process waiting in the network poller with millisecond granularity
// (epoll_wait's timeout), which would add up to a millisecond of the load
// generator's own lateness to every latency measured from an intended
// send time. So the last 2 ms are slept on the goroutine's thread with the
// kernel's high-resolution timer; only those, because threads blocked in
// a system call cost the scheduler hand-offs (sleeping all of it that way
// raised the tail of the latencies measured).
func sleepUntil(t time.Time) {
	if d := time.Until(t) - 2*time.Millisecond; d > 0 {
		time.Sleep(d)
	}
	d := time.Until(t)
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var rem syscall.Timespec
		if err := syscall.Nanosleep(&ts, &rem); err != syscall.EINTR {
			return
		}
		ts = rem
	}
}
