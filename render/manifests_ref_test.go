package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/proxy/config"
)

// refInput builds a sandbox's objects as maps, as the renderer did before
// it wrote them directly (writeManifests): the reference the direct
// writer is held to, byte for byte, by TestManifestsMatchMaps and
// FuzzManifestsMatchMaps.
type refInput sandboxInput

func (in refInput) name(comp string) string { return in.sb.Name + "-" + comp }

func (in refInput) sidecar() bool { return in.opts.ProxyMode == ModeSidecar }

// selector is the immutable subset of labels a Deployment, Service and
// NetworkPolicy select a component's pods by.
func (in refInput) selector(comp string) obj {
	return obj{
		"app.kubernetes.io/name":      "keyhole",
		"app.kubernetes.io/instance":  in.sb.Name,
		"app.kubernetes.io/component": comp,
	}
}

func (in refInput) labels(comp string) obj {
	l := in.selector(comp)
	l["app.kubernetes.io/part-of"] = "keyhole"
	l["app.kubernetes.io/managed-by"] = "keyhole"
	return l
}

func (in refInput) object(apiVersion, kind, name, comp string) obj {
	return obj{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata": obj{
			"name":      name,
			"namespace": in.sb.Namespace,
			"labels":    in.labels(comp),
		},
	}
}

// refManifests lists a sandbox's Kubernetes objects.
func refManifests(in refInput) []obj {
	objs := []obj{
		in.proxyConfigMap(),
		in.trustConfigMap(),
		in.issuer(),
		in.certificate(),
		in.serviceAccount(),
		in.trustRole(),
		in.trustRoleBinding(),
		in.sandboxDeployment(),
		in.sandboxNetworkPolicy(),
	}
	if !in.sidecar() {
		objs = append(objs, in.proxyDeployment(), in.proxyService(), in.proxyNetworkPolicy())
	}
	return objs
}

func (in refInput) proxyConfigMap() obj {
	o := in.object("v1", "ConfigMap", in.name(compProxy), compProxy)
	o["data"] = obj{"proxy.json": string(in.proxyJSON)}
	return o
}

// trustConfigMap declares <claim>-egress-trust without data: its
// bundle.pem is published by the proxy pod's init container, because the
// CA is only known once cert-manager has issued it.
func (in refInput) trustConfigMap() obj {
	o := in.object("v1", "ConfigMap", in.name(compTrust), compTrust)
	o["metadata"].(obj)["annotations"] = obj{
		"keyhole.dev/bundle": "bundle.pem is written in the cluster by the " + in.proxyPodOwner() +
			" init container egress-trust-publish (field manager " + trustFieldManager + "): the system roots plus the public ca.crt of " + in.name(compCA),
	}
	return o
}

func (in refInput) proxyPodOwner() string {
	if in.sidecar() {
		return "Deployment " + in.name(compSandbox)
	}
	return "Deployment " + in.name(compProxy)
}

// issuer is a self-signed Issuer that bootstraps the sandbox's CA. No CA
// Issuer follows it: the proxy mints its leaf certificates in process.
func (in refInput) issuer() obj {
	o := in.object("cert-manager.io/v1", "Issuer", in.name("egress-selfsigned"), compCA)
	o["spec"] = obj{"selfSigned": obj{}}
	return o
}

func (in refInput) certificate() obj {
	o := in.object("cert-manager.io/v1", "Certificate", in.name(compCA), compCA)
	o["spec"] = obj{
		"secretName": in.name(compCA),
		"secretTemplate": obj{
			"labels": in.labels(compCA),
		},
		"isCA":       true,
		"commonName": in.name(compCA),
		"subject":    obj{"organizations": list{"keyhole"}},
		// 90 days, renewed 30 days ahead; the proxy re-reads a renewed CA.
		"duration":    "2160h0m0s",
		"renewBefore": "720h0m0s",
		"privateKey": obj{
			"algorithm":      "ECDSA",
			"size":           256,
			"rotationPolicy": "Always",
		},
		"usages": list{"cert sign", "crl sign", "digital signature"},
		"issuerRef": obj{
			"group": "cert-manager.io",
			"kind":  "Issuer",
			"name":  in.name("egress-selfsigned"),
		},
	}
	return o
}

// serviceAccount is the proxy pod's identity, used only by the init
// container that publishes bundle.pem; no container gets its token
// automatically.
func (in refInput) serviceAccount() obj {
	o := in.object("v1", "ServiceAccount", in.name(compProxy), compProxy)
	o["automountServiceAccountToken"] = false
	if len(in.sb.ProxyAnnotations) > 0 {
		ann := obj{}
		for k, v := range in.sb.ProxyAnnotations {
			ann[k] = v
		}
		o["metadata"].(obj)["annotations"] = ann
	}
	return o
}

// trustRole may read and patch one ConfigMap: <claim>-egress-trust.
func (in refInput) trustRole() obj {
	o := in.object("rbac.authorization.k8s.io/v1", "Role", in.name(compTrust), compTrust)
	o["rules"] = list{obj{
		"apiGroups":     list{""},
		"resources":     list{"configmaps"},
		"resourceNames": list{in.name(compTrust)},
		"verbs":         list{"get", "patch"},
	}}
	return o
}

func (in refInput) trustRoleBinding() obj {
	o := in.object("rbac.authorization.k8s.io/v1", "RoleBinding", in.name(compTrust), compTrust)
	o["roleRef"] = obj{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": in.name(compTrust)}
	o["subjects"] = list{obj{"kind": "ServiceAccount", "name": in.name(compProxy), "namespace": in.sb.Namespace}}
	return o
}

func deployment(o obj, selector obj, podLabels obj, annotations obj, podSpec obj) obj {
	tmd := obj{"labels": podLabels}
	if len(annotations) > 0 {
		tmd["annotations"] = annotations
	}
	o["spec"] = obj{
		"replicas": 1,
		"selector": obj{"matchLabels": selector},
		"template": obj{"metadata": tmd, "spec": podSpec},
	}
	return o
}

func (in refInput) configHash() obj {
	sum := sha256.Sum256(in.proxyJSON)
	return obj{configHashAnnotation: hex.EncodeToString(sum[:])}
}

func (in refInput) sandboxDeployment() obj {
	o := in.object("apps/v1", "Deployment", in.name(compSandbox), compSandbox)
	pod := obj{
		"automountServiceAccountToken": false,
		"securityContext":              in.shared.podSeccomp,
		"containers":                   list{in.sandboxContainer()},
	}
	var ann obj
	if in.sidecar() {
		in.addProxy(pod, true)
	} else {
		pod["dnsPolicy"] = "None"
		pod["dnsConfig"] = obj{"nameservers": list{"127.0.0.1"}}
		pod["enableServiceLinks"] = true
		pod["volumes"] = list{obj{
			"name": volTrust,
			"configMap": obj{
				"name": in.name(compTrust),
				"items": list{
					obj{"key": "bundle.pem", "path": "bundle.pem"},
					obj{"key": TrustStoreName, "path": TrustStoreName},
					obj{"key": WgetRCName, "path": WgetRCName},
					obj{"key": PHPIniName, "path": PHPIniName},
				},
			},
		}}
	}
	return deployment(o, in.selector(compSandbox), in.labels(compSandbox), ann, pod)
}

// sandboxContainer mounts only the trust bundle: never a Secret, never the
// CA key. The sandbox image is the user's, so it may run as root (an
// agent file's sandbox_options.setup installs packages); it still gets
// the runtime's default seccomp profile and no privilege escalation.
func (in refInput) sandboxContainer() obj {
	env := make(list, 0, len(in.env))
	for _, e := range in.env {
		env = append(env, obj{"name": e.Name, "value": e.Value})
	}
	return obj{
		"name":            compSandbox,
		"image":           in.image,
		"env":             env,
		"volumeMounts":    in.shared.sandboxMounts,
		"securityContext": in.shared.sandboxSecurity,
	}
}

// addProxy adds the egress proxy, the init containers that build and
// publish bundle.pem, and their volumes to pod. As a sidecar the proxy is
// a native sidecar (an init container that keeps running), started and
// ready before the sandbox container starts.
func (in refInput) addProxy(pod obj, sidecar bool) {
	listen := fmt.Sprintf(":%d", ProxyPort)
	if sidecar {
		listen = fmt.Sprintf("127.0.0.1:%d", ProxyPort)
	}
	proxy := in.proxyContainer(listen)
	watch := in.trustContainer()
	watch["name"] = "egress-trust-watch"
	watch["args"] = append(watch["args"].(list), "--watch", "10s")
	watch["restartPolicy"] = "Always"
	watch["resources"] = obj{"requests": obj{"cpu": "5m", "memory": "16Mi"}, "limits": obj{"memory": "64Mi"}}
	inits := list{in.trustContainer(), watch}
	if sidecar {
		// The rules go in first: no container of the pod starts with
		// its egress open.
		inits = append(list{in.shared.netInit}, inits...)
		proxy["args"] = append(proxy["args"].(list), "--transparent-listen", fmt.Sprintf("127.0.0.1:%d", TransparentPort), "--dns-listen", fmt.Sprintf("127.0.0.1:%d", DNSPort))
		proxy["restartPolicy"] = "Always"
		proxy["volumeMounts"] = append(proxy["volumeMounts"].(list),
			obj{"name": volNames, "mountPath": "/etc/hosts", "subPath": "hosts", "readOnly": true},
			obj{"name": volNames, "mountPath": "/etc/resolv.conf", "subPath": "resolv.conf", "readOnly": true})
		inits = append(inits, proxy)
	} else {
		pod["containers"] = list{proxy}
	}
	pod["initContainers"] = inits
	pod["serviceAccountName"] = in.name(compProxy)
	pod["automountServiceAccountToken"] = false
	pod["securityContext"] = in.shared.proxyPodSecurity
	pod["volumes"] = in.proxyVolumes(sidecar)
}

func (in refInput) proxyVolumes(sidecar bool) list {
	vols := list{
		in.shared.apiAccessVolume,
		obj{"name": volCA, "secret": obj{
			"secretName":  in.name(compCA),
			"defaultMode": 0o440,
			"items": list{
				obj{"key": "tls.crt", "path": "tls.crt"},
				obj{"key": "tls.key", "path": "tls.key"},
			},
		}},
		obj{"name": volCAPublic, "secret": obj{
			"secretName":  in.name(compCA),
			"defaultMode": 0o444,
			"items":       list{obj{"key": "ca.crt", "path": "ca.crt"}},
		}},
		obj{"name": volProxyConfig, "configMap": obj{
			"name":  in.name(compProxy),
			"items": list{obj{"key": "proxy.json", "path": "proxy.json"}},
		}},
		in.shared.trustVolume,
	}
	if sidecar {
		vols = append(vols, in.shared.namesVolume)
	}
	if in.opts.UpstreamCAConfigMap != "" {
		vols = append(vols, obj{"name": volUpstreamCA, "configMap": obj{
			"name":  in.opts.UpstreamCAConfigMap,
			"items": list{obj{"key": "ca.crt", "path": "ca.crt"}},
		}})
	}
	for _, s := range in.secrets {
		items := make(list, 0, len(s.Keys))
		for _, k := range s.Keys {
			items = append(items, obj{"key": k, "path": k})
		}
		vols = append(vols, obj{"name": secretVolume(s.Name), "secret": obj{
			"secretName":  s.Name,
			"defaultMode": 0o440,
			"items":       items,
		}})
	}
	return vols
}

func (in refInput) proxyContainer(listen string) obj {
	mounts := list{
		obj{"name": volProxyConfig, "mountPath": ProxyConfigDir, "readOnly": true},
		obj{"name": volCA, "mountPath": caDir, "readOnly": true},
	}
	args := list{
		"--config", ProxyConfigDir + "/proxy.json",
		"--listen", listen,
		"--admin-listen", fmt.Sprintf(":%d", AdminPort),
	}
	for _, r := range in.opts.ProxyResolve {
		args = append(args, "--resolve", r)
	}
	if in.opts.UpstreamCAConfigMap != "" {
		mounts = append(mounts, obj{"name": volUpstreamCA, "mountPath": upstreamCADir, "readOnly": true})
		args = append(args, "--upstream-ca", upstreamCADir+"/ca.crt")
	}
	for _, s := range in.secrets {
		mounts = append(mounts, obj{
			"name":      secretVolume(s.Name),
			"mountPath": config.DefaultSecretsDir + "/" + s.Name,
			"readOnly":  true,
		})
	}
	return obj{
		"name":            compProxy,
		"image":           in.opts.ProxyImage,
		"args":            args,
		"ports":           in.shared.proxyPorts,
		"startupProbe":    in.shared.startupProbe,
		"readinessProbe":  in.shared.readinessProbe,
		"livenessProbe":   in.shared.livenessProbe,
		"resources":       in.shared.proxyResources,
		"securityContext": in.shared.restricted,
		"volumeMounts":    mounts,
	}
}

// trustContainer builds bundle.pem from the proxy image's system roots and
// the CA's public certificate, writes it for the pod's containers, and
// publishes it to the <claim>-egress-trust ConfigMap: the proxy binary's
// trust-bundle command, so the pod needs no image but the proxy's. It
// mounts only ca.crt: the CA key is never mounted in this container.
func (in refInput) trustContainer() obj {
	return obj{
		"name":  "egress-trust-publish",
		"image": in.opts.ProxyImage,
		"args": list{
			"trust-bundle",
			"--ca", caPublicDir + "/ca.crt",
			"--out", trustWorkDir + "/bundle.pem",
			"--truststore", trustWorkDir + "/" + TrustStoreName,
			"--wgetrc", trustWorkDir + "/" + WgetRCName,
			"--php-ini", trustWorkDir + "/" + PHPIniName,
			"--bundle-path", BundleFile,
			"--configmap", in.name(compTrust),
			"--field-manager", trustFieldManager,
		},
		"env":             in.shared.trustEnv,
		"resources":       in.shared.initResources,
		"securityContext": in.shared.restricted,
		"volumeMounts": list{
			obj{"name": volCAPublic, "mountPath": caPublicDir, "readOnly": true},
			obj{"name": volTrust, "mountPath": trustWorkDir},
			obj{"name": volAPIAccess, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
		},
	}
}

func (in refInput) proxyDeployment() obj {
	o := in.object("apps/v1", "Deployment", in.name(compProxy), compProxy)
	pod := obj{}
	in.addProxy(pod, false)
	return deployment(o, in.selector(compProxy), in.labels(compProxy), in.configHash(), pod)
}

func (in refInput) proxyService() obj {
	o := in.object("v1", "Service", in.name(compProxy), compProxy)
	o["spec"] = obj{
		"selector": in.selector(compProxy),
		"ports": list{obj{
			"name": "proxy", "port": ProxyPort, "targetPort": "proxy", "protocol": "TCP",
		}},
	}
	return o
}

func tcp(port int) obj { return obj{"protocol": "TCP", "port": port} }

// sandboxNetworkPolicy confines the sandbox's egress. With the proxy in
// its own Deployment the sandbox reaches only the proxy and DNS. As a
// sidecar the proxy shares the sandbox's network namespace, and a
// NetworkPolicy, which applies to whole pods and knows addresses, not
// names, must let the proxy reach its upstreams (HTTPS on 443) and the
// API server (443 or 6443, for the trust bundle); inside the pod the
// transparent-mode rules hold every other user to the proxy
// (docs/render.md).
func (in refInput) sandboxNetworkPolicy() obj {
	o := in.object("networking.k8s.io/v1", "NetworkPolicy", in.name(compSandbox), compSandbox)
	dns := obj{"ports": list{obj{"protocol": "UDP", "port": 53}, tcp(53)}}
	var egress list
	if in.sidecar() {
		egress = list{dns, obj{"ports": list{tcp(443), tcp(6443)}}}
	} else {
		egress = list{obj{
			"to":    list{obj{"podSelector": obj{"matchLabels": in.selector(compProxy)}}},
			"ports": list{tcp(ProxyPort)},
		}}
	}
	o["spec"] = obj{
		"podSelector": obj{"matchLabels": in.selector(compSandbox)},
		"policyTypes": list{"Egress"},
		"egress":      egress,
	}
	return o
}

// proxyNetworkPolicy admits only the sandbox to the proxy port, and every
// pod but keyhole's sandboxes to the admin port.
func (in refInput) proxyNetworkPolicy() obj {
	o := in.object("networking.k8s.io/v1", "NetworkPolicy", in.name(compProxy), compProxy)
	o["spec"] = obj{
		"podSelector": obj{"matchLabels": in.selector(compProxy)},
		"policyTypes": list{"Ingress"},
		"ingress": list{
			obj{
				"from":  list{obj{"podSelector": obj{"matchLabels": in.selector(compSandbox)}}},
				"ports": list{tcp(ProxyPort)},
			},
			obj{
				"from": list{
					obj{"namespaceSelector": obj{}, "podSelector": obj{"matchExpressions": list{obj{"key": "app.kubernetes.io/component", "operator": "NotIn", "values": list{compSandbox}}}}},
					obj{"namespaceSelector": obj{}, "podSelector": obj{"matchExpressions": list{obj{"key": "app.kubernetes.io/name", "operator": "NotIn", "values": list{"keyhole"}}}}},
				},
				"ports": list{tcp(AdminPort)},
			},
		},
	}
	return o
}

// refFiles writes in's objects as the renderer did before writeManifests:
// built as maps by refManifests and written by the emitter.
func refFiles(t *testing.T, in sandboxInput, dir string) []File {
	t.Helper()
	var e emitter
	var files []File
	for _, o := range refManifests(refInput(in)) {
		data, err := e.object(o)
		if err != nil {
			t.Fatalf("the map-built %s: %v", manifestName(o), err)
		}
		files = append(files, File{Path: dir + "/" + manifestName(o), Data: data})
	}
	return files
}

// checkManifestsMatchMaps: writeManifests writes the files, names and
// bytes, that refFiles does for in.
func checkManifestsMatchMaps(t *testing.T, in sandboxInput) {
	t.Helper()
	var e emitter
	got, err := writeManifests(&e, in, "ns/sb", nil)
	if err != nil {
		t.Fatalf("writeManifests: %v", err)
	}
	want := refFiles(t, in, "ns/sb")
	if len(got) != len(want) {
		t.Fatalf("writeManifests wrote %d files, the maps make %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Path != want[i].Path || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("writeManifests wrote %s:\n%s\nthe maps write %s:\n%s", got[i].Path, got[i].Data, want[i].Path, want[i].Data)
		}
	}
}

func manifestInput(t *testing.T, opts Options, sb compiler.Sandbox, env []envVar, proxyJSON string, secrets []compiler.SecretKeys) sandboxInput {
	t.Helper()
	opts, err := opts.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return sandboxInput{sb: sb, image: "img:1", env: env, proxyJSON: []byte(proxyJSON), opts: opts, shared: newShared(opts), secrets: secrets}
}

// TestManifestsMatchMaps: the objects written directly are, byte for
// byte, those built as maps and emitted, in both proxy modes, with and
// without the options that add arguments, mounts and volumes, and with the
// values that take quotes, literal blocks or the Flux annotation.
func TestManifestsMatchMaps(t *testing.T) {
	sb := compiler.Sandbox{Name: "support", Namespace: "agents"}
	env := []envVar{{Name: "HTTPS_PROXY", Value: "http://127.0.0.1:3128"}, {Name: "GH_TOKEN", Value: "omnia-injected-github"}}
	proxyJSON := "{\n  \"kind\": \"ProxyConfig\"\n}\n"
	secrets := []compiler.SecretKeys{{Name: "gh", Keys: []string{"token", "tls.crt"}}, {Name: strings.Repeat("long.", 20) + "name", Keys: []string{"k"}}}
	cases := map[string]struct {
		opts      Options
		sb        compiler.Sandbox
		env       []envVar
		proxyJSON string
		secrets   []compiler.SecretKeys
	}{
		"plain":              {sb: sb, env: env, proxyJSON: proxyJSON, secrets: secrets},
		"no env, no secrets": {sb: sb, proxyJSON: proxyJSON},
		"secret without keys": {sb: sb, env: env, proxyJSON: proxyJSON,
			secrets: []compiler.SecretKeys{{Name: "empty"}}},
		"every option": {sb: sb, env: env, proxyJSON: proxyJSON, secrets: secrets,
			opts: Options{UpstreamCAConfigMap: "corp-ca", ProxyResolve: []string{"a.example:443:10.0.0.1", "b.example:443:b"}, ProxyImage: "proxy:2", NetInitImage: "init:2"}},
		"Flux annotation from proxy.json": {sb: sb, env: env, proxyJSON: "{\"value\": \"${TOKEN}\"}\n", secrets: secrets},
		"Flux annotation from env":        {sb: sb, env: []envVar{{Name: "X", Value: "${X}"}}, proxyJSON: proxyJSON},
		"quoted and literal values": {sb: compiler.Sandbox{Name: "true", Namespace: "123"},
			env:       []envVar{{Name: "A", Value: "line 1\nline 2\n"}, {Name: "B", Value: "a: b"}, {Name: "C", Value: ""}, {Name: "D", Value: "null"}},
			proxyJSON: "x", secrets: []compiler.SecretKeys{{Name: "on", Keys: []string{"0x1", "yes"}}}},
	}
	for name, c := range cases {
		for _, mode := range []string{ModeSidecar, ModeDeployment} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				opts := c.opts
				opts.ProxyMode = mode
				checkManifestsMatchMaps(t, manifestInput(t, opts, c.sb, c.env, c.proxyJSON, c.secrets))
			})
		}
	}
}

// FuzzManifestsMatchMaps: whatever the names, values, config and options
// hold, the objects written directly are those built as maps and emitted.
func FuzzManifestsMatchMaps(f *testing.F) {
	f.Add("support", "agents", "GH_TOKEN", "omnia-injected-github", "{\n}\n", "gh", "token", "", true)
	f.Add("a", "b", "X", "${X}", "${Y}", "s.t", "", "ca", false)
	f.Add("true", "1", "A", "l1\nl2\n", "\"", "on", "yes", "x: y", true)
	f.Fuzz(func(t *testing.T, name, ns, envName, envValue, proxyJSON, secret, key, upstreamCA string, sidecar bool) {
		opts := Options{ProxyMode: ModeDeployment}
		if sidecar {
			opts.ProxyMode = ModeSidecar
		}
		var keys []string
		if key != "" {
			keys = []string{key, key + "2"}
		}
		in := manifestInput(t, opts, compiler.Sandbox{Name: name, Namespace: ns}, []envVar{{Name: envName, Value: envValue}}, proxyJSON,
			[]compiler.SecretKeys{{Name: secret, Keys: keys}})
		// Set after the defaults, which refuse what a render refuses:
		// the writer must agree on any string.
		in.opts.UpstreamCAConfigMap = upstreamCA
		in.opts.ProxyResolve = []string{"h:1:" + name}
		in.opts.ProxyImage = envName
		checkManifestsMatchMaps(t, in)
	})
}

// manifestName is an object's file name inside its sandbox directory:
// <kind>-<name>.yaml, lower case, so a directory listing reads like
// `kubectl get`.
func manifestName(o obj) string {
	name := o["metadata"].(obj)["name"].(string)
	return strings.ToLower(o["kind"].(string)) + "-" + name + ".yaml"
}
