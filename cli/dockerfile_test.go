package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerInstruction is one instruction of a Dockerfile, continuation
// lines joined.
type dockerInstruction struct{ op, args string }

func readDockerfile(t *testing.T, file string) []dockerInstruction {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []dockerInstruction
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		op, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstruction{op: strings.ToUpper(op), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// TestDockerfiles keeps each binary's Dockerfile what docs/action.md
// says: a multi-stage build of a static binary stamped by
// scripts/version-ldflags.sh, on a base with CA roots, run as a non-root
// user, with the binary as its entrypoint.
func TestDockerfiles(t *testing.T) {
	for _, bin := range []string{"keyhole", "keyhole-proxy"} {
		t.Run(bin, func(t *testing.T) {
			ins := readDockerfile(t, filepath.Join("../cmd", bin, "Dockerfile"))
			var froms []string
			var user, entrypoint, build string
			copied := false
			for _, in := range ins {
				switch in.op {
				case "FROM":
					froms = append(froms, in.args)
				case "USER":
					user = in.args
				case "ENTRYPOINT":
					entrypoint = in.args
				case "RUN":
					if strings.Contains(in.args, "go build") {
						build = in.args
					}
				case "COPY":
					if strings.HasPrefix(in.args, "--from=build /out/"+bin+" ") {
						copied = true
					}
				}
			}
			if len(froms) != 2 || !strings.HasSuffix(froms[0], " AS build") {
				t.Errorf("stages %q: want a build stage and a final one", froms)
			}
			if len(froms) > 0 && !regexp.MustCompile(`^gcr\.io/distroless/static-debian12:(debug-)?nonroot$`).MatchString(froms[len(froms)-1]) {
				t.Errorf("final base %q: want distroless static (CA roots, no libc)", froms[len(froms)-1])
			}
			if !regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*$`).MatchString(user) {
				t.Errorf("USER %q: want a numeric non-root user and group", user)
			}
			for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "scripts/version-ldflags.sh", "KEYHOLE_VERSION=\"$VERSION\"", "KEYHOLE_REVISION=\"$REVISION\"", "./cmd/" + bin} {
				if !strings.Contains(build, want) {
					t.Errorf("the go build step does not hold %q: %s", want, build)
				}
			}
			if !copied {
				t.Errorf("the final stage does not copy /out/%s from the build stage", bin)
			}
			if entrypoint != `["/usr/local/bin/`+bin+`"]` {
				t.Errorf("ENTRYPOINT %s", entrypoint)
			}
		})
	}
}
