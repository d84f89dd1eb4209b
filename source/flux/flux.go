// Package flux is the Flux engine: it builds a Flux Kustomization's path
// as kustomize-controller does, with the library kustomize-controller
// builds with (github.com/fluxcd/pkg/kustomize): the kustomization Flux
// generates (targetNamespace, namePrefix, nameSuffix, patches, images,
// components; one listing the path's files where the path has none),
// and, after kustomize's build, postBuild substitution; and it reads
// what an ArtifactGenerator cuts out of a source for each
// ExternalArtifact, and keyhole.yaml's flux field; and it reads each
// Kustomization and HelmRelease as the deploy unit it makes (units.go).
// It reads the repository through the loader's source.Host, so a
// commit's tree builds as the disk does. Which Kustomizations apply
// which, which a cluster's entry reaches and which cluster each deploys
// to is the loader's (package source).
package flux

import "keyhole.dev/keyhole/source"

// Engine builds Flux Kustomizations for source.Load (source.Engines.Flux).
type Engine struct{}

var _ source.Flux = Engine{}
