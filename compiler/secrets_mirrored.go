package compiler

import (
	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// Secrets a controller fills with another Secret's data: the object in
// the input is a mirror that names its source, and the controller
// replaces its data with the source's, so its keys are the source's,
// which the input may not hold (another namespace, another repository, a
// SealedSecret or an ExternalSecret elsewhere).
//
// Each entry is an annotation that makes a Secret such a mirror, and the
// controller that reads it:
//   - reflector.v1.k8s.emberstack.com/reflects: "<namespace>/<name>",
//     emberstack's Reflector (manual mirroring);
//   - replicator.v1.mittwald.de/replicate-from: "<namespace>/<name>",
//     mittwald's kubernetes-replicator (pull-based replication).
var mirrorAnnotations = []struct{ key, controller string }{
	{"reflector.v1.k8s.emberstack.com/reflects", "Reflector"},
	{"replicator.v1.mittwald.de/replicate-from", "kubernetes-replicator"},
}

// mirrorOf is what declares the Secret doc when its annotations make it
// a mirror, whose keys are unknown; nil otherwise.
func mirrorOf(doc *yaml.Node) *secretDeclared {
	ann := source.Lookup(source.Lookup(doc, "metadata"), "annotations")
	for _, m := range mirrorAnnotations {
		from := source.Lookup(ann, m.key)
		if from == nil || from.Kind != yaml.ScalarNode || from.Value == "" {
			continue
		}
		return &secretDeclared{
			from:       m.controller,
			unknownWhy: "which replaces its data with that of the Secret " + from.Value + " (annotation " + m.key + ")",
		}
	}
	return nil
}
