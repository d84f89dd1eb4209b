package source

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	sigsyaml "sigs.k8s.io/yaml"
)

// An ApplicationSet's clusters generator makes one parameter set per
// cluster Argo CD knows: each Secret labelled
// argocd.argoproj.io/secret-type: cluster that its selector matches,
// and the local cluster (in-cluster, https://kubernetes.default.svc)
// when the selector is empty and no Secret is that cluster's
// (applicationset/generators/cluster.go). keyhole knows the cluster
// Secrets the repository declares; where the repository makes them in a
// way keyhole cannot read (an ExternalSecret, a SealedSecret, SOPS), or
// declares none and the selector asks for some, what the generator
// makes is not known, and said once.

// clusterSecretLabel is the label marking an Argo CD cluster Secret.
const clusterSecretLabel = "argocd.argoproj.io/secret-type"

// inClusterServer is the local cluster's API server, as Argo CD names it.
const inClusterServer = "https://kubernetes.default.svc"

// clusterSecret is an Argo CD cluster Secret the repository declares:
// the fields a clusters generator's parameters take (never its config,
// which holds credentials).
type clusterSecret struct {
	name, server, project string
	labels, annotations   map[string]string
	// made, when not empty, says the Secret is made by something whose
	// values keyhole does not read ("the ExternalSecret argocd/prod").
	made string
}

// clusterSecrets lists the cluster Secrets declared under root (the
// repository's), read once.
func (l *loader) clusterSecrets(root string) []clusterSecret {
	if cs, ok := l.argoClusters[root]; ok {
		return cs
	}
	var out []clusterSecret
	for _, f := range walkAll(l.fsys, root, &l.paths) {
		data := l.sniff(f, []byte(clusterSecretLabel))
		if data == nil {
			continue
		}
		docs, _ := Parse(f, data)
		for _, d := range docs {
			if c, ok := readClusterSecret(d); ok {
				out = append(out, c)
			}
		}
	}
	if l.argoClusters == nil {
		l.argoClusters = map[string][]clusterSecret{}
	}
	l.argoClusters[root] = out
	return out
}

// readClusterSecret reads the cluster Secret d declares: a v1 Secret
// with the cluster label, or an object that makes one (a template's
// metadata carrying the label), whose values keyhole does not read.
func readClusterSecret(d *Document) (clusterSecret, bool) {
	o := d.Object()
	meta := Lookup(d.Node, "metadata")
	what := o.Kind + " " + cmp.Or(o.Namespace, "argocd") + "/" + o.Name
	if o.Kind != "Secret" || o.APIVersion != "v1" {
		// An ExternalSecret's target template, a SealedSecret's
		// template: labels somewhere inside. An Argo CD object names
		// the label in selectors, which make nothing.
		if !strings.HasPrefix(o.APIVersion, argoGroup) && labelsCluster(d.Node) {
			return clusterSecret{made: "the " + what}, true
		}
		return clusterSecret{}, false
	}
	c := clusterSecret{labels: stringMap(Lookup(meta, "labels")), annotations: stringMap(Lookup(meta, "annotations"))}
	if c.labels[clusterSecretLabel] != "cluster" {
		return clusterSecret{}, false
	}
	if Lookup(d.Node, "sops") != nil {
		return clusterSecret{made: "the SOPS-encrypted " + what}, true
	}
	field := func(key string) (string, bool) {
		if v := Lookup(Lookup(d.Node, "stringData"), key); v != nil && v.Kind == yaml.ScalarNode {
			return v.Value, true
		}
		if v := Lookup(Lookup(d.Node, "data"), key); v != nil && v.Kind == yaml.ScalarNode {
			b, err := base64.StdEncoding.DecodeString(v.Value)
			return string(b), err == nil
		}
		return "", false
	}
	var ok bool
	if c.name, ok = field("name"); !ok {
		return clusterSecret{made: "the " + what + ", whose name keyhole cannot read"}, true
	}
	c.server, _ = field("server")
	c.project, _ = field("project")
	return c, true
}

// labelsCluster reports whether n holds, at any depth, labels marking
// an Argo CD cluster Secret.
func labelsCluster(n *yaml.Node) bool {
	if n == nil {
		return false
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "labels" && stringField(n.Content[i+1], clusterSecretLabel) == "cluster" {
				return true
			}
		}
	}
	return slices.ContainsFunc(n.Content, labelsCluster)
}

// clustersGenerator is the parameter sets of a clusters generator c, from
// the cluster Secrets the repository declares, or why they are not
// known.
func (l *loader) clustersGenerator(run *appSetRun, c *yaml.Node) ([]map[string]any, *genStop) {
	var sel metav1.LabelSelector
	if s := Lookup(c, "selector"); s != nil {
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
	declared := l.clusterSecrets(run.srcRoots[0])
	if i := slices.IndexFunc(declared, func(s clusterSecret) bool { return s.made != "" }); i >= 0 {
		return nil, genUnread(fmt.Sprintf("its clusters generator reads the cluster Secrets Argo CD holds, and %s makes one whose values keyhole does not read, so which Applications it makes is not known", declared[i].made),
			"declare the cluster Secrets' name and server in plain Secrets of the repository, their config encrypted apart, to have them checked")
	}
	withSelector := len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0
	var out []map[string]any
	local := false
	last := map[string]int{}
	for i, s := range declared {
		last[s.name] = i
	}
	for i, s := range declared {
		// The controller keys the Secrets by cluster name: the last of
		// one name is the one it reads.
		if last[s.name] != i || !selector.Matches(labels.Set(s.labels)) {
			continue
		}
		local = local || s.server == inClusterServer
		p := map[string]any{"name": s.name, "nameNormalized": sanitizeName(s.name), "server": s.server, "project": s.project}
		if run.t.goTemplate {
			meta := map[string]any{}
			if len(s.annotations) > 0 {
				meta["annotations"] = anyMap(s.annotations)
			}
			if len(s.labels) > 0 {
				meta["labels"] = anyMap(s.labels)
			}
			p["metadata"] = meta
		} else {
			for k, v := range s.annotations {
				p["metadata.annotations."+k] = v
			}
			for k, v := range s.labels {
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
