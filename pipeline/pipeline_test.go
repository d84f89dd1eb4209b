package pipeline

import (
	"bytes"
	"errors"
	"testing"

	"keyhole.dev/keyhole/render"
)

// TestCheckRender checks and renders an example as keyhole render does:
// no errors, every unit rendered, one stream and one layout of its files.
func TestCheckRender(t *testing.T) {
	c, err := Check(Options{Paths: []string{"../examples/github-acme"}, DefaultNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Documents == 0 || c.Result.Diagnostics.HasErrors() {
		t.Fatalf("%d documents, diagnostics:\n%v", c.Documents, c.Result.Diagnostics)
	}
	renderer, err := render.ForTarget(render.TargetKubernetes)
	if err != nil {
		t.Fatal(err)
	}
	units, err := Render(&c, render.Options{DefaultNamespace: "default"}, renderer, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(units) == 0 || len(Layout(units)) == 0 {
		t.Fatalf("%d units rendered, no files", len(units))
	}
	s, err := Stream(units)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	if err := WriteStream(&w, units); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s, w.Bytes()) {
		t.Error("Stream and WriteStream differ")
	}
	if _, err := Render(&c, render.Options{}, renderer, "no/such/unit"); !errors.Is(err, ErrUsage) {
		t.Errorf("a unit that does not exist: %v, want ErrUsage", err)
	}
}
