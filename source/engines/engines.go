// Package engines gives source.Load the engines' packages: the one place
// that lists them, so a program reads a repository with every engine
// keyhole knows (source.Options.Engines).
package engines

import (
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/argocd"
	"keyhole.dev/keyhole/source/flux"
	"keyhole.dev/keyhole/source/helm"
	"keyhole.dev/keyhole/source/kustomize"
)

// All are every engine's package.
func All() source.Engines {
	return source.Engines{Helm: helm.Engine{}, Flux: flux.Engine{}, Argo: argocd.Engine{}, Kustomize: kustomize.Engine{}}
}
