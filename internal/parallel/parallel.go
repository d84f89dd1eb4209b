// Package parallel runs independent steps of a loop on several
// goroutines; the callers keep their results in input order themselves, so
// output does not depend on scheduling.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// For calls f(i) for every i in [0, n), on at most workers goroutines
// (runtime.GOMAXPROCS(0) when workers <= 0), and returns when all calls
// have. With one worker, or one call, it runs them in order on the
// caller's goroutine.
func For(n, workers int, f func(i int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var (
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}
