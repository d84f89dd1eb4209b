package argocd

import (
	"cmp"
	"encoding/base64"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// clusterLabel is the label marking an Argo CD cluster Secret.
const clusterLabel = "argocd.argoproj.io/secret-type"

// ClusterSecret is the Argo CD cluster Secret d declares: a v1 Secret
// with the cluster label, or an object that makes one (a template's
// metadata carrying the label), whose values keyhole does not read; ok
// is false when d declares none. Never its config, which holds
// credentials.
func (Engine) ClusterSecret(d *source.Document) (source.ArgoCluster, bool) {
	o := d.Object()
	meta := source.Lookup(d.Node, "metadata")
	what := o.Kind + " " + cmp.Or(o.Namespace, "argocd") + "/" + o.Name
	if o.Kind != "Secret" || o.APIVersion != "v1" {
		// An ExternalSecret's target template, a SealedSecret's
		// template: labels somewhere inside. An Argo CD object names
		// the label in selectors, which make nothing.
		if !strings.HasPrefix(o.APIVersion, group) && labelsCluster(d.Node) {
			return source.ArgoCluster{Made: "the " + what}, true
		}
		return source.ArgoCluster{}, false
	}
	c := source.ArgoCluster{Labels: source.StringMap(source.Lookup(meta, "labels")), Annotations: source.StringMap(source.Lookup(meta, "annotations"))}
	if c.Labels[clusterLabel] != "cluster" {
		return source.ArgoCluster{}, false
	}
	if source.Lookup(d.Node, "sops") != nil {
		return source.ArgoCluster{Made: "the SOPS-encrypted " + what}, true
	}
	field := func(key string) (string, bool) {
		if v := source.Lookup(source.Lookup(d.Node, "stringData"), key); v != nil && v.Kind == yaml.ScalarNode {
			return v.Value, true
		}
		if v := source.Lookup(source.Lookup(d.Node, "data"), key); v != nil && v.Kind == yaml.ScalarNode {
			b, err := base64.StdEncoding.DecodeString(v.Value)
			return string(b), err == nil
		}
		return "", false
	}
	var ok bool
	if c.Name, ok = field("name"); !ok {
		return source.ArgoCluster{Made: "the " + what + ", whose name keyhole cannot read"}, true
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
			if n.Content[i].Value == "labels" && source.StringField(n.Content[i+1], clusterLabel) == "cluster" {
				return true
			}
		}
	}
	return slices.ContainsFunc(n.Content, labelsCluster)
}
