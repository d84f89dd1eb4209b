package cli

import (
	"fmt"

	"keyhole.dev/keyhole/schema"
)

func runSchema(e *env, args []string) int {
	fs := newFlags(e, "schema", "[--cue | --json-schema | --crds]")
	cue := fs.Bool("cue", false, "print the CUE schemas (the default)")
	js := fs.Bool("json-schema", false, "print the JSON Schema generated from the CUE")
	crds := fs.Bool("crds", false, "print the CRDs of the kinds keyhole owns (Connection, SandboxClass), generated from the CUE; the operator ships those of AgentRuntime and ToolRegistry")
	rest, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	n := 0
	for _, b := range []bool{*cue, *js, *crds} {
		if b {
			n++
		}
	}
	if n > 1 || len(rest) > 0 {
		fmt.Fprintln(e.stderr, "keyhole schema: give at most one of --cue, --json-schema and --crds, and no paths")
		return exitUsage
	}
	var out []byte
	switch {
	case *js:
		out = schema.JSONSchema()
	case *crds:
		out = schema.CRDs()
	default:
		out = schema.CUE()
	}
	if _, err := e.raw().Write(out); err != nil {
		return fail(e, "schema", err)
	}
	return exitOK
}
