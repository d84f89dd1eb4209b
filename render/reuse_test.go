package render

import (
	"reflect"
	"sync"
	"testing"

	"keyhole.dev/keyhole/compiler"
)

// TestReuse renders a plan, then a changed one with the same Reuse: the
// files are those a render without it gives, and only the sandboxes equal
// to the first render's, in the same directory and with the same options,
// are reused.
func TestReuse(t *testing.T) {
	base := Options{DefaultSandboxImage: "ghcr.io/acme/sandbox:1"}
	tests := map[string]struct {
		change func(p *compiler.Plan, o *Options)
		hits   int
	}{
		"unchanged": {
			change: func(*compiler.Plan, *Options) {},
			hits:   2,
		},
		"one header": {
			change: func(p *compiler.Plan, _ *Options) {
				p.Sandboxes[0].Proxy.Hosts[0].Inject.Header.Name = "X-Api-Key"
			},
			hits: 1,
		},
		"one rule": {
			change: func(p *compiler.Plan, _ *Options) {
				p.Sandboxes[0].Proxy.Hosts[0].Rules[1].Methods[0] = "PUT"
			},
			hits: 1,
		},
		"one source position": {
			change: func(p *compiler.Plan, _ *Options) {
				p.Sandboxes[1].Pos.Line++
			},
			hits: 1,
		},
		"renamed": {
			change: func(p *compiler.Plan, _ *Options) {
				p.Sandboxes[1].Name = "triage-2"
				p.Sandboxes[1].Proxy.Sandbox.Name = "triage-2"
			},
			hits: 1,
		},
		"removed": {
			change: func(p *compiler.Plan, _ *Options) {
				p.Sandboxes = p.Sandboxes[:1]
			},
			hits: 1,
		},
		"proxy image": {
			change: func(_ *compiler.Plan, o *Options) {
				o.ProxyImage = "ghcr.io/keyhole-dev/keyhole-proxy:v9"
			},
		},
		"default namespace": {
			change: func(_ *compiler.Plan, o *Options) {
				o.DefaultNamespace = "elsewhere"
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := NewReuse()
			opts := base
			opts.Reuse = r
			if _, err := Render(twoSandboxPlan(), opts); err != nil {
				t.Fatal(err)
			}
			if r.Hits() != 0 {
				t.Fatalf("the first render reused %d sandboxes", r.Hits())
			}
			p, o := twoSandboxPlan(), base
			tc.change(&p, &o)
			want, err := Render(p, o)
			if err != nil {
				t.Fatal(err)
			}
			o.Reuse = r
			got, err := Render(p, o)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("with reuse:\n%v\nwithout:\n%v", got, want)
			}
			if r.Hits() != tc.hits {
				t.Errorf("reused %d sandboxes, want %d", r.Hits(), tc.hits)
			}
		})
	}
}

// TestReuseAtOnce renders the same plan twice at the same time, as the two
// sides of a diff of one commit do: whichever starts second finds the
// first under way and waits for it, so every sandbox is rendered once.
// Both renders give what a render without Reuse gives.
func TestReuseAtOnce(t *testing.T) {
	want, err := Render(twoSandboxPlan(), Options{DefaultSandboxImage: "ghcr.io/acme/sandbox:1"})
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		r := NewReuse()
		var got [2][]File
		var errs [2]error
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				got[i], errs[i] = Render(twoSandboxPlan(), Options{DefaultSandboxImage: "ghcr.io/acme/sandbox:1", Reuse: r})
			})
		}
		wg.Wait()
		for i := range got {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if !reflect.DeepEqual(got[i], want) {
				t.Fatalf("render %d with reuse:\n%v\nwithout:\n%v", i, got[i], want)
			}
		}
		if r.Hits() != len(twoSandboxPlan().Sandboxes) {
			t.Fatalf("two renders at once reused %d sandboxes, want %d", r.Hits(), len(twoSandboxPlan().Sandboxes))
		}
	}
}
