package render

import (
	"bytes"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/proxy/config"
)

// FuzzRender feeds arbitrary names and values through the Plan. Render
// must never panic; when it accepts a Plan, every file must read back: the
// .env lines as NAME='value', proxy.json strictly into config.Config, and
// every manifest as YAML whose kind and name are what the file is called.
func FuzzRender(f *testing.F) {
	f.Add("support-workspace", "agents", "GH_TOKEN", "omnia-injected-github-acme", "Bearer {{ .token }}", "acme-github-token", ".internal")
	f.Add("a", "", "X", "", "${X}", "s.t", "")
	f.Add("a", "b", "1X", "a'b", "\n", "", "a,b")
	f.Fuzz(func(t *testing.T, name, ns, envName, envValue, header, secret, noProxy string) {
		p := testPlan()
		sb := &p.Sandboxes[0]
		sb.Name, sb.Namespace = name, ns
		sb.Proxy.Sandbox = config.SandboxRef{Namespace: ns, Name: name}
		sb.Env = []compiler.EnvVar{{Name: envName, Value: envValue, Connection: "c"}}
		sb.Proxy.Hosts[0].Inject.Header.Value = header
		sb.Proxy.Hosts[0].Inject.Secret = secret
		var opts Options
		if noProxy != "" {
			opts.NoProxy = []string{noProxy}
		}
		files, err := Render(p, opts)
		if err != nil {
			return
		}
		for _, f := range files {
			switch {
			case path.Base(f.Path) == ".env":
				env := parseDotEnv(t, f.Data)
				if env[envName] != envValue {
					t.Fatalf(".env %s = %q, want %q", envName, env[envName], envValue)
				}
			case path.Base(f.Path) == "proxy.json":
				dec := json.NewDecoder(bytes.NewReader(f.Data))
				dec.DisallowUnknownFields()
				var c config.Config
				if err := dec.Decode(&c); err != nil {
					t.Fatalf("proxy.json: %v", err)
				}
				if c.Hosts[0].Inject.Header.Value != header {
					t.Fatalf("header value %q became %q", header, c.Hosts[0].Inject.Header.Value)
				}
			case strings.HasSuffix(f.Path, ".yaml"):
				var o obj
				if err := yaml.Unmarshal(f.Data, &o); err != nil {
					t.Fatalf("%s: %v", f.Path, err)
				}
				if f.Path != "kustomization.yaml" && path.Base(f.Path) != manifestName(o) {
					t.Fatalf("%s holds %s", f.Path, manifestName(o))
				}
			}
		}
		if _, err := Stream(files); err != nil {
			t.Fatalf("Stream: %v", err)
		}
	})
}

// FuzzCheckFiles: a path checkFiles accepts stays inside the output
// directory whatever it holds.
func FuzzCheckFiles(f *testing.F) {
	for _, s := range []string{"a/b.yaml", "../x", "/etc/passwd", "a/../../b", ".", "", `a\..\b`, ".keyhole-render", "a//b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if checkFiles([]File{{Path: p}}) != nil {
			return
		}
		joined := path.Join("/root/out", p)
		if !strings.HasPrefix(joined, "/root/out/") {
			t.Fatalf("accepted %q, which resolves to %q", p, joined)
		}
	})
}
