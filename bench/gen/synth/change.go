package synth

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// widenedPulls is the POST prefix each shape-2 Connection writes.
var widenedPulls = regexp.MustCompile(`pathPrefixes: \[/repos/team/widgets-\d+/pulls\]`)

// Change makes, in a repository Generate wrote at dir, the pull request
// keyhole diff's tests review: each shape-2 Connection's POST prefix
// widens to /repos/team, each shape-3 one stops allowing DELETE, and
// agent (nil for none) edits every agent.yaml. It rewrites the files it
// changes, leaves .git alone, and returns how many files it changed.
func Change(dir string, agent func(string) string) (changed int, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := widenedPulls.ReplaceAllString(string(b), "pathPrefixes: [/repos/team]")
		s = strings.ReplaceAll(s, "methods: [PUT, PATCH, DELETE]", "methods: [PUT, PATCH]")
		if agent != nil && d.Name() == "agent.yaml" {
			s = agent(s)
		}
		if s == string(b) {
			return nil
		}
		changed++
		return os.WriteFile(p, []byte(s), 0o644)
	})
	return changed, err
}
