package compiler

import (
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
)

// An awsSigV4 or googleServiceAccount credential of identity "workload"
// is the proxy's own identity in the cloud it runs in (docs/spec.md §3.4,
// §3.5): EKS IRSA or Pod Identity, GKE workload identity. No Secret holds
// it, so the Connection names none; the rendered proxy's ServiceAccount
// carries what the cloud needs to know the identity (the role's or
// service account's annotation). This file holds its check and the
// annotations.

// codeWorkloadInvalid is the code of the workload identity check.
const codeWorkloadInvalid = "WorkloadIdentityInvalid"

// The ServiceAccount annotations of a workload identity.
const (
	// AnnotationEKSRoleARN is IRSA's: the IAM role the pod assumes with
	// its web identity token.
	AnnotationEKSRoleARN = "eks.amazonaws.com/role-arn"
	// AnnotationGKEServiceAccount is GKE workload identity's: the
	// Google service account the metadata server hands out tokens of.
	AnnotationGKEServiceAccount = "iam.gke.io/gcp-service-account"
)

// workload reports whether the Connection's credential is the proxy's
// own identity.
func (w *connectionWire) workload() bool {
	cred := &w.Spec.Credential
	return cred.Kind == CredentialKindAWSSigV4 && cred.AWSSigV4 != nil && cred.AWSSigV4.Identity == config.IdentityWorkload ||
		cred.Kind == CredentialKindGoogle && cred.Google != nil && cred.Google.Identity == config.IdentityWorkload
}

// workloadAnnotation returns the ServiceAccount annotation the
// Connection's workload identity names, if any.
func (w *connectionWire) workloadAnnotation() (key, value string, at path) {
	cred := &w.Spec.Credential
	switch {
	case !w.workload():
	case cred.AWSSigV4 != nil && cred.AWSSigV4.RoleARN != "":
		return AnnotationEKSRoleARN, cred.AWSSigV4.RoleARN, path{"spec", "credential", "awsSigV4", "roleArn"}
	case cred.Google != nil && cred.Google.ServiceAccount != "":
		return AnnotationGKEServiceAccount, cred.Google.ServiceAccount, path{"spec", "credential", "googleServiceAccount", "serviceAccount"}
	}
	return "", "", nil
}

func workloadChecks() []Check {
	return []Check{
		{Code: codeWorkloadInvalid, Severity: diag.Error, run: checkWorkloadIdentity,
			Purpose: "A Connection's credential names its Secret wrongly for where the credential comes from: no `secretRef` while the credential is not the proxy's own identity (`identity: workload`, for `awsSigV4` and `googleServiceAccount` only), or, with that identity, a `secretRef` or Secret keys (`accessKeyIdKey`, `secretAccessKeyKey`, `sessionTokenKey`, `keyKey`) or a `tokenUrl`, which it never reads; a `roleArn` or `serviceAccount` without it; or two Connections of one sandbox naming different roles or service accounts, where its proxy runs as one ServiceAccount.",
			Help:    "Name the Secret in `spec.credential.secretRef`, or set `identity: workload` and drop `secretRef` and the keys; give one sandbox's workload Connections one `roleArn` (and one `serviceAccount`)."},
	}
}

func checkWorkloadIdentity(p *pass) {
	checkWorkloadConflicts(p)
	for _, c := range p.connList {
		w := c.w
		cred := &w.Spec.Credential
		at := path{"spec", "credential"}
		if !w.workload() {
			if cred.SecretRef.Name == "" {
				p.report(codeWorkloadInvalid, &c.item, at, true, "credential names no secretRef; only an awsSigV4 or googleServiceAccount credential of identity workload, the proxy's own, needs none")
			}
			if a := cred.AWSSigV4; a != nil && a.RoleARN != "" {
				p.report(codeWorkloadInvalid, &c.item, at.with("awsSigV4", "roleArn"), true, "roleArn names the role of the proxy's own identity, read only with identity: workload")
			}
			if g := cred.Google; g != nil && g.ServiceAccount != "" {
				p.report(codeWorkloadInvalid, &c.item, at.with("googleServiceAccount", "serviceAccount"), true, "serviceAccount names the Google service account of the proxy's own identity, read only with identity: workload")
			}
			continue
		}
		if cred.SecretRef.Name != "" {
			p.report(codeWorkloadInvalid, &c.item, at.with("secretRef"), true, "identity workload is the proxy's own identity, which reads no Secret; drop secretRef")
		}
		if a := cred.AWSSigV4; cred.Kind == CredentialKindAWSSigV4 && (a.AccessKeyIDKey != "" || a.SecretAccessKeyKey != "" || a.SessionTokenKey != "") {
			p.report(codeWorkloadInvalid, &c.item, at.with("awsSigV4"), true, "identity workload signs with the proxy's own credentials; drop accessKeyIdKey, secretAccessKeyKey and sessionTokenKey")
		}
		if g := cred.Google; cred.Kind == CredentialKindGoogle && (g.KeyKey != "" || g.TokenURL != "") {
			p.report(codeWorkloadInvalid, &c.item, at.with("googleServiceAccount"), true, "identity workload asks the proxy's metadata server for the token; drop keyKey and tokenUrl")
		}
	}
}

// workloadAnnotations adds to annotations what the Connection's
// workload identity names; of two values for one annotation the first
// stays (checkWorkloadConflicts reports the second).
func workloadAnnotations(annotations map[string]string, c *connection) map[string]string {
	key, value, _ := c.w.workloadAnnotation()
	if key == "" {
		return annotations
	}
	if _, ok := annotations[key]; ok {
		return annotations
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = value
	return annotations
}

// checkWorkloadConflicts reports a Connection of a sandbox that names
// another role or service account than one before it: the sandbox's
// proxy runs as one ServiceAccount.
func checkWorkloadConflicts(p *pass) {
	for _, o := range p.owners {
		sb := o.w.Spec.Sandbox
		if sb.Enabled != nil && !*sb.Enabled {
			continue
		}
		type first struct{ value, conn string }
		byClass := map[string]map[string]first{}
		for _, b := range sb.Connections {
			c := p.conns.get(ref{o.ns, b.Connection})
			if c == nil {
				continue
			}
			key, value, at := c.w.workloadAnnotation()
			if key == "" {
				continue
			}
			seen := byClass[b.Sandbox]
			if seen == nil {
				seen = map[string]first{}
				byClass[b.Sandbox] = seen
			}
			f, ok := seen[key]
			switch {
			case !ok:
				seen[key] = first{value, c.obj().Name}
			case f.value != value:
				p.report(codeWorkloadInvalid, &c.item, at, false, "the proxy of sandbox %s-%s already runs as %s (Connection %s), and its one ServiceAccount has one %s; give the sandbox's workload Connections one",
					o.obj().Name, b.Sandbox, f.value, f.conn, key)
			}
		}
	}
}
