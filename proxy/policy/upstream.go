package policy

// InternalHost reports whether the config lists host (a port after it is
// ignored) in internalHosts: the proxy may reach it at an internal
// address. With an upstream proxy that resolves names itself, it also
// lets the proxy ask for a name that names an internal host by rule.
func (p *Policy) InternalHost(host string) bool { return p.internal[hostName(host)] }
