package source

import (
	"cmp"
	"encoding/base64"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The cluster Secrets the repository declares are what an
// ApplicationSet's clusters generator selects from: the loader scans the
// repository for them and gives them to the Argo CD engine
// (AppSetInput.Clusters).

// clusterSecretLabel is the label marking an Argo CD cluster Secret.
const clusterSecretLabel = "argocd.argoproj.io/secret-type"

// clusterSecrets lists the cluster Secrets declared under root (the
// repository's), read once.
func (l *loader) clusterSecrets(root string) []ArgoCluster {
	if cs, ok := l.argoClusters[root]; ok {
		return cs
	}
	var out []ArgoCluster
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
		l.argoClusters = map[string][]ArgoCluster{}
	}
	l.argoClusters[root] = out
	return out
}

// readClusterSecret reads the cluster Secret d declares: a v1 Secret
// with the cluster label, or an object that makes one (a template's
// metadata carrying the label), whose values keyhole does not read.
func readClusterSecret(d *Document) (ArgoCluster, bool) {
	o := d.Object()
	meta := Lookup(d.Node, "metadata")
	what := o.Kind + " " + cmp.Or(o.Namespace, "argocd") + "/" + o.Name
	if o.Kind != "Secret" || o.APIVersion != "v1" {
		// An ExternalSecret's target template, a SealedSecret's
		// template: labels somewhere inside. An Argo CD object names
		// the label in selectors, which make nothing.
		if !strings.HasPrefix(o.APIVersion, argoGroup) && labelsCluster(d.Node) {
			return ArgoCluster{Made: "the " + what}, true
		}
		return ArgoCluster{}, false
	}
	c := ArgoCluster{Labels: stringMap(Lookup(meta, "labels")), Annotations: stringMap(Lookup(meta, "annotations"))}
	if c.Labels[clusterSecretLabel] != "cluster" {
		return ArgoCluster{}, false
	}
	if Lookup(d.Node, "sops") != nil {
		return ArgoCluster{Made: "the SOPS-encrypted " + what}, true
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
	if c.Name, ok = field("name"); !ok {
		return ArgoCluster{Made: "the " + what + ", whose name keyhole cannot read"}, true
	}
	c.Server, _ = field("server")
	c.Project, _ = field("project")
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
