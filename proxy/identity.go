package proxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/compute/metadata"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"golang.org/x/oauth2"

	"keyhole.dev/keyhole/proxy/config"
)

// workloadIdentity obtains the proxy's own credentials, for injections
// whose identity is config.IdentityWorkload: from what its pod's
// environment names (EKS IRSA's web identity token and role, EKS Pod
// Identity's container credentials endpoint, GKE's metadata server).
// Its calls are the proxy's own, made with its own client to the
// endpoints the environment names, never a sandbox's request: they do not
// pass the sandbox's address rules, which refuse the link-local addresses
// those endpoints live at (169.254.169.254, 169.254.170.23).
type workloadIdentity struct {
	getenv func(string) string
	// client makes the calls; its timeout bounds each.
	client *http.Client
}

// newWorkloadIdentity reads the proxy's environment at each exchange:
// an identity the pod gains or loses is used from the next one on.
func newWorkloadIdentity() *workloadIdentity {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // the environment's proxy variables are the sandbox's business
	return &workloadIdentity{getenv: os.Getenv, client: &http.Client{Transport: t, Timeout: mintTimeout}}
}

// errNoWorkloadIdentity is an identity the environment does not name.
var errNoWorkloadIdentity = errors.New("the proxy's environment names no workload identity")

// awsCredentials returns the AWS credentials of the pod's identity and
// when they expire (zero: never said). The container credentials
// endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI, with the token of
// AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE) comes first, as in the AWS
// SDKs; then a web identity token for a role (AWS_ROLE_ARN,
// AWS_WEB_IDENTITY_TOKEN_FILE), exchanged with STS's
// AssumeRoleWithWebIdentity, at AWS_ENDPOINT_URL_STS when set. Errors
// name the variables, the endpoint and the service's error code, never a
// token or a key.
func (w *workloadIdentity) awsCredentials(ctx context.Context) (aws.Credentials, error) {
	var p aws.CredentialsProvider
	switch full, role, tokenFile := w.getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI"), w.getenv("AWS_ROLE_ARN"), w.getenv("AWS_WEB_IDENTITY_TOKEN_FILE"); {
	case full != "":
		if err := checkContainerEndpoint(full); err != nil {
			return aws.Credentials{}, fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI: %w", err)
		}
		tokFile, tok := w.getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"), w.getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
		p = endpointcreds.New(full, func(o *endpointcreds.Options) {
			o.HTTPClient = w.client
			o.Retryer = aws.NopRetryer{}
			o.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(func() (string, error) {
				if tokFile == "" {
					return tok, nil
				}
				b, err := os.ReadFile(tokFile)
				if err != nil {
					return "", errors.New("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE cannot be read")
				}
				return strings.TrimSpace(string(b)), nil
			})
		})
		c, err := p.Retrieve(ctx)
		if err != nil {
			return aws.Credentials{}, awsIdentityError("the container credentials endpoint "+policyClipURL(full), err)
		}
		return c, nil
	case role != "" && tokenFile != "":
		region := w.getenv("AWS_REGION")
		if region == "" {
			region = w.getenv("AWS_DEFAULT_REGION")
		}
		if region == "" {
			region = "us-east-1"
		}
		o := sts.Options{Region: region, HTTPClient: w.client, Retryer: aws.NopRetryer{}}
		if ep := w.getenv("AWS_ENDPOINT_URL_STS"); ep != "" {
			o.BaseEndpoint = aws.String(ep)
		}
		session := w.getenv("AWS_ROLE_SESSION_NAME")
		if session == "" {
			session = "keyhole-proxy"
		}
		p = stscreds.NewWebIdentityRoleProvider(sts.New(o), role, stscreds.IdentityTokenFile(tokenFile), func(o *stscreds.WebIdentityRoleOptions) {
			o.RoleSessionName = session
		})
		c, err := p.Retrieve(ctx)
		if err != nil {
			return aws.Credentials{}, awsIdentityError("STS AssumeRoleWithWebIdentity for role "+policyClipURL(role), err)
		}
		return c, nil
	}
	return aws.Credentials{}, fmt.Errorf("%w: neither AWS_CONTAINER_CREDENTIALS_FULL_URI nor AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE are set (the proxy's ServiceAccount needs the role: IRSA's eks.amazonaws.com/role-arn, or a Pod Identity association)", errNoWorkloadIdentity)
}

// checkContainerEndpoint accepts the container credentials endpoints
// the AWS SDKs accept: https anywhere, or http on loopback or at the
// ECS and EKS Pod Identity agents' link-local addresses.
func checkContainerEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil {
		return errors.New("not an absolute URL")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() == "localhost" || ip != nil && (ip.IsLoopback() || ip.Equal(net.ParseIP("169.254.170.2")) ||
			ip.Equal(net.ParseIP("169.254.170.23")) || ip.Equal(net.ParseIP("fd00:ec2::23"))) {
			return nil
		}
		return errors.New("an http URL off loopback and the ECS and EKS agents' addresses")
	}
	return errors.New("neither https nor http")
}

// awsIdentityError says why an identity exchange failed: the service's
// error code, a timeout or an unreachable endpoint. The SDK's own text
// can quote the service's answer, which it leaves out.
func awsIdentityError(what string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) && errorCode.MatchString(strings.ToLower(ae.ErrorCode())) {
		return fmt.Errorf("%s answered error %s", what, ae.ErrorCode())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s did not answer in time", what)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s cannot be reached", what)
	}
	return fmt.Errorf("%s sent no credentials the proxy can use", what)
}

// awsWorkloadKey is the token cache's key of the pod's AWS identity: one
// for every Connection that signs with it.
const awsWorkloadKey = "awsSigV4\x00workload"

// workloadAWS returns the pod identity's AWS credentials from the token
// cache, which runs one exchange at a time, renews them before they
// expire and holds an exchange's failure for mintRetry (tokenCache). The
// cache keeps one secret value per key: the three parts are joined with
// NULs, which none of them holds.
func (m *oauthMinter) workloadAWS() (aws.Credentials, error) {
	id := m.identity.Load()
	tok, _, err := m.workload.get(awsWorkloadKey, nil, func(ctx context.Context) (Secret, time.Time, error) {
		c, err := id.awsCredentials(ctx)
		if err != nil {
			return Secret{}, time.Time{}, err
		}
		if c.AccessKeyID == "" || c.SecretAccessKey == "" || strings.Contains(c.AccessKeyID+c.SecretAccessKey+c.SessionToken, "\x00") {
			return Secret{}, time.Time{}, errors.New("the AWS workload identity gave no usable credentials")
		}
		var expires time.Time
		if c.CanExpire {
			expires = c.Expires
		}
		return Secret{v: c.AccessKeyID + "\x00" + c.SecretAccessKey + "\x00" + c.SessionToken}, expires, nil
	})
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("%w: %w", ErrCredentialUnavailable, err)
	}
	parts := strings.SplitN(tok.v, "\x00", 3)
	return aws.Credentials{AccessKeyID: parts[0], SecretAccessKey: parts[1], SessionToken: parts[2]}, nil
}

// googleWorkload exchanges for g's token with the pod's metadata server.
func (m *oauthMinter) googleWorkload(g *config.GoogleInject) exchange {
	id := m.identity.Load()
	return func(ctx context.Context) (Secret, time.Time, error) {
		return id.googleToken(ctx, g)
	}
}

// googleToken asks the pod's metadata server (GCE_METADATA_HOST, else
// metadata.google.internal, with Metadata-Flavor: Google) for the
// default service account's access token of g's scopes, or an ID token
// for g's audience. Errors name the metadata path and its status, never
// its answer.
func (w *workloadIdentity) googleToken(ctx context.Context, g *config.GoogleInject) (Secret, time.Time, error) {
	c := metadata.NewWithOptions(&metadata.Options{Client: w.client})
	path := "instance/service-accounts/default/token"
	if g.Audience != "" {
		path = "instance/service-accounts/default/identity"
	}
	q := url.Values{}
	if g.Audience != "" {
		q.Set("audience", g.Audience)
		q.Set("format", "full")
	} else {
		q.Set("scopes", strings.Join(g.Scopes, ","))
	}
	body, err := c.GetWithContext(ctx, path+"?"+q.Encode())
	if err != nil {
		var me *metadata.Error
		var nd metadata.NotDefinedError
		switch {
		case errors.As(err, &me):
			return Secret{}, time.Time{}, fmt.Errorf("the metadata server answered %s with %d %s", path, me.Code, http.StatusText(me.Code))
		case errors.As(err, &nd):
			return Secret{}, time.Time{}, fmt.Errorf("the metadata server has no %s: the pod runs with no Google service account", path)
		case errors.Is(err, context.DeadlineExceeded):
			return Secret{}, time.Time{}, fmt.Errorf("the metadata server did not answer %s in time", path)
		}
		return Secret{}, time.Time{}, fmt.Errorf("the metadata server cannot be reached for %s", path)
	}
	if g.Audience != "" {
		return parseMetadataIDToken(body)
	}
	return parseMetadataAccessToken([]byte(body), time.Now())
}

// parseMetadataAccessToken reads the metadata server's token answer:
// {"access_token", "expires_in", "token_type": "Bearer"}. Errors never
// quote it.
func parseMetadataAccessToken(b []byte, now time.Time) (Secret, time.Time, error) {
	var r struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Secret{}, time.Time{}, errors.New("the metadata server's token answer is not a JSON object")
	}
	tok, err := checkAccessToken(&oauth2.Token{AccessToken: r.AccessToken, TokenType: r.TokenType})
	if err != nil {
		return Secret{}, time.Time{}, err
	}
	if r.ExpiresIn <= 0 || r.ExpiresIn > 24*3600 {
		return Secret{}, time.Time{}, errors.New("the metadata server's token answer has no expires_in of at most a day")
	}
	return tok, now.Add(time.Duration(r.ExpiresIn) * time.Second), nil
}

// parseMetadataIDToken reads the metadata server's ID token: a JWT,
// whose exp claim says when it expires. The proxy checks no signature:
// the token is the metadata server's to vouch for and the upstream's to
// verify. Errors never quote it.
func parseMetadataIDToken(s string) (Secret, time.Time, error) {
	s = strings.TrimSpace(s)
	tok, err := checkAccessToken(&oauth2.Token{AccessToken: s})
	if err != nil {
		return Secret{}, time.Time{}, err
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Secret{}, time.Time{}, errors.New("the metadata server's ID token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Secret{}, time.Time{}, errors.New("the metadata server's ID token is not a JWT")
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return Secret{}, time.Time{}, errors.New("the metadata server's ID token's claims are not a JSON object")
	}
	exp, err := claims.Exp.Int64()
	if err != nil || exp <= 0 || exp > 1<<40 {
		return Secret{}, time.Time{}, errors.New("the metadata server's ID token has no exp")
	}
	return tok, time.Unix(exp, 0), nil
}
