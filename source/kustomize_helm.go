package source

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A kustomization's helmCharts are inflated only by a build that runs
// helm: kubectl kustomize and kustomize-controller never do, Argo CD's
// repo server does when its argocd-cm ConfigMap gives kustomize the
// --enable-helm build option. keyhole runs no helm. Where the repository
// configures Argo CD so (the argocd-cm its installation applies or
// patches in, or the argo-cd chart's values that write that ConfigMap),
// a kustomization that fails only for want of
// helm is one Argo CD builds: in an Argo CD unit, or a kustomization root
// an Application keyhole does not read may build (an ApplicationSet in
// Jsonnet, one applied by hand), it is not the engine's failure but
// keyhole's blind spot, said once as a KustomizeHelmNotRun warning at the
// helmCharts field. A Flux unit's stays an error: kustomize-controller
// fails on it. See docs/inputs.md, "Kustomize".

// CodeKustomizeHelmNotRun is the warning said instead of a build's
// failure for want of helm, where the repository's Argo CD runs it.
const CodeKustomizeHelmNotRun = "KustomizeHelmNotRun"

// argoHelmAt is where the repository at root gives Argo CD's kustomize
// builds --enable-helm ("" when it does not), found once per root.
func (l *loader) argoHelmAt(root string) string {
	l.helmOptionMu.Lock()
	defer l.helmOptionMu.Unlock()
	if at, ok := l.helmOptionAt[root]; ok {
		return at
	}
	if l.helmOptionAt == nil {
		l.helmOptionAt = map[string]string{}
	}
	at := l.findArgoHelm(root)
	l.helmOptionAt[root] = at
	return at
}

// findArgoHelm walks the repository at root, its kustomizations' patch
// files too (an installation's argocd-cm is often a patch), for Argo CD's
// kustomize build options holding --enable-helm: the data key
// kustomize.buildOptions (or kustomize.buildOptions.VERSION) of an
// argocd-cm ConfigMap, or that key in the argo-cd Helm chart's values
// (configs.cm, or server.config in its older versions; under argo-cd's
// name in the values of a chart wrapping it), which write it into the
// argocd-cm the chart makes. It returns where, as FILE:LINE.
func (l *loader) findArgoHelm(root string) string {
	files, charts, patches := walkAllCharts(l.fsys, root, &l.paths)
	for _, p := range patches {
		files = append(files, p.file)
	}
	for _, c := range charts {
		// A chart wrapping argo-cd gives it values under its name.
		files = append(files, filepath.Join(filepath.Dir(c), "values.yaml"))
	}
	slices.Sort(files)
	files = slices.Compact(files)
	for _, f := range files {
		data := l.sniff(f, []byte("kustomize.buildOptions"))
		if data == nil || !bytes.Contains(data, []byte("--enable-helm")) {
			continue
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc yaml.Node
			if err := decode(dec, &doc); err != nil {
				break // the end, or YAML the loader reports where it reads it
			}
			if len(doc.Content) == 0 {
				continue
			}
			top := doc.Content[0]
			var opts []*yaml.Node // mappings whose keys are argocd-cm's
			if stringField(top, "kind") == "ConfigMap" && stringField(Lookup(top, "metadata"), "name") == "argocd-cm" {
				opts = append(opts, Lookup(top, "data"))
			}
			vals := []*yaml.Node{top}
			if top.Kind == yaml.MappingNode {
				for i := 1; i < len(top.Content); i += 2 {
					vals = append(vals, top.Content[i]) // a wrapping chart's values of argo-cd
				}
			}
			for _, v := range vals {
				opts = append(opts, Lookup(Lookup(v, "configs"), "cm"), Lookup(Lookup(v, "server"), "config"))
			}
			for _, m := range opts {
				if k := enablesHelm(m); k != nil {
					return fmt.Sprintf("%s:%d", l.display(f, f), k.Line)
				}
			}
		}
	}
	return ""
}

// enablesHelm returns the key of the mapping m (argocd-cm's data) whose
// kustomize build options hold --enable-helm, or nil.
func enablesHelm(m *yaml.Node) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if (k.Value == "kustomize.buildOptions" || strings.HasPrefix(k.Value, "kustomize.buildOptions.")) &&
			v.Kind == yaml.ScalarNode && slices.Contains(strings.Fields(v.Value), "--enable-helm") {
			return k
		}
	}
	return nil
}
