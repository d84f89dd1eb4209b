package diff

import (
	"fmt"
	"slices"
	"strings"

	"keyhole.dev/keyhole/compiler"
)

// GateChange is one change to the gate itself: to the governing Config
// (keyhole.yaml: its ceiling, exclude, include, ignore and other
// settings) or to an object's ignore annotation, which decide what check
// reads and reports rather than what a sandbox may reach.
type GateChange struct {
	Change Change `json:"change"` // added or removed
	// What and Value are the entry (compiler.GateEntry).
	What  string `json:"what"`
	Value string `json:"value"`
	// Loosens says the change may let through what the base's gate
	// stopped: a ceiling entry removed; an exclude pattern, an ignore
	// entry or an ignore annotation added; the first include pattern
	// added, or one removed while others remain (less is read); and any
	// change to another setting, which keyhole cannot weigh.
	Loosens bool `json:"loosens"`
}

// CompareGate compares two sides' gates, entry by entry: what the head
// adds, then what it removes, each sorted as the gates are.
func CompareGate(base, head compiler.Gate) []GateChange {
	includes := func(g compiler.Gate) bool {
		return slices.ContainsFunc(g, func(e compiler.GateEntry) bool { return e.What == compiler.GateInclude })
	}
	var out []GateChange
	for _, e := range head {
		if slices.Contains(base, e) {
			continue
		}
		loosens := true
		switch e.What {
		case compiler.GateCeiling:
			loosens = false
		case compiler.GateInclude:
			loosens = !includes(base) // the first narrows what is read
		}
		out = append(out, GateChange{Change: Added, What: e.What, Value: e.Value, Loosens: loosens})
	}
	for _, e := range base {
		if slices.Contains(head, e) {
			continue
		}
		loosens := false
		switch e.What {
		case compiler.GateCeiling, compiler.GateSetting:
			loosens = true
		case compiler.GateInclude:
			loosens = includes(head) // the last gone, everything is read
		}
		out = append(out, GateChange{Change: Removed, What: e.What, Value: e.Value, Loosens: loosens})
	}
	return out
}

// GateTripped returns the changes to the gate that one of gates fails
// on: widened on one that loosens, narrowed on one that does not, any on
// every one.
func (r Result) GateTripped(gates []string) []GateChange {
	var out []GateChange
	for _, c := range r.Gate {
		for _, g := range gates {
			if g == GateWidened && c.Loosens || g == GateNarrowed && !c.Loosens || g == GateAny {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// gateLine is a change to the gate on one line, with its marker: + added,
// - removed.
func gateLine(c GateChange) string {
	mark := "+"
	if c.Change == Removed {
		mark = "-"
	}
	line := fmt.Sprintf("%s %s %s", mark, c.What, c.Value)
	if c.Loosens {
		line += " (loosens the gate: " + loosening(c) + ")"
	}
	return line
}

// loosening says how the change c, which loosens the gate, may let
// through what the base's gate stopped: what a reviewer weighs.
func loosening(c GateChange) string {
	switch c.What {
	case compiler.GateExclude:
		return "what it matches is no longer read"
	case compiler.GateInclude:
		if c.Change == Added {
			return "what it does not match is no longer read"
		}
		return "what it matched is no longer read"
	case compiler.GateIgnore:
		return "that code is no longer reported"
	case compiler.GateAnnotation:
		return "that code is no longer reported of this object"
	case compiler.GateCeiling:
		return "a limit on what sandboxes may reach is gone"
	}
	return "keyhole does not weigh a setting's effect on the check; review what it changes"
}

// gateSummary is the headline's note of the gate's changes, "" when none.
func gateSummary(r Result) string {
	if len(r.Gate) == 0 {
		return ""
	}
	n := 0
	for _, c := range r.Gate {
		if c.Loosens {
			n++
		}
	}
	s := fmt.Sprintf("the gate itself changed (%d %s", len(r.Gate), plural(len(r.Gate), "entry", "entries"))
	if n > 0 {
		s += fmt.Sprintf(", %d loosening it", n)
	}
	return s + ")"
}

// gateText writes the gate's changes for the text report.
func gateText(b *strings.Builder, r Result) {
	if len(r.Gate) == 0 {
		return
	}
	b.WriteString("\nThe gate itself, keyhole.yaml and the ignore annotations (what check reads and reports):\n")
	for _, c := range r.Gate {
		fmt.Fprintf(b, "  %s\n", gateLine(c))
	}
}

// gateMarkdown writes the gate's changes for the markdown report, each
// line in a code span.
func gateMarkdown(b *strings.Builder, r Result) {
	if len(r.Gate) == 0 {
		return
	}
	b.WriteString("\n#### The gate itself\n\nkeyhole.yaml and the ignore annotations decide what check reads and reports:\n\n")
	for i, c := range r.Gate {
		if i == mdGateLines {
			fmt.Fprintf(b, "- and %d more (the text and JSON reports list them all)\n", len(r.Gate)-i)
			break
		}
		fmt.Fprintf(b, "- %s\n", mdCode(clipText(gateLine(c), mdLineBytes)))
	}
}

// mdGateLines bounds the gate's changes a PR comment lists.
const mdGateLines = 30
