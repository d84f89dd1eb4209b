package kustbuild

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Keeping Secret values out of kustomize's messages, which quote the
// inputs they fail on.

// Redact takes out of a kustomize error message every value it could
// quote from a Secret: kustomize's errors echo their input (an invalid
// secretGenerator literal is quoted whole), and no output of keyhole may
// hold a Secret value. The values are those of data, stringData and
// encryptedData fields and of generator literals in the YAML files read,
// every line (and every value after "=") of the files that are not YAML
// mappings, such as generators' env files, and every file read whole (a
// generator's files: source). Each is matched in plain and base64 form,
// escaped as %q and YAML's single quotes escape it, without the quotes a
// literal may wrap it in, and line by line when it has several lines.
// Values shorter than four bytes are left, as they would match ordinary
// words of the message. A byte slice the message prints in Go's decimal
// form goes too, whatever it holds (see redactByteDumps).
func Redact(msg string, read map[string][]byte) string {
	msg = redactByteDumps(msg)
	var values []string
	var add func(v string)
	add = func(v string) {
		v = strings.TrimSpace(v)
		if len(v) < 4 {
			return
		}
		// An error that prints a node as YAML folds a multi-line value
		// (a PEM key) into a block or quoted scalar, one line apart from
		// the next: each line is a value too.
		if strings.Contains(v, "\n") {
			for line := range strings.SplitSeq(v, "\n") {
				add(line)
			}
		}
		// kustomize takes a generator literal's value out of the quotes
		// around it (key="value"), and stores that.
		if len(v) > 2 && v[0] == v[len(v)-1] && (v[0] == '"' || v[0] == '\'') {
			add(v[1 : len(v)-1])
		}
		// YAML's single-quoted form doubles a quote.
		if strings.Contains(v, "'") {
			values = append(values, strings.ReplaceAll(v, "'", "''"))
		}
		values = append(values, v, base64.StdEncoding.EncodeToString([]byte(v)))
		// kustomize wraps some errors with %q, once or twice over: a
		// value with a quote, a backslash or a control character is then
		// in the message escaped.
		for q, i := v, 0; i < 2; i++ {
			next := quoted(q)
			if next == q {
				break
			}
			values = append(values, next)
			q = next
		}
		if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) >= 4 {
			values = append(values, string(b))
		}
	}
	addLines := func(data []byte) {
		for _, line := range strings.Split(string(data), "\n") {
			add(line)
			if _, v, ok := strings.Cut(line, "="); ok {
				add(v)
			}
		}
	}
	for _, data := range read {
		// A secretGenerator's files: source is the value whole, and the
		// generated Secret holds it in base64, whatever the file holds
		// (a YAML mapping of credentials too).
		if len(data) >= 4 {
			values = append(values, base64.StdEncoding.EncodeToString(data))
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		mappings := 0
		for {
			var doc yaml.Node
			if err := DecodeYAML(dec, &doc); err != nil {
				break
			}
			if len(doc.Content) > 0 && doc.Content[0].Kind == yaml.MappingNode {
				mappings++
				secretScalars(doc.Content[0], false, add)
			}
		}
		if mappings == 0 {
			addLines(data)
		}
	}
	// Longest first, so that a value is never half-replaced by a shorter
	// one it contains.
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	for _, v := range values {
		msg = strings.ReplaceAll(msg, v, Redacted)
	}
	return msg
}

// quoted is s as %q writes it, without the enclosing quotes.
func quoted(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// redactByteDumps replaces each byte slice that msg prints as Go's %v
// does, "[116 111 107 ...]", with Redacted. kustomize prints an env file's
// line that way when it is not UTF-8, and the line holds a Secret value in
// a form that no plain or base64 match finds. Three numbers or fewer are
// kept: like short values, they are more likely indices than a secret.
func redactByteDumps(msg string) string {
	var out strings.Builder
	for {
		open := strings.IndexByte(msg, '[')
		if open < 0 {
			break
		}
		end := strings.IndexByte(msg[open:], ']')
		if end < 0 {
			break
		}
		if isByteDump(msg[open+1 : open+end]) {
			out.WriteString(msg[:open])
			out.WriteString(Redacted)
			msg = msg[open+end+1:]
			continue
		}
		out.WriteString(msg[:open+1])
		msg = msg[open+1:]
	}
	out.WriteString(msg)
	return out.String()
}

// isByteDump reports whether s is four or more decimal numbers of 0 to
// 255 separated by single spaces: the inside of a printed []byte.
func isByteDump(s string) bool {
	fields := strings.Split(s, " ")
	if len(fields) < 4 {
		return false
	}
	for _, f := range fields {
		if len(f) == 0 || len(f) > 3 {
			return false
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n > 255 || f[0] == '+' || f[0] == '-' {
			return false
		}
	}
	return true
}

// secretScalars calls add with every scalar under a data, stringData,
// encryptedData or literals field of n (in is true below one), and with
// the value part of each literal.
func secretScalars(n *yaml.Node, in bool, add func(string)) {
	switch n.Kind {
	case yaml.ScalarNode:
		if in {
			add(n.Value)
			if _, v, ok := strings.Cut(n.Value, "="); ok {
				add(v)
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch n.Content[i].Value {
			case "data", "stringData", "encryptedData", "literals":
				secretScalars(n.Content[i+1], true, add)
			default:
				secretScalars(n.Content[i+1], in, add)
			}
		}
	default:
		for _, c := range n.Content {
			secretScalars(c, in, add)
		}
	}
}
