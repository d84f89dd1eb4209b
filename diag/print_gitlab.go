package diag

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strconv"
	"strings"
)

// gitlabPrinter writes a GitLab code quality report: a JSON array of
// issues, the subset of the Code Climate issue format that GitLab reads
// from a job's artifacts:reports:codequality file
// (https://docs.gitlab.com/ci/testing/code_quality/, "Code Quality report
// format"): description, check_name, fingerprint, severity and
// location.path with location.lines.begin. GitLab shows each issue in the
// merge request's widget and compares fingerprints between the source and
// target branches, so a fingerprint stays the same when an edit moves the
// finding to another line. Suppressed diagnostics and those below
// Options.MinSeverity are left out; an empty report is "[]".
type gitlabPrinter struct{ o Options }

type (
	gitlabIssue struct {
		Description string         `json:"description"`
		CheckName   string         `json:"check_name"`
		Fingerprint string         `json:"fingerprint"`
		Severity    string         `json:"severity"`
		Location    gitlabLocation `json:"location"`
	}
	gitlabLocation struct {
		Path  string      `json:"path"`
		Lines gitlabLines `json:"lines"`
	}
	gitlabLines struct {
		Begin int `json:"begin"`
	}
)

// gitlabSeverity maps a severity onto GitLab's scale (info, minor, major,
// critical, blocker): an error is major, a warning minor. keyhole has no
// finding that is more than an error, so critical and blocker are not
// used.
func gitlabSeverity(s Severity) string {
	switch s {
	case Error:
		return "major"
	case Warning:
		return "minor"
	}
	return "info"
}

func (p gitlabPrinter) Print(w io.Writer, ds List, _ Summary, _ map[string]Rule) error {
	shown, _ := atLeast(sorted(ds), p.o.MinSeverity)
	issues := make([]gitlabIssue, 0, len(shown))
	seen := map[string]int{}
	for _, d := range shown {
		if d.Suppressed != "" {
			continue
		}
		file := p.o.repoPath(d.Pos.File)
		if file == "" || file == "-" {
			// An issue needs a path: a finding about no file (or
			// standard input) is placed at the repository itself.
			file = "."
		}
		issues = append(issues, gitlabIssue{
			Description: d.Message,
			CheckName:   d.Code,
			Fingerprint: gitlabFingerprint(d.Code, file, d.Message, seen),
			Severity:    gitlabSeverity(d.Severity),
			Location:    gitlabLocation{Path: file, Lines: gitlabLines{Begin: max(d.Pos.Line, 1)}},
		})
	}
	return safely(w, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(issues)
	})
}

// gitlabFingerprint identifies an issue by its code, file and message,
// never its line, so an edit above it keeps it the same issue. Issues
// that share all three are told apart by their order in the file (the
// second is "…:2" before hashing), since GitLab keeps one issue a
// fingerprint.
func gitlabFingerprint(code, file, message string, seen map[string]int) string {
	key := strings.Join([]string{code, file, message}, "\x00")
	seen[key]++
	if n := seen[key]; n > 1 {
		key += "\x00" + strconv.Itoa(n)
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}
