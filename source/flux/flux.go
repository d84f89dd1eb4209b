// Package flux is the Flux engine: it builds a Flux Kustomization's path
// as kustomize-controller does, with the library kustomize-controller
// builds with (github.com/fluxcd/pkg/kustomize): the kustomization Flux
// generates (targetNamespace, namePrefix, nameSuffix, patches, images,
// components; one listing the path's files where the path has none),
// and, after kustomize's build, postBuild substitution. It reads each of
// Flux's objects the loader's scan finds (objects.go): each
// Kustomization and HelmRelease as the deploy unit it makes (units.go),
// the source a Kustomization builds from, or why keyhole does not read
// it (sources.go), what an ArtifactGenerator cuts out of a source for
// each ExternalArtifact, the revision a GitRepository's spec.ref names
// (revision.go), and keyhole.yaml's flux field; it says which
// GitRepositories are the repository's own and which cluster each unit
// deploys to (clusters.go), which Kustomizations a cluster's entry
// reaches (reach.go), where a HelmRelease lands (releases.go), and which
// of a repository's ConfigMaps and Secrets a unit's cluster reads
// (held.go). It reads the repository through the loader's source.Host,
// so a commit's tree builds as the disk does. Which files each unit's
// build applies is the loader's (package source), which builds them.
package flux

import "keyhole.dev/keyhole/source"

// Engine builds Flux Kustomizations for source.Load (source.Engines.Flux).
type Engine struct{}

var _ source.Flux = Engine{}
