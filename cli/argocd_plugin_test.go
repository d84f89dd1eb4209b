package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// argoPluginConfig is what TestArgoCDPluginGenerate reads of
// examples/argocd/plugin.yaml.
type argoPluginConfig struct {
	Metadata struct{ Name string }
	Spec     struct {
		Version  string
		Discover any
		Generate struct{ Command, Args []string }
	}
}

// TestArgoCDPluginGenerate runs the generate command of
// examples/argocd/plugin.yaml as Argo CD's cmp-server runs it
// (cmpserver/plugin/plugin.go, generateManifest and runCommand): command
// and args in the Application's source path within the whole repository,
// with the environment the repo server gives an Application
// (reposerver/repository/repository.go, newEnv) and a plugin env entry,
// prefixed ARGOCD_ENV_. Each Application of examples/argocd-repo gets
// exactly its own unit, the bytes render --unit prints at the root.
func TestArgoCDPluginGenerate(t *testing.T) {
	b, err := os.ReadFile("../examples/argocd/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg argoPluginConfig
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	// Argo CD refuses a named plugin whose discovery rule does not match
	// the path (util/app/discovery, cmpSupports): an overlay matches no
	// rule that looks for keyhole's files.
	if cfg.Spec.Discover != nil {
		t.Errorf("plugin.yaml has a discover rule: Argo CD then refuses the plugin for a path it does not match")
	}
	if got, want := cfg.Metadata.Name+"-"+cfg.Spec.Version, "keyhole-v0.1.0"; got != want {
		t.Errorf("the plugin is %s, the examples name %s", got, want)
	}
	argv := append(append([]string{}, cfg.Spec.Generate.Command...), cfg.Spec.Generate.Args...)
	if len(argv) < 2 || argv[0] != "keyhole" {
		t.Fatalf("generate runs %q, not keyhole", argv)
	}
	repo := t.TempDir()
	if err := copyTree("../examples/argocd-repo", repo); err != nil {
		t.Fatal(err)
	}
	for _, envName := range []string{"staging", "prod"} {
		t.Run(envName, func(t *testing.T) {
			app := "agents-" + envName
			t.Chdir(repo)
			code, want, errOut := runIn(t, "render", "--stdout", "--unit", "argocd:argocd/"+app+"#1", ".")
			if code != exitOK {
				t.Fatalf("render --unit: exit %d\n%s", code, errOut)
			}
			t.Chdir(filepath.Join(repo, "apps", envName))
			vars := map[string]string{
				"ARGOCD_APP_NAME":                   app,
				"ARGOCD_APP_NAMESPACE":              "agents-" + envName,
				"ARGOCD_APP_PROJECT_NAME":           "default",
				"ARGOCD_APP_REVISION":               "0123456789abcdef0123456789abcdef01234567",
				"ARGOCD_APP_REVISION_SHORT":         "0123456",
				"ARGOCD_APP_REVISION_SHORT_8":       "01234567",
				"ARGOCD_APP_SOURCE_REPO_URL":        "https://gitlab.acme.internal/platform/agents-config.git",
				"ARGOCD_APP_SOURCE_PATH":            "apps/" + envName,
				"ARGOCD_APP_SOURCE_TARGET_REVISION": "main",
				"ARGOCD_ENV_TEAM":                   "platform",
			}
			var stdout, stderr bytes.Buffer
			code = run(&env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, env: func(k string) string { return vars[k] }}, argv[1:])
			if code != exitOK {
				t.Fatalf("%s: exit %d\n%s", strings.Join(argv, " "), code, stderr.String())
			}
			if stdout.String() != want {
				t.Errorf("the plugin printed another stream than render --unit argocd:argocd/%s#1 at the root", app)
			}
			dec := yaml.NewDecoder(&stdout)
			objects := 0
			for {
				var o struct {
					Kind     string
					Metadata struct{ Name, Namespace string }
				}
				if err := dec.Decode(&o); err != nil {
					break
				}
				objects++
				if o.Kind == "Secret" || !strings.HasPrefix(o.Metadata.Name, envName+"-") || o.Metadata.Namespace != "agents-"+envName {
					t.Errorf("%s %s/%s is not the %s environment's", o.Kind, o.Metadata.Namespace, o.Metadata.Name, envName)
				}
			}
			if objects < 5 {
				t.Errorf("%d objects rendered, want the sandbox and its proxy's", objects)
			}
		})
	}
}
