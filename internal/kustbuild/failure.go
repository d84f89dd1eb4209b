package kustbuild

import (
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// What a failed build's error says. kustomize (sigs.k8s.io/kustomize/api
// at the version go.mod pins) returns few typed errors: a kustomization
// field of the wrong type keeps encoding/json's *json.UnmarshalTypeError
// in its chain, and is read with errors.As. The others are read from the
// message, each with a regular expression whose comment names the
// kustomize function that writes the text; the tests build a real failing
// kustomization for each, so an upgrade that changes the text fails them.

// malformedYAML reads kusterr.MalformedYamlError.Error (api/internal/kusterr,
// not importable, so not matched with errors.As) around go-yaml's syntax
// error: "MalformedYAMLError: yaml: line 6: ... in File: r.yaml".
var malformedYAML = regexp.MustCompile(`MalformedYAMLError: yaml: line (\d+): (.*?) in File: (\S+)`)

// yamlLine reads the YAML syntax error of a kustomization itself, which
// types.(*Kustomization).Unmarshal prefixes with "invalid Kustomization"
// around sigs.k8s.io/yaml's YAMLToJSON error (that wraps go-yaml's with
// %v, so nothing typed is left).
var yamlLine = regexp.MustCompile(`invalid Kustomization: yaml: line (\d+): (.*)`)

// noMatch reads resmap's demandOneMatch (through resWrangler.GetById, as
// a strategic-merge patch that matches no object fails), an untyped
// fmt.Errorf: "no matches for Id Kind.version.group/name.[namespace]".
var noMatch = regexp.MustCompile(`no matches for Id ([A-Za-z0-9]+)\.[^/\s]*/([^.\s]+(?:\.[^.\s\[]+)*)\.`)

// MalformedYAML reads, from the message msg, a resource file that is not
// YAML: the line go-yaml reports, its problem, and the file as kustomize
// names it.
func MalformedYAML(msg string) (line int, problem, file string, ok bool) {
	m := malformedYAML.FindStringSubmatch(msg)
	if m == nil {
		return 0, "", "", false
	}
	n, _ := strconv.Atoi(m[1])
	return n, m[2], m[3], true
}

// KustomizationYAML reads, from the message msg, a YAML syntax error in
// the kustomization file itself: the line go-yaml reports, and its
// problem.
func KustomizationYAML(msg string) (line int, problem string, ok bool) {
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return 0, "", false
	}
	n, _ := strconv.Atoi(m[1])
	return n, m[2], true
}

// BadField returns the field of a kustomization that kustomize could not
// decode, from the *json.UnmarshalTypeError types.(*Kustomization).Unmarshal
// wraps, and whether the value found there is a list.
func BadField(err error) (field string, list bool, ok bool) {
	var e *json.UnmarshalTypeError
	if !errors.As(err, &e) || e.Struct != "Kustomization" || e.Field == "" {
		return "", false, false
	}
	field, _, _ = strings.Cut(e.Field, ".")
	return field, e.Value == "array", true
}

// UnmatchedPatch reads, from the message msg, the kind and name of the
// object a patch names that the build does not hold.
func UnmatchedPatch(msg string) (kind, name string, ok bool) {
	m := noMatch.FindStringSubmatch(msg)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}
