package diff

import (
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// s3 is an S3 host whose requests the proxy signs for service and
// region.
func s3(host, service, region string, rules ...config.Rule) config.Host {
	return config.Host{Name: host, Connection: "aws", Rules: rules, Inject: config.Inject{Secret: "aws-key", AWSSigV4: &config.AWSSigV4Inject{
		AccessKeyIDKey: "AWS_ACCESS_KEY_ID", SecretAccessKeyKey: "AWS_SECRET_ACCESS_KEY", Region: region, Service: service}}}
}

// TestCompareAccessAWSSigV4: a request signed for another service or
// region, or to a new host, carries a credential the base did not: a
// widening; the same signing is unchanged.
func TestCompareAccessAWSSigV4(t *testing.T) {
	const host = "s3.us-east-1.amazonaws.com"
	get := prefixes("GET", "/reports")
	for name, tc := range map[string]struct {
		base, head *config.Config
		want       Verdict
		widened    []string
	}{
		"the same signing": {
			base: plan([]config.Host{s3(host, "s3", "us-east-1", get)}),
			head: plan([]config.Host{s3(host, "s3", "us-east-1", get)}),
			want: VerdictUnchanged,
		},
		"another region": {
			base:    plan([]config.Host{s3(host, "s3", "us-east-1", get)}),
			head:    plan([]config.Host{s3(host, "s3", "eu-west-1", get)}),
			want:    VerdictWidened,
			widened: []string{"GET https://s3.us-east-1.amazonaws.com/reports"},
		},
		"another service": {
			base:    plan([]config.Host{s3(host, "s3", "us-east-1", get)}),
			head:    plan([]config.Host{s3(host, "s3express", "us-east-1", get)}),
			want:    VerdictWidened,
			widened: []string{"GET https://s3.us-east-1.amazonaws.com/reports"},
		},
		"a new host": {
			base:    plan([]config.Host{s3(host, "s3", "us-east-1", get)}),
			head:    plan([]config.Host{s3(host, "s3", "us-east-1", get), s3("s3.eu-west-1.amazonaws.com", "s3", "eu-west-1", get)}),
			want:    VerdictWidened,
			widened: []string{"GET https://s3.eu-west-1.amazonaws.com/reports"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			compareCase(t, tc.base, tc.head, tc.want, tc.widened, nil)
		})
	}
}
