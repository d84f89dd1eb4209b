package compiler

import (
	"cmp"
	"regexp"
	"strings"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
)

// A Connection whose credential is an AWS access key has the proxy sign
// the requests it forwards with AWS Signature Version 4 (docs/spec.md
// §3.4): the sandbox's SDK signs with placeholder keys, and the proxy
// signs again, for the region and service each host's name gives or the
// Connection names. This file reads those from a host's name and builds
// the proxy's injection; its checks report a host the proxy cannot sign
// for and placements that would give the sandbox the key.

// CredentialKindAWSSigV4 is the spec.credential.kind of a Connection
// whose requests the proxy signs with an AWS access key.
const CredentialKindAWSSigV4 = "awsSigV4"

// The Secret keys an awsSigV4 credential reads when it names none.
const (
	DefaultAWSAccessKeyIDKey     = "AWS_ACCESS_KEY_ID"
	DefaultAWSSecretAccessKeyKey = "AWS_SECRET_ACCESS_KEY"
)

// awsSigV4Wire is an awsSigV4 credential's keys and scope.
type awsSigV4Wire struct {
	AccessKeyIDKey     string `yaml:"accessKeyIdKey"`
	SecretAccessKeyKey string `yaml:"secretAccessKeyKey"`
	SessionTokenKey    string `yaml:"sessionTokenKey"`
	Region             string `yaml:"region"`
	Service            string `yaml:"service"`
	// Identity is config.IdentityWorkload for the proxy's own identity
	// (workload.go); RoleARN is then IRSA's role, if named.
	Identity string `yaml:"identity"`
	RoleARN  string `yaml:"roleArn"`
}

// awsSigV4 returns the Connection's access key settings when its
// credential is of kind awsSigV4 (with or without the field), nil
// otherwise.
func (w *connectionWire) awsSigV4() *awsSigV4Wire {
	if w.Spec.Credential.Kind != CredentialKindAWSSigV4 {
		return nil
	}
	if a := w.Spec.Credential.AWSSigV4; a != nil {
		return a
	}
	return &awsSigV4Wire{}
}

// proxyOnlyCredential reports whether a credential kind is one only the
// proxy uses (a GitHub App's key it mints from, an AWS key it signs
// with, an OAuth 2.0 client's or a service account's credentials it
// obtains tokens with): its Secret is never substituted or placed in the
// sandbox.
func proxyOnlyCredential(kind string) bool {
	return kind == CredentialKindGitHubApp || kind == CredentialKindAWSSigV4 || kind == CredentialKindOAuth2 || kind == CredentialKindGoogle
}

// awsSuffixes are the DNS suffixes of AWS's public endpoints: its
// partitions' (aws, aws-cn) and the dual-stack api.aws.
func awsSuffixes() []string {
	return []string{".amazonaws.com", ".amazonaws.com.cn", ".api.aws"}
}

// awsSigningNames maps an endpoint prefix to the name requests to it
// are signed for, where the two differ (botocore's signingName).
func awsSigningNames() map[string]string {
	return map[string]string{
		"bedrock-runtime": "bedrock", "bedrock-agent": "bedrock", "bedrock-agent-runtime": "bedrock",
		"runtime.sagemaker": "sagemaker", "runtime.lex": "lex", "email": "ses", "data-ats.iot": "iotdata",
	}
}

// awsGlobalEndpoints are endpoints without a region in their name,
// signed for us-east-1.
func awsGlobalEndpoints() map[string]string {
	return map[string]string{"s3": "s3", "sts": "sts", "iam": "iam"}
}

// awsRegion is a region's name: us-east-1, eu-central-2, us-gov-west-1,
// cn-north-1.
var awsRegion = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}$`)

// isAWSHost reports whether host is under one of AWS's endpoint suffixes.
func isAWSHost(host string) bool {
	for _, s := range awsSuffixes() {
		if strings.HasSuffix(host, s) && len(host) > len(s) {
			return true
		}
	}
	return false
}

// awsEndpoint reads the service and region a request to host is signed
// for from the host's name, as AWS's endpoints spell them:
// <service>.<region>.amazonaws.com (the service's signing name where it
// differs from the endpoint's, bedrock for bedrock-runtime), S3's
// s3.<region>, s3-<region>, s3.dualstack.<region> and a bucket's
// <bucket>.s3.<region>, and the global s3, sts and iam endpoints
// (us-east-1). ok is false for a name it cannot read.
func awsEndpoint(host string) (service, region string, ok bool) {
	var name string
	for _, s := range awsSuffixes() {
		if n, found := strings.CutSuffix(host, s); found && n != "" {
			name = n
			break
		}
	}
	if name == "" {
		return "", "", false
	}
	labels := strings.Split(name, ".")
	if len(labels) == 1 {
		if svc, ok := awsGlobalEndpoints()[labels[0]]; ok && strings.HasSuffix(host, ".amazonaws.com") {
			return svc, "us-east-1", true
		}
		if r, found := strings.CutPrefix(labels[0], "s3-"); found && awsRegion.MatchString(r) {
			return "s3", r, true // the legacy s3-<region> endpoints
		}
		return "", "", false
	}
	region = labels[len(labels)-1]
	if !awsRegion.MatchString(region) {
		return "", "", false
	}
	rest := labels[:len(labels)-1]
	if n := len(rest); n >= 2 && rest[n-1] == "dualstack" {
		rest = rest[:n-1]
	}
	// A bucket's virtual host, <bucket>.s3.<region>: the bucket's name
	// may hold dots.
	if n := len(rest); n >= 2 && (rest[n-1] == "s3" || rest[n-1] == "s3-fips") {
		return "s3", region, true
	}
	prefix := strings.TrimSuffix(strings.Join(rest, "."), "-fips")
	if prefix == "" || !config.CheckAWSName(strings.ReplaceAll(prefix, ".", "-")) {
		return "", "", false
	}
	if svc, ok := awsSigningNames()[prefix]; ok {
		return svc, region, true
	}
	if strings.Contains(prefix, ".") {
		return "", "", false // a name keyhole does not know how to read
	}
	return prefix, region, true
}

// awsSigV4Scope returns the service and region the proxy signs host's
// requests for: those the Connection names, else those the host's name
// gives. ok is false when neither gives both.
func (a *awsSigV4Wire) scope(host string) (service, region string, ok bool) {
	svc, reg, derived := awsEndpoint(host)
	service, region = cmp.Or(a.Service, svc), cmp.Or(a.Region, reg)
	return service, region, service != "" && region != "" && (derived || a.Service != "" && a.Region != "")
}

// awsSigV4Inject is the proxy's injection for one host of an awsSigV4
// Connection.
func awsSigV4Inject(a *awsSigV4Wire, host string) *config.AWSSigV4Inject {
	service, region, _ := a.scope(host)
	if a.Identity == config.IdentityWorkload {
		return &config.AWSSigV4Inject{Identity: config.IdentityWorkload, Region: region, Service: service}
	}
	return &config.AWSSigV4Inject{
		AccessKeyIDKey:     cmp.Or(a.AccessKeyIDKey, DefaultAWSAccessKeyIDKey),
		SecretAccessKeyKey: cmp.Or(a.SecretAccessKeyKey, DefaultAWSSecretAccessKeyKey),
		SessionTokenKey:    a.SessionTokenKey,
		Region:             region, Service: service,
	}
}

// Codes of the checks on Connections whose credential is an AWS key.
const (
	codeAWSSigV4Invalid  = "AWSSigV4CredentialInvalid"
	codeAWSSigV4Unsigned = "AWSSigV4HostUnsigned"
)

// awsSigV4Checks are the rows of the check table for awsSigV4
// credentials.
func awsSigV4Checks() []Check {
	return []Check{
		{Code: codeAWSSigV4Invalid, Severity: diag.Error, run: checkAWSSigV4,
			Purpose: "A Connection's credential is an AWS access key the proxy signs requests with, but it is set up to let the key reach the sandbox or to inject something else: `awsSigV4` under another kind, an inject entry that sets `header`, `value` or `basic` (the proxy signs the request itself), an `env` or `files` placement or an agent.yaml connector naming the Connection, either of which would put the Secret holding the key in the sandbox.",
			Help:    "Drop `header`, `value` and `basic` from the inject entries and the env and files placements, give the sandbox the placeholder through `placeholderEnv` (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), and bind the Connection from an AgentRuntime rather than an agent.yaml connector."},
		{Code: codeAWSSigV4Unsigned, Severity: diag.Error, run: checkAWSSigV4Hosts,
			Purpose: "A Connection whose credential is an AWS access key lists a host the proxy cannot sign for: a host that is not one of AWS's endpoints (under amazonaws.com, amazonaws.com.cn or api.aws), or one whose name gives no service and region (an unknown naming) while the Connection names neither.",
			Help:    "List AWS endpoints only, such as s3.us-east-1.amazonaws.com or bedrock-runtime.us-west-2.amazonaws.com; for an endpoint whose name gives no service or region, name them in `credential.awsSigV4.region` and `service` (the signing name, e.g. bedrock), in a Connection of their own if they differ from the other hosts'."},
	}
}

// checkAWSSigV4 reports an awsSigV4 credential set up to inject
// something else or to place its key in the sandbox.
func checkAWSSigV4(p *pass) {
	for _, c := range p.connList {
		w := c.w
		cred := path{"spec", "credential"}
		if w.Spec.Credential.Kind != CredentialKindAWSSigV4 {
			if w.Spec.Credential.AWSSigV4 != nil {
				p.report(codeAWSSigV4Invalid, &c.item, cred.with("awsSigV4"), true,
					"awsSigV4 is read only with kind awsSigV4; this credential is of kind %s, so the proxy would not sign with it", w.Spec.Credential.Kind)
			}
			continue
		}
		a := w.awsSigV4()
		p.proxyHeldPlacements(codeAWSSigV4Invalid, c, "the proxy signs the request itself (Authorization: AWS4-HMAC-SHA256)", "the AWS access key", "give the sandbox the placeholder through placeholderEnv")
		s, r := p.secretOf(c)
		if s == nil || s.keysUnknown || s.merges || a.Identity == config.IdentityWorkload {
			continue
		}
		keys := []struct{ field, key, what string }{
			{"accessKeyIdKey", cmp.Or(a.AccessKeyIDKey, DefaultAWSAccessKeyIDKey), "the access key id"},
			{"secretAccessKeyKey", cmp.Or(a.SecretAccessKeyKey, DefaultAWSSecretAccessKeyKey), "the secret access key"},
		}
		if a.SessionTokenKey != "" {
			keys = append(keys, struct{ field, key, what string }{"sessionTokenKey", a.SessionTokenKey, "the session token"})
		}
		for _, k := range keys {
			if _, ok := s.values.get(k.key); !ok {
				at := cred.with("kind")
				if w.Spec.Credential.AWSSigV4 != nil {
					at = cred.with("awsSigV4")
				}
				p.reportNamedKeyMissing(c, at, s, r, k.key, "which holds "+k.what)
			}
		}
	}
}

// checkAWSSigV4Hosts reports each host of an awsSigV4 Connection the
// proxy cannot sign for.
func checkAWSSigV4Hosts(p *pass) {
	for _, c := range p.connList {
		a := c.w.awsSigV4()
		if a == nil {
			continue
		}
		for j, h := range c.w.Spec.Hosts {
			at := path{"spec", "hosts", j}
			if !isAWSHost(h) {
				p.report(codeAWSSigV4Unsigned, &c.item, at, false,
					"host %s is not an AWS endpoint (a name under amazonaws.com, amazonaws.com.cn or api.aws), so the proxy would sign its requests with the AWS key for a server that is not AWS's", h)
				continue
			}
			if _, _, ok := a.scope(h); !ok {
				p.report(codeAWSSigV4Unsigned, &c.item, at, false,
					"the proxy cannot tell from host %s which service and region to sign for; name them in credential.awsSigV4.service and region", h)
			}
		}
	}
}
