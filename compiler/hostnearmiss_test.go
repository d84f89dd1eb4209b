package compiler

import (
	"fmt"
	"slices"
	"testing"
)

// TestShapeIndexLeavesOutNumberedLabels: the hosts of many Connections
// that differ only in a number (api-0001.example.com, api-0002...) share
// a shape, and indexed under it each would be compared with every other:
// HostMisspelled cost seconds at 10,000 Connections. A label with a digit
// or of fewer than four letters is no typo labelNear finds, and is not
// indexed; the other labels of the same hosts are.
func TestShapeIndexLeavesOutNumberedLabels(t *testing.T) {
	x := shapeIndex{}
	for i := range 1000 {
		x.add(fmt.Sprintf("api-%04d.example.com", i), i)
	}
	x.add("gitlab.example.com", 1000)
	x.add("api.example.com", 1001)
	if got := x["\x00.example.com"]; !slices.Equal(got, []int{1000}) {
		t.Errorf("hosts under \\x00.example.com: %d of them, want only gitlab.example.com's", len(got))
	}
	if got := len(x["api-0007.\x00.com"]); got != 1 {
		t.Errorf("api-0007.example.com under api-0007.\\x00.com %d times, want 1", got)
	}
	if !labelNear("github", "gihtub") || labelNear("api-0001", "api-0002") {
		t.Error("labelNear: github and gihtub are a typo apart, api-0001 and api-0002 are not")
	}
}
