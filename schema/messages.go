package schema

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
)

// reporter turns a JSON Schema validation error tree into violations: one
// per real problem, positioned on the YAML node, in a sentence.
type reporter struct {
	// raw is the decoded schema document the failing keywords point into.
	raw   map[string]any
	kind  Kind
	doc   *yaml.Node
	val   any
	nodes nodeIndex
}

func (r *reporter) report(e *jsonschema.ValidationError) []Violation {
	fs := dropMisspeltRequired(r.collect(e))
	out := make([]Violation, len(fs))
	for i, f := range fs {
		out[i] = f.Violation
	}
	return out
}

// cause classifies a finding for the rules that merge or choose between
// findings, so that they never parse messages.
type cause int

const (
	// The zero value: a finding no merge or choice rule looks at.
	_ cause = iota
	// causeUnknown: field is the unknown field, parent the mapping's path,
	// suggestion the field it is likely a misspelling of, if any.
	causeUnknown
	// causeMissing: field is the missing field; Path is the mapping's.
	causeMissing
	// causeType: the value is of the wrong type altogether.
	causeType
)

// finding is a violation with what the reporter knows about its cause.
type finding struct {
	Violation
	cause                     cause
	field, parent, suggestion string
}

// dropMisspeltRequired drops "missing required field X" where the same
// mapping has an unknown field suggested as X: one misspelling is one
// problem, reported at the misspelt key.
func dropMisspeltRequired(fs []finding) []finding {
	type field struct{ parent, name string }
	suggested := map[field]bool{}
	for _, f := range fs {
		if f.cause == causeUnknown && f.suggestion != "" {
			suggested[field{f.parent, f.suggestion}] = true
		}
	}
	if len(suggested) == 0 {
		return fs
	}
	return slices.DeleteFunc(fs, func(f finding) bool {
		return f.cause == causeMissing && suggested[field{f.Path, f.field}]
	})
}

// collect flattens the tree to its leaves, except that an anyOf or oneOf
// is reduced to the violations of the branch the document most likely
// meant, so that one problem is not reported once per branch.
func (r *reporter) collect(e *jsonschema.ValidationError) []finding {
	_, kw := splitKeyword(e.AbsoluteKeywordLocation)
	if (kw == "anyOf" || kw == "oneOf") && len(e.Causes) > 0 {
		return r.branches(e)
	}
	if len(e.Causes) > 0 {
		var out []finding
		for _, c := range e.Causes {
			out = append(out, r.collect(c)...)
		}
		return out
	}
	return r.leaf(e)
}

// branches picks among the failures of an anyOf's branches. A branch that
// fails only below the value (a bad field inside the right shape) is the
// one the author meant; when every branch fails at the value itself, the
// value is not any of the shapes and one sentence says so.
func (r *reporter) branches(e *jsonschema.ValidationError) []finding {
	segs := pointerSegs(e.InstanceLocation)
	here := formatPath(r.typed(segs))
	var best []finding
	bestShallow, ties := -1, 0
	allType := true
	for _, c := range e.Causes {
		vs := dropMisspeltRequired(r.collect(c))
		shallow := 0
		for _, f := range vs {
			if f.Path == here || f.cause == causeUnknown && f.parent == here {
				shallow++
			}
			if f.cause != causeType {
				allType = false
			}
		}
		switch {
		case bestShallow < 0 || shallow < bestShallow:
			best, bestShallow, ties = vs, shallow, 1
		case shallow == bestShallow:
			ties++
			if len(vs) < len(best) {
				best = vs
			}
		}
	}
	if bestShallow == 0 || ties == 1 || allType {
		return best
	}
	// Every branch is equally the wrong shape. If each branch is told
	// apart by one required field, say which fields are the choice.
	schPtr, kw := splitKeyword(e.AbsoluteKeywordLocation)
	alts, _ := rawAt(r.raw, schPtr+"/"+kw).([]any)
	var names []string
	for _, a := range alts {
		req, _ := deref2(r.raw, a)["required"].([]any)
		if len(req) != 1 {
			return best
		}
		name, _ := req[0].(string)
		names = append(names, strconv.Quote(name))
	}
	node, _ := r.nodes.lookup(segs)
	how := "at least one"
	if kw == "oneOf" {
		how = "exactly one"
	}
	return []finding{r.at(node, segs, "want "+how+" of the fields "+strings.Join(names, " or "))}
}

// deref2 resolves a raw schema that is only a local $ref.
func deref2(raw map[string]any, s any) map[string]any {
	m, _ := s.(map[string]any)
	for i := 0; i < 8 && m != nil; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			break
		}
		next, _ := rawAt(raw, strings.TrimPrefix(ref, "#")).(map[string]any)
		if next == nil {
			break
		}
		m = next
	}
	return m
}

func (r *reporter) at(n *yaml.Node, segs []string, msg string) finding {
	v := Violation{Path: formatPath(r.typed(segs)), Message: msg}
	if n != nil {
		v.Line, v.Column = n.Line, n.Column
	}
	return finding{Violation: v}
}

// leaf explains one failed keyword.
func (r *reporter) leaf(e *jsonschema.ValidationError) []finding {
	schPtr, kw := splitKeyword(e.AbsoluteKeywordLocation)
	sch, _ := rawAt(r.raw, schPtr).(map[string]any)
	segs := pointerSegs(e.InstanceLocation)
	node, _ := r.nodes.lookup(segs)
	inst := valueAt(r.val, segs)
	secret := r.isSecretValue(segs)
	fmtName := formatName(schPtr)
	switch kw {
	case "additionalProperties":
		return r.unknownFields(sch, segs, inst)
	case "required":
		var out []finding
		obj, _ := inst.(map[string]any)
		req, _ := sch["required"].([]any)
		for _, f := range req {
			name, _ := f.(string)
			if _, ok := obj[name]; !ok {
				m := r.at(node, segs, "missing required field "+strconv.Quote(name))
				m.cause, m.field = causeMissing, name
				out = append(out, m)
			}
		}
		return out
	case "type":
		msg := fmt.Sprintf("want %s, got %s%s", typeWant(sch["type"]), typeGot(inst), yaml11Bool(sch["type"], node))
		if tmpl, ok := unquotedTemplate(node); ok && sch["type"] == "string" {
			msg = fmt.Sprintf("want a string, got a mapping: YAML reads an unquoted %s as a mapping of a mapping; quote it: \"%s\"", tmpl, tmpl)
		}
		f := r.at(node, segs, msg)
		f.cause = causeType
		return []finding{f}
	case "const":
		return []finding{r.at(node, segs, fmt.Sprintf("want %s, got %s", quoteAny(sch["const"]), r.quoteValue(inst, node, secret)))}
	case "enum":
		opts, _ := sch["enum"].([]any)
		var names []string
		for _, o := range opts {
			names = append(names, fmt.Sprint(o))
		}
		what := "allowed here"
		if f, ok := formatOf(fmtName); ok {
			what = f.noun
		}
		return []finding{r.at(node, segs, fmt.Sprintf("%s is not %s; want one of %s", r.quoteValue(inst, node, secret), what, strings.Join(names, ", ")))}
	case "pattern", "maxLength", "minLength":
		if secret {
			return []finding{r.at(node, segs, r.secretMessage(segs, fmtName))}
		}
		if key, ok := inst.(string); ok && fmtName == "SecretKey" {
			// The proxy's rule says what exactly is wrong, in the words
			// the compiler uses for a Secret's own keys.
			if err := config.CheckSecretKey(key); err != nil {
				return []finding{r.at(node, segs, strings.TrimPrefix(err.Error(), config.ErrName.Error()+": "))}
			}
		}
		if f, ok := formatOf(fmtName); ok {
			return []finding{r.at(node, segs, fmt.Sprintf("%s is not %s: want %s", r.quoteValue(inst, node, false), f.noun, f.want))}
		}
		switch kw {
		case "maxLength":
			return []finding{r.at(node, segs, fmt.Sprintf("%s is longer than %v characters", r.quoteValue(inst, node, false), sch["maxLength"]))}
		case "minLength":
			return []finding{r.at(node, segs, fmt.Sprintf("%s is shorter than %v characters", r.quoteValue(inst, node, false), sch["minLength"]))}
		}
		return []finding{r.at(node, segs, fmt.Sprintf("%s does not match %s", r.quoteValue(inst, node, false), quoteAny(sch["pattern"])))}
	case "minItems":
		n, _ := sch["minItems"].(float64)
		if n == 1 {
			return []finding{r.at(node, segs, "want at least one item, got none")}
		}
		return []finding{r.at(node, segs, fmt.Sprintf("want at least %v items, got %d", n, lenOf(inst)))}
	case "not":
		if not, ok := sch["not"].(map[string]any); ok && not["const"] == "" {
			return []finding{r.at(node, segs, "must not be empty")}
		}
		return []finding{r.at(node, segs, "this value is not allowed here")}
	case "oneOf":
		return []finding{r.at(node, segs, "matches more than one of the allowed forms")}
	case "":
		return []finding{r.at(node, segs, "this field is not allowed here")}
	}
	// A keyword the generated schemas do not use; keep the library's
	// sentence rather than lose the problem.
	return []finding{r.at(node, segs, e.Message)}
}

// unknownFields reports each field of inst the schema does not declare,
// at the field's key.
func (r *reporter) unknownFields(sch map[string]any, segs []string, inst any) []finding {
	obj, _ := inst.(map[string]any)
	props, _ := sch["properties"].(map[string]any)
	known := make([]string, 0, len(props))
	for k := range props {
		known = append(known, k)
	}
	slices.Sort(known)
	parent := formatPath(r.typed(segs))
	var out []finding
	for _, f := range sortedKeys(obj) {
		if _, ok := props[f]; ok {
			continue
		}
		fs := append(slices.Clip(segs), f)
		_, key := r.nodes.lookup(fs)
		msg := "unknown field " + quote(f)
		s := diag.Suggest(f, known)
		if s != "" {
			msg += " (did you mean " + strconv.Quote(s) + "?)"
		} else if len(known) > 0 && len(known) <= 10 {
			msg += "; want one of " + strings.Join(known, ", ")
		}
		u := r.at(key, fs, msg)
		u.cause, u.field, u.parent, u.suggestion = causeUnknown, f, parent, s
		out = append(out, u)
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// isSecretValue reports whether segs names a value of a Secret's data or
// stringData: the one place a document holds a secret value, which no
// message may quote.
func (r *reporter) isSecretValue(segs []string) bool {
	return r.kind == KindSecret && len(segs) >= 2 && (segs[0] == "data" || segs[0] == "stringData")
}

func (r *reporter) secretMessage(segs []string, fmtName string) string {
	if fmtName == "Base64" {
		return fmt.Sprintf("the value of %s key %s is not valid base64", segs[0], quote(segs[1]))
	}
	return fmt.Sprintf("the value of %s key %s is not valid", segs[0], quote(segs[1]))
}

// quoteValue quotes a scalar the way the document wrote it, or says what
// it is when quoting it would leak a secret or it is not a scalar.
func (r *reporter) quoteValue(inst any, n *yaml.Node, secret bool) string {
	switch inst.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	if secret {
		return "the value"
	}
	if s, ok := inst.(string); ok {
		return quote(s)
	}
	if n != nil && n.Kind == yaml.ScalarNode {
		return quote(n.Value)
	}
	return quoteAny(inst)
}

// typed gives pointer segments their kind (key or index) by walking the
// converted value, so that a key that looks like a number stays a key.
func (r *reporter) typed(segs []string) []pathSeg {
	out := make([]pathSeg, 0, len(segs))
	cur := r.val
	for _, s := range segs {
		switch c := cur.(type) {
		case []any:
			i, err := strconv.Atoi(s)
			if err == nil && i >= 0 && i < len(c) {
				out = append(out, pathSeg{index: i})
				cur = c[i]
				continue
			}
			out = append(out, pathSeg{key: s, isKey: true})
			cur = nil
		case map[string]any:
			out = append(out, pathSeg{key: s, isKey: true})
			cur = c[s]
		default:
			out = append(out, pathSeg{key: s, isKey: true})
			cur = nil
		}
	}
	return out
}

// valueAt returns the converted value at segs, or nil.
func valueAt(v any, segs []string) any {
	for _, s := range segs {
		switch c := v.(type) {
		case map[string]any:
			v = c[s]
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

func lenOf(v any) int {
	if l, ok := v.([]any); ok {
		return len(l)
	}
	return 0
}

// rawAt returns the part of a raw schema document at a JSON pointer.
func rawAt(raw map[string]any, ptr string) any {
	var cur any = raw
	for _, s := range pointerSegs(ptr) {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[s]
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// splitKeyword splits an absolute keyword location into the pointer of
// the schema holding the keyword and the keyword itself.
func splitKeyword(loc string) (schemaPtr, keyword string) {
	_, frag, _ := strings.Cut(loc, "#")
	i := strings.LastIndexByte(frag, '/')
	if i < 0 {
		return frag, ""
	}
	return frag[:i], unescapePointer(frag[i+1:])
}

// formatName returns the $defs name of a schema pointer that is exactly
// one definition (/$defs/Host), or "".
func formatName(schemaPtr string) string {
	name, ok := strings.CutPrefix(schemaPtr, "/$defs/")
	if !ok || strings.Contains(name, "/") {
		return ""
	}
	return unescapePointer(name)
}

// pointerSegs splits a JSON pointer into unescaped segments.
func pointerSegs(ptr string) []string {
	if ptr == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, p := range parts {
		parts[i] = unescapePointer(p)
	}
	return parts
}

func unescapePointer(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
}

// format is how messages describe one of the named string formats.
type format struct {
	noun string // "a host"
	want string // what a valid value looks like
}

// formatOf describes the formats the CUE names, by definition name.
func formatOf(name string) (format, bool) {
	switch name {
	case "Host":
		return format{"a host", "a lowercase DNS name without scheme, port or path"}, true
	case "HeaderName":
		return format{"a header name", "an RFC 9110 token such as Authorization, without spaces or colons"}, true
	case "EnvName":
		return format{"an environment variable name", "letters, digits and underscores, not starting with a digit"}, true
	case "PathPrefix":
		return format{"a path prefix", "an absolute path starting with /, without query or fragment"}, true
	case "PathPattern":
		return format{"a path pattern", "an absolute path whose segments may be * (one segment) and whose last may be ** (the rest); with encodedSlash: segment, a segment may be pieces joined by %2F, each a literal or *"}, true
	case "AbsPath":
		return format{"an absolute path", "a path starting with /"}, true
	case "Method":
		return format{"an HTTP method", ""}, true
	case "DNSSubdomain":
		return format{"a Kubernetes name", "at most 253 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"}, true
	case "DNSLabel":
		return format{"a DNS label", "at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"}, true
	case "SecretKey":
		return format{"a Secret key", "letters, digits, '-', '_' and '.', not \".\" and not starting with \"..\" (the kubelet's own names)"}, true
	case "Base64":
		return format{"base64", "standard base64"}, true
	case "GitHubOwner":
		return format{"a GitHub owner", "an account name, or an account and a repository joined by '/', of letters, digits, '-', '_' and '.'"}, true
	}
	return format{}, false
}

// typeWant names a JSON Schema type the way a YAML author thinks of it.
func typeWant(t any) string {
	names := func(s string) string {
		switch s {
		case "object":
			return "a mapping"
		case "array":
			return "a list"
		case "string":
			return "a string"
		case "boolean":
			return "true or false"
		case "number":
			return "a number"
		case "integer":
			return "an integer"
		case "null":
			return "null"
		}
		return s
	}
	switch t := t.(type) {
	case string:
		return names(t)
	case []any:
		var out []string
		for _, x := range t {
			s, _ := x.(string)
			out = append(out, names(s))
		}
		return strings.Join(out, " or ")
	}
	return "another type"
}

// yaml11Bools are the words YAML 1.1 (kubectl's YAML) reads as booleans
// and YAML 1.2 (keyhole's, and kustomize's) as strings.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
}

// yaml11Bool explains a boolean written as an unquoted yes, no, on or off:
// the same file applied with kubectl reads it as a boolean, so the user
// meant one.
func yaml11Bool(want any, n *yaml.Node) string {
	if want != "boolean" || n == nil || n.Kind != yaml.ScalarNode || n.Style != 0 {
		return ""
	}
	b, ok := yaml11Bools[n.Value]
	if !ok {
		return ""
	}
	return fmt.Sprintf(": YAML 1.2 reads an unquoted %s as a string (kubectl, with YAML 1.1, as %t); write %t", n.Value, b, b)
}

// typeGot names the type of a converted value.
func typeGot(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case nil:
		return "null"
	}
	return "another type"
}

// maxQuoted is how many bytes of a value a message quotes.
const maxQuoted = 64

// quote quotes s, cut to at most maxQuoted bytes on a rune boundary.
func quote(s string) string {
	if len(s) > maxQuoted {
		cut := maxQuoted - len("...")
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return strconv.Quote(s)
}

func quoteAny(v any) string {
	if s, ok := v.(string); ok {
		return quote(s)
	}
	return quote(fmt.Sprint(v))
}

// unquotedTemplate reports whether n is what YAML makes of a template
// written without quotes, {{ .token }}: a flow mapping whose one key is
// a flow mapping of one scalar key and no value; and the template as it
// was meant.
func unquotedTemplate(n *yaml.Node) (string, bool) {
	if n == nil || n.Kind != yaml.MappingNode || n.Style&yaml.FlowStyle == 0 || len(n.Content) != 2 {
		return "", false
	}
	k, v := n.Content[0], n.Content[1]
	if k.Kind != yaml.MappingNode || k.Style&yaml.FlowStyle == 0 || len(k.Content) != 2 || !isNull(v) {
		return "", false
	}
	ik, iv := k.Content[0], k.Content[1]
	if ik.Kind != yaml.ScalarNode || !isNull(iv) {
		return "", false
	}
	return "{{ " + ik.Value + " }}", true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}
