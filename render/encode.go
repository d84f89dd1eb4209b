package render

import (
	"bytes"
	"encoding/json"
	"fmt"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/proxy/config"
)

// obj is a Kubernetes object or a part of one: the omnia target's objects
// and the parts every sandbox's objects share (newShared), whose keys the
// emitter writes sorted, which makes the bytes deterministic. Maps rather
// than typed structs keep k8s.io/api out of the renderer. A sandbox's own
// objects are written directly instead (writeManifests).
type obj = map[string]any

// list is a YAML sequence inside an obj.
type list = []any

// encodeYAML encodes v as block YAML with 2-space indentation and sorted
// map keys (see emitYAML).
func encodeYAML(v any) ([]byte, error) {
	b, err := emitYAML(v)
	if err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return b, nil
}

// fluxSubstitute is the annotation that turns off Flux's post-build
// variable substitution for one object.
const fluxSubstitute = "kustomize.toolkit.fluxcd.io/substitute"

// encodeObject encodes one Kubernetes object. An object whose encoding
// holds a literal "${" is annotated so that Flux's post-build substitution
// leaves it alone instead of rewriting, say, a header template.
func encodeObject(o obj) ([]byte, error) {
	var e emitter
	return e.object(o)
}

// object is encodeObject with e's buffer.
func (e *emitter) object(o obj) ([]byte, error) {
	data, err := e.emit(o)
	if err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if !bytes.Contains(data, []byte("${")) {
		return data, nil
	}
	md := o["metadata"].(obj)
	ann, _ := md["annotations"].(obj)
	if ann == nil {
		ann = obj{}
		md["annotations"] = ann
	}
	ann[fluxSubstitute] = "disabled"
	data, err = e.emit(o)
	if err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return data, nil
}

// proxyConfigJSON is the sandbox's proxy config exactly as the Plan holds
// it, with the file locations filled in where the rendered manifests mount
// them, encoded as JSON with sorted keys and 2-space indentation.
func proxyConfigJSON(sb compiler.Sandbox) ([]byte, error) {
	c := sb.Proxy
	if c.APIVersion == "" {
		c.APIVersion = config.APIVersion
	}
	if c.Kind == "" {
		c.Kind = config.Kind
	}
	if c.APIVersion != config.APIVersion || c.Kind != config.Kind {
		return nil, fmt.Errorf("%w: proxy config is %s %s, want %s %s", ErrInvalidPlan, c.APIVersion, c.Kind, config.APIVersion, config.Kind)
	}
	// The proxy names its sandbox in every log line; name it where the
	// manifests put it.
	if c.Sandbox.Name == "" {
		c.Sandbox.Name = sb.Name
	}
	if c.Sandbox.Namespace == "" {
		c.Sandbox.Namespace = sb.Namespace
	}
	c.SecretsDir = config.DefaultSecretsDir
	c.CA = config.CA{CertFile: config.DefaultCACert, KeyFile: config.DefaultCAKey}
	// Sized for a typical host's few hundred bytes, so that the buffer
	// seldom grows.
	out, valid := appendProxyConfig(make([]byte, 0, 256+640*len(c.Hosts)+48*len(c.Passthrough)), &c)
	if !valid {
		return genericProxyConfigJSON(c)
	}
	// What is written must be what the proxy loads: a config the proxy
	// would refuse is refused here rather than deployed. The proxy's
	// startup validation runs on c itself, not on the bytes read back
	// with config.Decode: for valid UTF-8, appendProxyConfig writes what
	// encoding/json writes for c, and the strict decoding of those bytes
	// gives back c but for empty lists read as nil, which validation
	// treats alike. FuzzAppendProxyConfig and TestProxyConfigReadBack
	// hold the writer to that, checking on every input that config.Decode
	// accepts what was written exactly when c validates, with the same
	// errors, and that what it reads back writes the same bytes again.
	// Reading each config back cost a render 0.20 s of its proxy
	// configs' 0.32 s (docs/benchmarks.md, "Render at scale").
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: the proxy would refuse its config: %w", ErrInvalidPlan, err)
	}
	return out, nil
}

var errNotSurvived = fmt.Errorf("%w: the proxy config does not survive JSON encoding unchanged (invalid UTF-8?)", ErrInvalidPlan)

// genericProxyConfigJSON is proxyConfigJSON by way of encoding/json and a
// generic value, whose sorted map keys order the fields. It is the
// reference appendProxyConfig is tested against, and the path of a config
// holding invalid UTF-8, which it refuses as it always has.
func genericProxyConfigJSON(c config.Config) ([]byte, error) {
	raw, out, err := encodeGeneric(c)
	if err != nil {
		return nil, err
	}
	// What is written must be what the proxy loads, and exactly the
	// Plan's config: a config the proxy would refuse, or one that JSON
	// cannot carry unchanged (invalid UTF-8 becomes U+FFFD), is refused
	// here rather than deployed.
	loaded, err := config.Decode(out)
	if err != nil {
		return nil, fmt.Errorf("%w: the proxy would refuse its config: %w", ErrInvalidPlan, err)
	}
	if back, err := json.Marshal(loaded); err != nil || !bytes.Equal(back, raw) {
		return nil, errNotSurvived
	}
	return out, nil
}

// encodeGeneric encodes c with encoding/json (raw) and, by way of a
// generic value whose map keys come out sorted whatever the struct's field
// order is, as encodeJSON writes it (out).
func encodeGeneric(c config.Config) (raw, out []byte, err error) {
	raw, err = json.Marshal(c)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding proxy config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, nil, fmt.Errorf("encoding proxy config: %w", err)
	}
	out, err = encodeJSON(generic)
	if err != nil {
		return nil, nil, err
	}
	return raw, out, nil
}

// encodeJSON writes v with sorted keys (maps), 2-space indentation, no
// HTML escaping (a header template reads better unescaped) and a final
// newline.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding JSON: %w", err)
	}
	return b.Bytes(), nil
}
