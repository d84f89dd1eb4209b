package config

import (
	"regexp"
	"strings"
)

// AWSSigV4Inject signs requests with AWS Signature Version 4: the
// sandbox's SDK signs with placeholder keys, and the proxy strips that
// signature, decides the request by the host's rules, and signs the
// request it forwards with the access key held in the injection's
// Secret, for Region and Service. The secret access key never leaves
// the proxy, and neither does a signature it computes.
type AWSSigV4Inject struct {
	// AccessKeyIDKey and SecretAccessKeyKey are the Secret's keys that
	// hold the access key id and the secret access key.
	AccessKeyIDKey     string `json:"accessKeyIdKey,omitempty"`
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty"`
	// SessionTokenKey, when set, is the key that holds a session token
	// (temporary credentials), sent as X-Amz-Security-Token.
	SessionTokenKey string `json:"sessionTokenKey,omitempty"`
	// Identity is IdentityWorkload when the proxy signs with its own
	// pod's AWS identity (a web identity token for a role, or the
	// container credentials endpoint), read from its environment: the
	// injection then names no Secret and none of its keys.
	Identity string `json:"identity,omitempty"`
	// Region and Service are what the request is signed for: the
	// credential scope's region (us-east-1) and signing name (s3,
	// bedrock).
	Region  string `json:"region"`
	Service string `json:"service"`
}

// IdentityWorkload is the identity of an AWS SigV4 or Google injection
// whose credential is the proxy's own workload identity, which its pod's
// environment gives (EKS IRSA or Pod Identity, GKE workload identity's
// metadata server), rather than a key held in a Secret.
const IdentityWorkload = "workload"

// Workload reports whether in's credential is the proxy's workload
// identity: in names no Secret then.
func (in *Inject) Workload() bool {
	return in.AWSSigV4 != nil && in.AWSSigV4.Identity == IdentityWorkload || in.Google != nil && in.Google.Identity == IdentityWorkload
}

// awsName is a region or a signing name as AWS spells them.
var awsName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// CheckAWSName reports whether s is a region or service name the proxy
// puts in a credential scope: lower-case letters, digits and '-'.
func CheckAWSName(s string) bool { return awsName.MatchString(s) }

func (v *validator) awsSigV4(at string, a *AWSSigV4Inject) {
	switch a.Identity {
	case IdentityWorkload:
		if a.AccessKeyIDKey != "" || a.SecretAccessKeyKey != "" || a.SessionTokenKey != "" {
			v.addf(at, "names Secret keys, but identity %q signs with the proxy's own credentials", IdentityWorkload)
		}
	case "":
		v.key(at+".accessKeyIdKey", a.AccessKeyIDKey)
		v.key(at+".secretAccessKeyKey", a.SecretAccessKeyKey)
		if a.SessionTokenKey != "" {
			v.key(at+".sessionTokenKey", a.SessionTokenKey)
		}
	default:
		v.addf(at+".identity", "is %q, want %q or none", clipName(a.Identity), IdentityWorkload)
	}
	if !CheckAWSName(a.Region) {
		v.addf(at+".region", "%q is not an AWS region name: lower-case letters, digits and '-'", clipName(a.Region))
	}
	if !CheckAWSName(a.Service) {
		v.addf(at+".service", "%q is not an AWS signing name: lower-case letters, digits and '-'", clipName(a.Service))
	}
}

// Describe says what requests are signed for, naming no secret: the
// service, the region and the Secret keys read.
func (a *AWSSigV4Inject) Describe() string {
	var b strings.Builder
	b.WriteString("AWS SigV4 for service " + a.Service + " in region " + a.Region)
	if a.Identity == IdentityWorkload {
		b.WriteString(", with the proxy's workload identity")
		return b.String()
	}
	b.WriteString(", access key id from key " + a.AccessKeyIDKey + ", secret access key from key " + a.SecretAccessKeyKey)
	if a.SessionTokenKey != "" {
		b.WriteString(", session token from key " + a.SessionTokenKey)
	}
	return b.String()
}
