package diag

import (
	"bytes"
	"io"
	"strings"
	"unicode"
)

// A CI runner reads every line a job prints, on standard output and
// standard error alike, for commands: GitHub Actions' runner takes a line
// that starts with "::" once leading white space is trimmed
// ("::set-output name=x::value", "::error ...", "::stop-commands::t"), and
// a line that holds "##[" anywhere (its older form, still parsed);
// Azure Pipelines takes "##vso[" anywhere. The runner compares with the
// culture's rules, which pass over format characters such as a soft
// hyphen or a zero-width space, so ":\u00ad:" starts a command too.
//
// A file name, an object name or a value quoted in a message is chosen by
// whoever wrote the repository, and a pull request's author is anyone.
// SafeLines and LogWriter make sure that nothing keyhole prints is read as
// a command it did not write itself: the github format's annotations are
// the only commands keyhole writes.

// IsCommand reports whether a CI runner could read line (one line, without
// its line break) as a workflow command.
func IsCommand(line string) bool {
	skel := strings.Map(func(r rune) rune {
		if ignorable(r) {
			return -1
		}
		return r
	}, line)
	skel = strings.TrimLeftFunc(skel, unicode.IsSpace)
	if strings.HasPrefix(skel, "::") {
		return true
	}
	return oldCommand(skel) >= 0
}

// oldCommand is the index of the first "##[" or "##vso[" in s (any case),
// -1 when there is none.
func oldCommand(s string) int {
	for i := 0; ; {
		j := strings.Index(s[i:], "##")
		if j < 0 {
			return -1
		}
		k := i + j + 2
		if strings.HasPrefix(s[k:], "[") || len(s) >= k+4 && strings.EqualFold(s[k:k+4], "vso[") {
			return i + j
		}
		i = k - 1
	}
}

// ignorable reports whether a runner's comparison may pass over r: format
// characters, variation selectors and the other default-ignorable code
// points.
func ignorable(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

// SafeLines returns s, text of one or more lines, with every line a runner
// would read as a command (see IsCommand) written so that it is not one:
// its ignorable characters escaped as \uXXXX, a leading ':' as \u003a,
// and the '[' of "##[" as \u005b. Lines are split where a runner splits
// them, at '\n' and '\r'. Other lines are unchanged, and so is JSON: the
// escapes are JSON's own, and none of the patterns can occur outside a
// JSON string.
func SafeLines(s string) string {
	if !strings.Contains(s, ":") && !strings.Contains(s, "#") {
		return s
	}
	// Most output has no such line: it is returned as it is, and only a
	// line that changes starts a copy.
	var b strings.Builder
	copied := false
	for start := 0; start < len(s); {
		end := strings.IndexAny(s[start:], "\r\n")
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		line := s[start:end]
		if safe := safeLine(line); safe != line || copied {
			if !copied {
				b.WriteString(s[:start])
				copied = true
			}
			b.WriteString(safe)
			if end < len(s) {
				b.WriteByte(s[end])
			}
		}
		start = end + 1
	}
	if !copied {
		return s
	}
	return b.String()
}

// safeLine is SafeLines for one line.
func safeLine(line string) string {
	rest := strings.TrimLeftFunc(line, func(r rune) bool { return unicode.IsSpace(r) || ignorable(r) })
	if !strings.HasPrefix(rest, ":") && !strings.Contains(line, "#") || !IsCommand(line) {
		return line
	}
	line = escapeRunes(line, ignorable)
	rest = strings.TrimLeftFunc(line, unicode.IsSpace)
	if strings.HasPrefix(rest, ":") {
		line = line[:len(line)-len(rest)] + `\u003a` + rest[1:]
	}
	var b strings.Builder
	for {
		i := oldCommand(line)
		if i < 0 {
			break
		}
		k := i + strings.IndexByte(line[i:], '[')
		b.WriteString(line[:k])
		b.WriteString(`\u005b`)
		line = line[k+1:]
	}
	b.WriteString(line)
	return b.String()
}

// LogWriter writes to an underlying writer line by line, each line made
// safe by SafeLines: what any part of keyhole prints to a terminal or a CI
// log goes through one, so that no line can be taken for a workflow
// command whatever a file or object is named. A line is held until its
// line break is written or Flush is called.
type LogWriter struct {
	w       io.Writer
	pending []byte
}

// NewLogWriter returns a LogWriter that writes to w.
func NewLogWriter(w io.Writer) *LogWriter { return &LogWriter{w: w} }

// Write writes the complete lines of what it has been given so far.
func (l *LogWriter) Write(p []byte) (int, error) {
	l.pending = append(l.pending, p...)
	i := bytes.LastIndexAny(l.pending, "\r\n")
	if i < 0 {
		return len(p), nil
	}
	out := SafeLines(string(l.pending[:i+1]))
	l.pending = append(l.pending[:0], l.pending[i+1:]...)
	if _, err := io.WriteString(l.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a last line that has no line break.
func (l *LogWriter) Flush() error {
	if len(l.pending) == 0 {
		return nil
	}
	out := SafeLines(string(l.pending))
	l.pending = l.pending[:0]
	_, err := io.WriteString(l.w, out)
	return err
}
