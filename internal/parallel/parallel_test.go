package parallel

import (
	"sync/atomic"
	"testing"
)

// TestForCallsEachOnce: every index is called exactly once, whatever the
// number of workers, including none to call and more workers than calls.
func TestForCallsEachOnce(t *testing.T) {
	cases := map[string]struct{ n, workers int }{
		"none":             {0, 4},
		"one":              {1, 4},
		"sequential":       {100, 1},
		"default workers":  {100, 0},
		"more workers":     {3, 16},
		"many calls":       {10_000, 8},
		"negative workers": {50, -1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			calls := make([]atomic.Int32, tc.n)
			For(tc.n, tc.workers, func(i int) { calls[i].Add(1) })
			for i := range calls {
				if got := calls[i].Load(); got != 1 {
					t.Fatalf("index %d called %d times", i, got)
				}
			}
		})
	}
}

// TestForOneWorkerInOrder: with one worker the calls run in index order
// on the caller's goroutine.
func TestForOneWorkerInOrder(t *testing.T) {
	var got []int
	For(5, 1, func(i int) { got = append(got, i) })
	for i, v := range got {
		if v != i {
			t.Fatalf("call %d was index %d", i, v)
		}
	}
	if len(got) != 5 {
		t.Fatalf("%d calls, want 5", len(got))
	}
}
