package argocd

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	sigsyaml "sigs.k8s.io/yaml"

	"keyhole.dev/keyhole/source"
)

// An ApplicationSet's clusters generator makes one parameter set per
// cluster Argo CD knows: each Secret labelled
// argocd.argoproj.io/secret-type: cluster that its selector matches,
// and the local cluster (in-cluster, https://kubernetes.default.svc)
// when the selector is empty and no Secret is that cluster's
// (applicationset/generators/cluster.go). keyhole knows the cluster
// Secrets the repository declares, which the loader gives
// (appSetInput); where the repository makes them in a
// way keyhole cannot read (an ExternalSecret, a SealedSecret, SOPS), or
// declares none and the selector asks for some, what the generator
// makes is not known, and said once.

// inClusterServer is the local cluster's API server, as Argo CD names it.
const inClusterServer = "https://kubernetes.default.svc"

// clustersGenerator is the parameter sets of a clusters generator c, from
// the cluster Secrets the repository declares, or why they are not
// known.
func clustersGenerator(run *appSetRun, c *yaml.Node) ([]map[string]any, *appSetStop) {
	var sel metav1.LabelSelector
	if s := source.Lookup(c, "selector"); s != nil {
		data, err := yaml.Marshal(s)
		if err == nil {
			err = sigsyaml.Unmarshal(data, &sel)
		}
		if err != nil {
			return nil, genError("its clusters generator's selector is not a label selector")
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		return nil, genError("its clusters generator's selector: " + err.Error())
	}
	declared := run.in.Clusters()
	if i := slices.IndexFunc(declared, func(s source.ArgoCluster) bool { return s.Made != "" }); i >= 0 {
		return nil, genUnread(fmt.Sprintf("its clusters generator reads the cluster Secrets Argo CD holds, and %s makes one whose values keyhole does not read, so which Applications it makes is not known", declared[i].Made),
			"declare the cluster Secrets' name and server in plain Secrets of the repository, their config encrypted apart, to have them checked")
	}
	withSelector := len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0
	var out []map[string]any
	local := false
	last := map[string]int{}
	for i, s := range declared {
		last[s.Name] = i
	}
	for i, s := range declared {
		// The controller keys the Secrets by cluster name: the last of
		// one name is the one it reads.
		if last[s.Name] != i || !selector.Matches(labels.Set(s.Labels)) {
			continue
		}
		local = local || s.Server == inClusterServer
		p := map[string]any{"name": s.Name, "nameNormalized": sanitizeName(s.Name), "server": s.Server, "project": s.Project}
		if run.t.goTemplate {
			meta := map[string]any{}
			if len(s.Annotations) > 0 {
				meta["annotations"] = anyMap(s.Annotations)
			}
			if len(s.Labels) > 0 {
				meta["labels"] = anyMap(s.Labels)
			}
			p["metadata"] = meta
		} else {
			for k, v := range s.Annotations {
				p["metadata.annotations."+k] = v
			}
			for k, v := range s.Labels {
				p["metadata.labels."+k] = v
			}
		}
		out = append(out, p)
	}
	if len(out) == 0 && withSelector {
		return nil, genUnread("its clusters generator's selector matches none of the cluster Secrets the repository declares: the clusters it selects are registered outside the repository, so which Applications it makes is not known",
			"declare those cluster Secrets in the repository to have them checked")
	}
	if !withSelector && !local {
		run.assumed = run.assumed || len(declared) == 0
		out = append(out, map[string]any{"name": "in-cluster", "nameNormalized": "in-cluster", "server": inClusterServer, "project": ""})
	}
	return out, nil
}

// anyMap is m with values of type any, as templates and selectors walk
// them.
func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
