// Command kubeconform writes keyhole's JSON Schema (the one `keyhole schema
// --json-schema` prints, which `keyhole check` validates with) as one file
// per kind, <kind>.json in lower case, which is how kubeconform's
// -schema-location '{{ .ResourceKind }}' template finds them:
//
//	go run ./bench/kubeconform -o DIR
//
// bench/kubeconform.sh uses it to run kubeconform and keyhole check on the
// same documents, against the same schemas.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"keyhole.dev/keyhole/schema"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// kinds are the kinds of keyhole's schema that carry a kind field, the
// ones kubeconform can pick a schema for (agent.yaml files have none).
var kinds = []string{"Connection", "SandboxClass", "AgentRuntime", "ToolRegistry", "Secret"}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("kubeconform", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "`directory` to write the schemas into")
	if err := fs.Parse(args); err != nil || *out == "" {
		fmt.Fprintln(stderr, "usage: go run ./bench/kubeconform -o DIR")
		return 2
	}
	if err := write(*out); err != nil {
		fmt.Fprintf(stderr, "kubeconform: %v\n", err)
		return 1
	}
	return 0
}

func write(dir string) error {
	var all struct {
		Schema string                     `json:"$schema"`
		Defs   map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(schema.JSONSchema(), &all); err != nil {
		return fmt.Errorf("reading keyhole's JSON Schema: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, k := range kinds {
		if _, ok := all.Defs[k]; !ok {
			return fmt.Errorf("keyhole's JSON Schema has no %s", k)
		}
		b, err := json.Marshal(map[string]any{"$schema": all.Schema, "$ref": "#/$defs/" + k, "$defs": all.Defs})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, strings.ToLower(k)+".json"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
