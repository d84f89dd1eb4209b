package proxycmd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"keyhole.dev/keyhole/proxy/netrules"
)

// transparentInitCommand installs transparent mode's packet-filter rules
// in the pod's network namespace; the rendered pod runs it as its first
// init container, the only one with NET_ADMIN.
const transparentInitCommand = "transparent-init"

// runTransparentInit builds the rules from the flags and applies them with iptables-restore and, when the
// kernel has IPv6, ip6tables-restore. Any failure is an error: a pod
// whose rules did not install must not start its sandbox.
func runTransparentInit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := subcommandFlags(transparentInitCommand, "--proxy-uid UID --port PORT --dns-port PORT [--admin-port PORT] [--resolv-conf FILE] [--hosts FILE] [--names-dir DIR] [--print]", stderr)
	var (
		uid        = fs.Int("proxy-uid", -1, "the user the proxy runs as; its connections alone leave unredirected (required)")
		port       = fs.Int("port", 0, "the proxy's transparent listener port on 127.0.0.1 (required)")
		dnsPort    = fs.Int("dns-port", 0, "the proxy's DNS listener port on 127.0.0.1, UDP and TCP: every other user's port 53 is redirected to it (required)")
		adminPort  = fs.Int("admin-port", 0, "the proxy's admin port, refused to every other user of the pod; 0 for none")
		resolvConf = fs.String("resolv-conf", "/etc/resolv.conf", "the pod's resolv.conf, copied with the hosts file by --names-dir")
		hosts      = fs.String("hosts", "/etc/hosts", "the pod's hosts file, copied with resolv.conf by --names-dir")
		namesDir   = fs.String("names-dir", "", "copy resolv.conf and the hosts file into this directory, for the proxy to mount as its own")
		printOnly  = fs.Bool("print", false, "print the iptables-restore input instead of applying it (--names-dir still copies)")
		ipv6Probe  = fs.String("ipv6-probe", "/proc/net/if_inet6", "a file that exists when the kernel has IPv6")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "keyhole-proxy "+transparentInitCommand+": "+format+"\n", args...)
		return code
	}
	if fs.NArg() > 0 {
		return fail(exitUsage, "unexpected argument %q", fs.Arg(0))
	}
	c := netrules.Config{ProxyUID: *uid, Port: *port, DNSPort: *dnsPort, AdminPort: *adminPort}
	v4, err := netrules.IPv4(c)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	v6, err := netrules.IPv6(c)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	if *namesDir != "" {
		rc, err := os.ReadFile(*resolvConf)
		if err != nil {
			return fail(exitUsage, "--resolv-conf: %v", err)
		}
		hostsData, err := os.ReadFile(*hosts)
		if err != nil {
			return fail(exitUsage, "--hosts: %v", err)
		}
		if err := copyNames(*namesDir, rc, hostsData); err != nil {
			return fail(exitRuntime, "--names-dir: %v", err)
		}
	}
	if *printOnly {
		stdout.Write(v4)
		stdout.Write(v6)
		return exitOK
	}
	if err := restore(ctx, "iptables-restore", v4); err != nil {
		return fail(exitRuntime, "%v", err)
	}
	if _, err := os.Stat(*ipv6Probe); err != nil {
		fmt.Fprintf(stderr, "keyhole-proxy %s: IPv6 rules skipped: the kernel has no IPv6 (%s absent), so the pod has no IPv6 egress\n", transparentInitCommand, *ipv6Probe)
	} else if err := restore(ctx, "ip6tables-restore", v6); err != nil {
		return fail(exitRuntime, "%v", err)
	}
	admin := "no admin port"
	if *adminPort != 0 {
		admin = fmt.Sprintf("admin port %d refused", *adminPort)
	}
	fmt.Fprintf(stderr, "keyhole-proxy %s: TCP of every user but %d redirected to 127.0.0.1:%d, DNS to 127.0.0.1:%d; %s; other egress refused\n", transparentInitCommand, *uid, *port, *dnsPort, admin)
	return exitOK
}

// copyNames writes the pod's resolv.conf (the bytes the rules were made
// from) and hosts file into dir, read-only, each replaced in one rename.
// Every container of a pod shares one /etc/hosts and one
// /etc/resolv.conf, writable by a sandbox that runs as root; the proxy
// mounts these copies over its own instead, taken before the sandbox
// starts, so what names resolve to for the proxy is not the sandbox's
// to change (docs/render.md).
func copyNames(dir string, resolvConf, hosts []byte) error {
	for _, f := range []struct {
		name string
		data []byte
	}{{"resolv.conf", resolvConf}, {"hosts", hosts}} {
		tmp, err := os.CreateTemp(dir, "."+f.name+"-*")
		if err != nil {
			return err
		}
		_, err = tmp.Write(f.data)
		if err == nil {
			err = tmp.Chmod(0o444)
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), filepath.Join(dir, f.name))
		}
		if err != nil {
			os.Remove(tmp.Name())
			return err
		}
	}
	return nil
}

// restore feeds rules to an iptables-restore tool, adding to the tables
// (--noflush) so rules another init container installed stay.
func restore(ctx context.Context, tool string, rules []byte) error {
	path, err := exec.LookPath(tool)
	if err != nil {
		return fmt.Errorf("%s not found: the image needs the Debian iptables package: %w", tool, err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "--noflush")
	cmd.Stdin = bytes.NewReader(rules)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", tool, err, strings.TrimSpace(out.String()))
	}
	return nil
}
