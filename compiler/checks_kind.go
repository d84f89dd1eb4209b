package compiler

import (
	"fmt"
	"path/filepath"
	"strings"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
)

// codeKindMisspelled is a document that means one of keyhole's kinds and
// misses it by a spelling: the API server would take it for another kind
// (or refuse it), keyhole would skip it, and what names it would find
// nothing, so the finding that matters would be elsewhere.
const codeKindMisspelled = "KindMisspelled"

// A group or kind within this many edits of keyhole's is taken as meant
// for it: more would take other projects' kinds for misspellings.
const nearEdits = 2

// kindNearMiss returns the apiVersion and kind a document of apiVersion
// and kind most likely meant, when that is one of keyhole's and they
// are not: a group kind one or two edits away in keyhole's group, a kind
// of that group under another version of it or in a group one or two
// edits away, and keyhole's Config likewise. It returns "", "" when the
// document is plainly of another project, including the operator's other
// kinds in its group.
func kindNearMiss(apiVersion, kind string) (string, string) {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return "", ""
	}
	type want struct {
		group, version string
		kinds          []string
	}
	wants := []want{
		{group: groupOf(schema.Group), version: versionOf(schema.Group), kinds: kindNames(schema.GroupKinds())},
		{group: groupOf(ConfigAPIVersion), version: versionOf(ConfigAPIVersion), kinds: []string{ConfigKind}},
	}
	for _, w := range wants {
		sameGroup := group == w.group
		if !sameGroup && !near(group, w.group) {
			continue
		}
		k := nearest(kind, w.kinds)
		if k == "" {
			continue
		}
		if sameGroup && version == w.version && k == kind {
			return "", "" // keyhole's own
		}
		return w.group + "/" + w.version, k
	}
	return "", ""
}

// near reports whether a and b are within nearEdits edits, case aside.
func near(a, b string) bool {
	return a != b && diag.Distance(strings.ToLower(a), strings.ToLower(b)) <= nearEdits
}

// nearest is word's candidate: word itself, or the one within nearEdits
// edits of it, case aside; "" when none is.
func nearest(word string, candidates []string) string {
	for _, c := range candidates {
		if strings.EqualFold(c, word) {
			return c
		}
	}
	best, bestD := "", nearEdits+1
	for _, c := range candidates {
		if d := diag.Distance(strings.ToLower(word), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func groupOf(apiVersion string) string   { g, _, _ := strings.Cut(apiVersion, "/"); return g }
func versionOf(apiVersion string) string { _, v, _ := strings.Cut(apiVersion, "/"); return v }

func kindNames(ks []schema.Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

// misspelledKind reports a document of another kind that meant one of
// keyhole's, and marks what it meant as invalid rather than missing, so
// that a reference to it says nothing more: the misspelling is the
// cause. It reports whether it reported.
func (p *pass) misspelledKind(it *item, kindAt diag.Pos) bool {
	obj := it.obj()
	apiVersion, kind := kindNearMiss(obj.APIVersion, obj.Kind)
	if kind == "" {
		if filepath.Base(it.doc.File) == "keyhole.yaml" {
			p.report(codeKindMisspelled, it, path{"kind"}, false,
				"keyhole.yaml holds keyhole's Config alone (apiVersion: %s, kind: %s), and this document is %s %s: as written, keyhole reads no Config, with its ceiling and excludes",
				ConfigAPIVersion, ConfigKind, clip(obj.APIVersion), clip(obj.Kind))
			return true
		}
		return false
	}
	var what string
	switch {
	case obj.APIVersion != apiVersion && obj.Kind != kind:
		what = fmt.Sprintf("did you mean apiVersion %s and kind %s?", apiVersion, kind)
	case obj.APIVersion != apiVersion:
		what = fmt.Sprintf("did you mean apiVersion %s?", apiVersion)
	default:
		what = fmt.Sprintf("did you mean kind %s?", kind)
	}
	msg := fmt.Sprintf("%s %s is none of keyhole's kinds, so it would go unchecked; %s", clip(obj.APIVersion), clip(obj.Kind), what)
	at := path{"apiVersion"}
	if obj.APIVersion == apiVersion {
		at = path{"kind"}
	}
	if at[0] == "kind" && kindAt.Line > 0 {
		p.diags = append(p.diags, p.diagnostic(codeKindMisspelled, it, kindAt, "kind", msg))
	} else {
		p.report(codeKindMisspelled, it, at, false, "%s", msg)
	}
	if kind != ConfigKind {
		p.invalid[kind+"/"+it.ref().String()] = true
	}
	return true
}
