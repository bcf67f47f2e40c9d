package channels

import (
	"context"
	"time"
)

// Bound returns ctx ended also when closed ends (an adapter's Close, with
// cause why) and, when ctx has no deadline, after timeout: the context of
// one provider call.
func Bound(ctx, closed context.Context, why error, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(closed, func() { cancel(why) })
	all := func() { stop(); cancel(nil) }
	if _, ok := ctx.Deadline(); ok {
		return ctx, all
	}
	tctx, tcancel := context.WithTimeout(ctx, timeout)
	return tctx, func() { tcancel(); all() }
}
