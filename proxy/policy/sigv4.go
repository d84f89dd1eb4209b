package policy

import "strings"

// OverrideEncodings returns the Content-Encoding values a body's
// override check reads the body under. On a host whose requests the
// proxy signs with AWS SigV4 an "aws-chunked" value is left out: it frames
// an SDK's streaming upload in signed chunks rather than compressing it,
// the SDKs send it with no Content-Type (which the check reads as a
// possible form), and AWS's endpoints, the only hosts such an injection
// serves, read no method-override field. Every other value, and every
// value on any other host, is kept: a body in a coding the check cannot
// read is refused.
func (h *HostPolicy) OverrideEncodings(enc []string) []string {
	if h == nil || h.Inject.AWSSigV4 == nil {
		return enc
	}
	var out []string
	for _, v := range enc {
		var kept []string
		for f := range strings.SplitSeq(v, ",") {
			if !strings.EqualFold(strings.TrimSpace(f), "aws-chunked") {
				kept = append(kept, f)
			}
		}
		if len(kept) > 0 {
			out = append(out, strings.Join(kept, ","))
		}
	}
	return out
}
