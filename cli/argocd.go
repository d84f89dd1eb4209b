package cli

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/source"
)

// Argo CD's repo server runs a config management plugin's generate
// command in the Application's source path, within a copy of the whole
// repository, and tells it which Application it runs for in its
// environment: ARGOCD_APP_NAME (NAME, or NAMESPACE_NAME for an
// Application outside Argo CD's own namespace) and
// ARGOCD_APP_SOURCE_PATH (the path, relative to the repository's root).
// render --argocd reads the repository from that root, as check reads
// it, and prints the one deploy unit of that Application: its build with
// the Config at the root, in its destination's namespace and cluster.

// argoApp is the Application Argo CD runs keyhole's plugin for.
type argoApp struct {
	// namespace is "" when ARGOCD_APP_NAME does not say it (the
	// Application is in Argo CD's own namespace).
	namespace, name string
	// root is the repository's root, dir the source's path in it
	// (absolute, OS form).
	root, dir string
}

// errArgoEnv marks an environment that is not the one Argo CD's repo
// server gives a plugin.
var errArgoEnv = errors.New("not run by Argo CD's repo server")

// argoByHand says how to run the plugin as the repo server does, to try
// it outside Argo CD.
const argoByHand = "to try it by hand, run it in the Application's source path with ARGOCD_APP_NAME=NAME (NAMESPACE_NAME for an Application outside Argo CD's own namespace) and ARGOCD_APP_SOURCE_PATH=PATH (that path, relative to the repository's root) set, as the repo server sets them"

// argoPluginApp reads the Application from the environment Argo CD's
// repo server sets, and the repository's root from the working
// directory, which is the source's path within it.
func argoPluginApp(e *env) (argoApp, error) {
	app := e.getenv("ARGOCD_APP_NAME")
	if app == "" {
		return argoApp{}, fmt.Errorf("%w: ARGOCD_APP_NAME is not set; %s", errArgoEnv, argoByHand)
	}
	var a argoApp
	// A Kubernetes name holds no _, so the first one parts the
	// namespace from the name.
	if ns, name, ok := strings.Cut(app, "_"); ok {
		a.namespace, a.name = ns, name
	} else {
		a.name = app
	}
	rel := path.Clean("/" + strings.TrimSpace(e.getenv("ARGOCD_APP_SOURCE_PATH")))[1:]
	wd, err := os.Getwd()
	if err != nil {
		return argoApp{}, err
	}
	a.dir = wd
	a.root = wd
	if rel != "" {
		suffix := string(filepath.Separator) + filepath.FromSlash(rel)
		if !strings.HasSuffix(wd, suffix) {
			return argoApp{}, fmt.Errorf("%w: the working directory %s is not ARGOCD_APP_SOURCE_PATH %s within a repository; %s", errArgoEnv, wd, rel, argoByHand)
		}
		a.root = strings.TrimSuffix(wd, suffix)
		if a.root == "" {
			a.root = string(filepath.Separator)
		}
	}
	return a, nil
}

// unit is the name of the deploy unit that Application is, among us: an
// Argo CD unit that keyhole's plugin renders, of the Application's name
// (and namespace, when known) whose path is the source's. ok is false
// when the repository declares no such Application (one Argo CD was
// given from elsewhere).
func (a argoApp) unit(us []compiler.Unit) (name string, ok bool, err error) {
	var found []string
	for _, u := range us {
		if u.Source != source.UnitArgoCD || !u.KeyholePlugin() || u.Root != a.dir {
			continue
		}
		nsName, _, _ := strings.Cut(strings.TrimPrefix(u.Name, "argocd:"), "#")
		ns, n, _ := strings.Cut(nsName, "/")
		if n == a.name && (a.namespace == "" || ns == a.namespace) {
			found = append(found, u.Name)
		}
	}
	switch len(found) {
	case 0:
		return "", false, nil
	case 1:
		return found[0], true, nil
	}
	return "", false, fmt.Errorf("%w: the Applications %s all render this path with keyhole's plugin; Argo CD names the one it runs for NAMESPACE_NAME in ARGOCD_APP_NAME when it is outside Argo CD's own namespace", errUsage, strings.Join(found, ", "))
}
