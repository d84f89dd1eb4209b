package source

// The cluster Secrets the repository declares are what an
// ApplicationSet's clusters generator selects from: the loader scans the
// repository for them once, the Argo CD engine reading each object
// (ClusterSecret), and gives them to the engine (Host.ArgoClusters).

// clusterSecretLabel is the label marking an Argo CD cluster Secret.
const clusterSecretLabel = "argocd.argoproj.io/secret-type"

// clusterSecrets lists the cluster Secrets declared under root (the
// repository's), read once, as the Argo CD engine reads them.
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
			if c, ok := l.opts.Engines.Argo.ClusterSecret(d); ok {
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
