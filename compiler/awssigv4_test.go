package compiler

import "testing"

// TestAWSEndpoint reads the service and region a host's name gives, as
// AWS's endpoints spell them, and nothing from a name it cannot read.
func TestAWSEndpoint(t *testing.T) {
	for host, want := range map[string]struct {
		service, region string
		ok              bool
	}{
		"s3.us-east-1.amazonaws.com":                   {"s3", "us-east-1", true},
		"s3.amazonaws.com":                             {"s3", "us-east-1", true},
		"s3-eu-west-1.amazonaws.com":                   {"s3", "eu-west-1", true},
		"s3.dualstack.eu-west-1.amazonaws.com":         {"s3", "eu-west-1", true},
		"reports.s3.eu-west-1.amazonaws.com":           {"s3", "eu-west-1", true},
		"my.dotted.bucket.s3.us-west-2.amazonaws.com":  {"s3", "us-west-2", true},
		"bedrock-runtime.us-west-2.amazonaws.com":      {"bedrock", "us-west-2", true},
		"bedrock-runtime-fips.us-east-1.amazonaws.com": {"bedrock", "us-east-1", true},
		"runtime.sagemaker.eu-central-1.amazonaws.com": {"sagemaker", "eu-central-1", true},
		"dynamodb.us-gov-west-1.amazonaws.com":         {"dynamodb", "us-gov-west-1", true},
		"s3.cn-north-1.amazonaws.com.cn":               {"s3", "cn-north-1", true},
		"sts.amazonaws.com":                            {"sts", "us-east-1", true},
		"sqs.us-east-1.api.aws":                        {"sqs", "us-east-1", true},
		"abc123.execute-api.us-east-1.amazonaws.com":   {"", "", false},
		"s3-accesspoint.amazonaws.com":                 {"", "", false},
		"amazonaws.com":                                {"", "", false},
		"s3.us-east-1.amazonaws.com.evil.example":      {"", "", false},
		"storage.example.com":                          {"", "", false},
		"lambda.notaregion.amazonaws.com":              {"", "", false},
	} {
		service, region, ok := awsEndpoint(host)
		if service != want.service || region != want.region || ok != want.ok {
			t.Errorf("%s: %q %q %v, want %q %q %v", host, service, region, ok, want.service, want.region, want.ok)
		}
	}
}
