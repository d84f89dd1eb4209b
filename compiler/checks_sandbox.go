package compiler

import (
	"cmp"
	"fmt"

	"keyhole.dev/keyhole/diag"
)

// Codes of the checks on the sandboxes a unit's plan would hold, as
// render names and builds them: what render or diff would refuse, found
// by check with positions.
const (
	codeSandboxNameCollision = "SandboxNameCollision"
	codeSandboxImageMissing  = "SandboxImageMissing"
)

// sandboxSource is what declares one sandbox: an AgentRuntime's or
// ToolRegistry's first binding to a SandboxClass, or an agent with a
// sandbox, and the field that names it.
type sandboxSource struct {
	it   *item
	at   path
	what string
}

// pos is where the source names its sandbox, read from the tree only
// when a message needs it.
func (s sandboxSource) pos() diag.Pos { return posOf(s.it, s.at) }

// posOf is where at stands in the item's document: the object's own position
// where the tree is not at hand or at names nothing.
func posOf(it *item, at path) diag.Pos {
	root, _ := it.tree()
	if root == nil {
		return it.doc.Pos
	}
	pos, _ := it.doc.Where(at.find(root, false))
	return pos
}

// bindingSandboxes calls yield with each sandbox an AgentRuntime's or
// ToolRegistry's bindings make, in input order: its owner, the index of
// the first binding to the SandboxClass, and the class. An owner whose
// sandbox is disabled makes none.
func (p *pass) bindingSandboxes(yield func(o *owner, j int, class string)) {
	for _, o := range p.owners {
		sb := o.w.Spec.Sandbox
		if sb.Enabled != nil && !*sb.Enabled {
			continue
		}
		seen := map[string]bool{}
		for j, b := range sb.Connections {
			if !seen[b.Sandbox] {
				seen[b.Sandbox] = true
				yield(o, j, b.Sandbox)
			}
		}
	}
}

// sandboxSources calls yield with each sandbox the unit's plan would
// hold, in input order (bindings, then agents), with its namespace as
// render places it and its name.
func (p *pass) sandboxSources(yield func(r ref, s sandboxSource)) {
	p.bindingSandboxes(func(o *owner, j int, class string) {
		yield(ref{o.ns, o.obj().Name + "-" + class}, sandboxSource{
			it: &o.item, at: bindingPath(j).with("sandbox"),
			what: fmt.Sprintf("%s %s with SandboxClass %s", o.obj().Kind, o.obj().Name, class),
		})
	})
	for _, a := range p.agents {
		s, ok := p.agentSandbox(a)
		if !ok {
			continue
		}
		yield(ref{cmp.Or(s.Namespace, p.opts.DefaultNamespace), s.Name}, sandboxSource{
			it: &a.item, at: path{"sandbox"},
			what: fmt.Sprintf("agent %s with sandbox %s", a.w.Name, s.Class),
		})
	}
}

// checkSandboxCollisions reports two sources whose sandboxes have one
// name in one namespace (AgentRuntime a-b with class c and AgentRuntime
// a with class b-c; an AgentRuntime and a ToolRegistry of one name on one
// class; an agent and an AgentRuntime of one name): render names every
// object of a sandbox after it, so it refuses the plan.
func checkSandboxCollisions(p *pass) {
	first := map[ref]sandboxSource{}
	p.sandboxSources(func(r ref, s sandboxSource) {
		if CheckSandboxName(r.name) != nil {
			return // SandboxNameInvalid says why
		}
		prev, ok := first[r]
		if !ok {
			first[r] = s
			return
		}
		p.report(codeSandboxNameCollision, s.it, s.at, false,
			"the sandbox of %s is named %s, as is the sandbox of %s at %s: render names each sandbox's objects after it, so it cannot render both; rename one of them, or its SandboxClass",
			s.what, r, prev.what, prev.pos())
	})
}

// checkSandboxImages reports a sandbox render could give no image: its
// SandboxClass names none (or, for an agent, keyhole.yaml's sandboxImage
// is unset) and no default image is set. A SandboxClass is reported
// once, at its spec, however many bindings use it.
func checkSandboxImages(p *pass) {
	if p.opts.DefaultSandboxImage != "" || p.opts.NoSandboxImages {
		return
	}
	reported := map[ref]bool{}
	for _, o := range p.owners {
		sb := o.w.Spec.Sandbox
		if sb.Enabled != nil && !*sb.Enabled {
			continue
		}
		for _, b := range sb.Connections {
			r := ref{o.ns, b.Sandbox}
			c := p.classes[r]
			if c == nil || reported[r] || c.w.Spec.Image != "" {
				continue // BindingSandboxClassMissing, or it has one
			}
			reported[r] = true
			p.report(codeSandboxImageMissing, &c.item, path{"spec", "image"}, false,
				"SandboxClass %s names no image, and no default sandbox image is set, so render cannot write the Deployment of sandbox %s-%s (%s %s) or of any other sandbox of this class; set spec.image, or pass --sandbox-image IMAGE to check, render and diff alike",
				r, o.obj().Name, b.Sandbox, o.obj().Kind, o.obj().Name)
		}
	}
	// Where no keyhole.yaml is read, say where the one read lives: a
	// repository that never had one (a GitOps repository an agent joins)
	// has nowhere to set it yet.
	what, fix := "keyhole.yaml sets no sandboxImage", "set sandboxImage in keyhole.yaml"
	if p.config.found == nil {
		what, fix = "no keyhole.yaml is read", "write a keyhole.yaml (apiVersion: keyhole.dev/v1alpha1, kind: Config) that sets sandboxImage at the repository's top, where keyhole reads it"
	}
	for _, a := range p.agents {
		if aw := a.w; aw.Sandbox != "" && p.config.sandboxImage == "" {
			p.report(codeSandboxImageMissing, &a.item, path{"sandbox"}, false,
				"the sandbox of agent %s has no image: %s, and no default sandbox image is set, so render cannot write its Deployment; %s, or pass --sandbox-image IMAGE to check, render and diff alike",
				aw.Name, what, fix)
		}
	}
}
