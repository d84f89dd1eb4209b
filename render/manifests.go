package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/proxy/config"
)

// Component names: the app.kubernetes.io/component label and the suffix
// of each object's name.
const (
	compSandbox = "sandbox"
	compProxy   = "egress-proxy"
	compCA      = "egress-ca"
	compTrust   = "egress-trust"
)

// Names of volumes and containers, shared by the pod specs.
const (
	volProxyConfig = "proxy-config"
	volCA          = "egress-ca"
	volCAPublic    = "egress-ca-public"
	volTrust       = "egress-trust"
	volAPIAccess   = "kube-api-access"
	volUpstreamCA  = "upstream-ca"

	// caPublicDir holds only the CA's public certificate, for the
	// init container that builds bundle.pem.
	caPublicDir = "/var/run/keyhole/ca-public"
	// trustWorkDir is where the init container writes bundle.pem, which
	// the sandbox container of a sidecar pod mounts.
	trustWorkDir = "/var/run/keyhole/trust"
	// upstreamCADir is where Options.UpstreamCAConfigMap is mounted.
	upstreamCADir = "/etc/keyhole/upstream-ca"
	// caDir is where the CA's certificate and key are mounted, matching
	// config.DefaultCACert and config.DefaultCAKey.
	caDir = "/var/run/keyhole/ca"

	// trustFieldManager owns data.bundle.pem of <claim>-egress-trust,
	// so GitOps tools, which own only what the render declares, never
	// fight the init container over it.
	trustFieldManager = "keyhole-egress-trust"

	// proxyUID runs the proxy and its init containers. In a sidecar pod
	// it is the one user whose connections the nat rules leave
	// unredirected, so it must be a user no sandbox image runs as: not
	// 0, not 65532 (the distroless and Chainguard "nonroot" that many
	// images use), not 65534 (nobody). docs/render.md.
	proxyUID = 64123

	// configHashAnnotation on a pod template changes when proxy.json
	// does, so a new config rolls the pods that load it.
	configHashAnnotation = "keyhole.dev/proxy-config-sha256"
)

// sandboxInput is what one sandbox's manifests are built from.
type sandboxInput struct {
	sb        compiler.Sandbox
	image     string
	env       []envVar
	proxyJSON []byte
	opts      Options
	shared    *shared
	// secrets is sb.Secrets(), which two objects read.
	secrets []compiler.SecretKeys
}

// shared holds the parts of the manifests that depend on the Options
// alone, built once per render and put, as they are, into every sandbox's
// objects: at 10,000 Connections building them again for each of
// thousands of pods was most of what the manifests allocated. They are
// only read once built (the emitter only reads; nothing that builds an
// object changes a part it did not make), so the render workers share
// them. TestSharedUnchanged checks that a render leaves them as built.
// Each is fixed, so that an emitter writes it once and copies it after.
type shared struct {
	restricted       *fixed // the proxy's and trust publisher's securityContext
	sandboxSecurity  *fixed
	podSeccomp       *fixed // the sandbox-only pod's securityContext
	proxyPodSecurity *fixed
	sandboxMounts    *fixed
	netInit          *fixed
	trustEnv         *fixed
	initResources    *fixed
	proxyPorts       *fixed
	proxyResources   *fixed
	startupProbe     *fixed
	readinessProbe   *fixed
	livenessProbe    *fixed
	apiAccessVolume  *fixed
	trustVolume      *fixed
}

func newShared(opts Options) *shared {
	probe := func(path string, period, failures int) obj {
		return obj{
			"httpGet":          obj{"path": path, "port": "admin"},
			"periodSeconds":    period,
			"failureThreshold": failures,
		}
	}
	in := sandboxInput{opts: opts}
	return &shared{
		restricted:      fix(restricted()),
		sandboxSecurity: fix(in.sandboxSecurity()),
		podSeccomp:      fix(obj{"seccompProfile": obj{"type": "RuntimeDefault"}}),
		proxyPodSecurity: fix(obj{
			"fsGroup":        proxyUID,
			"seccompProfile": obj{"type": "RuntimeDefault"},
		}),
		sandboxMounts: fix(list{obj{
			"name": volTrust, "mountPath": TrustDir, "readOnly": true,
		}}),
		netInit: fix(in.netInitContainer()),
		trustEnv: fix(list{
			obj{"name": "POD_NAMESPACE", "valueFrom": obj{"fieldRef": obj{"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
		}),
		initResources: fix(obj{"requests": obj{"cpu": "10m", "memory": "16Mi"}}),
		proxyPorts: fix(list{
			obj{"name": "proxy", "containerPort": ProxyPort, "protocol": "TCP"},
			obj{"name": "admin", "containerPort": AdminPort, "protocol": "TCP"},
		}),
		proxyResources: fix(obj{
			"requests": obj{"cpu": "50m", "memory": "64Mi"},
			"limits":   obj{"memory": "256Mi"},
		}),
		startupProbe:   fix(probe("/readyz", 1, 120)),
		readinessProbe: fix(probe("/readyz", 5, 3)),
		livenessProbe:  fix(probe("/healthz", 10, 3)),
		apiAccessVolume: fix(obj{"name": volAPIAccess, "projected": obj{
			"defaultMode": 0o444,
			"sources": list{
				obj{"serviceAccountToken": obj{"path": "token", "expirationSeconds": 3607}},
				obj{"configMap": obj{"name": "kube-root-ca.crt", "items": list{obj{"key": "ca.crt", "path": "ca.crt"}}}},
				obj{"downwardAPI": obj{"items": list{obj{"path": "namespace", "fieldRef": obj{"apiVersion": "v1", "fieldPath": "metadata.namespace"}}}}},
			},
		}}),
		trustVolume: fix(obj{"name": volTrust, "emptyDir": obj{"medium": "Memory", "sizeLimit": "4Mi"}}),
	}
}

func (in sandboxInput) name(comp string) string { return in.sb.Name + "-" + comp }

func (in sandboxInput) sidecar() bool { return in.opts.ProxyMode == ModeSidecar }

// selector is the immutable subset of labels a Deployment, Service and
// NetworkPolicy select a component's pods by.
func (in sandboxInput) selector(comp string) obj {
	return obj{
		"app.kubernetes.io/name":      "keyhole",
		"app.kubernetes.io/instance":  in.sb.Name,
		"app.kubernetes.io/component": comp,
	}
}

func (in sandboxInput) labels(comp string) obj {
	l := in.selector(comp)
	l["app.kubernetes.io/part-of"] = "keyhole"
	l["app.kubernetes.io/managed-by"] = "keyhole"
	return l
}

func (in sandboxInput) object(apiVersion, kind, name, comp string) obj {
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

// manifests lists a sandbox's Kubernetes objects.
func manifests(in sandboxInput) []obj {
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

func (in sandboxInput) proxyConfigMap() obj {
	o := in.object("v1", "ConfigMap", in.name(compProxy), compProxy)
	o["data"] = obj{"proxy.json": string(in.proxyJSON)}
	return o
}

// trustConfigMap declares <claim>-egress-trust without data: its
// bundle.pem is published by the proxy pod's init container, because the
// CA is only known once cert-manager has issued it.
func (in sandboxInput) trustConfigMap() obj {
	o := in.object("v1", "ConfigMap", in.name(compTrust), compTrust)
	o["metadata"].(obj)["annotations"] = obj{
		"keyhole.dev/bundle": "bundle.pem is written in the cluster by the " + in.proxyPodOwner() +
			" init container egress-trust-publish (field manager " + trustFieldManager + "): the system roots plus the public ca.crt of " + in.name(compCA),
	}
	return o
}

func (in sandboxInput) proxyPodOwner() string {
	if in.sidecar() {
		return "Deployment " + in.name(compSandbox)
	}
	return "Deployment " + in.name(compProxy)
}

// issuer is a self-signed Issuer that bootstraps the sandbox's CA. No CA
// Issuer follows it: the proxy mints its leaf certificates in process.
func (in sandboxInput) issuer() obj {
	o := in.object("cert-manager.io/v1", "Issuer", in.name("egress-selfsigned"), compCA)
	o["spec"] = obj{"selfSigned": obj{}}
	return o
}

func (in sandboxInput) certificate() obj {
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
func (in sandboxInput) serviceAccount() obj {
	o := in.object("v1", "ServiceAccount", in.name(compProxy), compProxy)
	o["automountServiceAccountToken"] = false
	return o
}

// trustRole may read and patch one ConfigMap: <claim>-egress-trust.
func (in sandboxInput) trustRole() obj {
	o := in.object("rbac.authorization.k8s.io/v1", "Role", in.name(compTrust), compTrust)
	o["rules"] = list{obj{
		"apiGroups":     list{""},
		"resources":     list{"configmaps"},
		"resourceNames": list{in.name(compTrust)},
		"verbs":         list{"get", "patch"},
	}}
	return o
}

func (in sandboxInput) trustRoleBinding() obj {
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

func (in sandboxInput) configHash() obj {
	sum := sha256.Sum256(in.proxyJSON)
	return obj{configHashAnnotation: hex.EncodeToString(sum[:])}
}

func (in sandboxInput) sandboxDeployment() obj {
	o := in.object("apps/v1", "Deployment", in.name(compSandbox), compSandbox)
	pod := obj{
		"automountServiceAccountToken": false,
		"securityContext":              in.shared.podSeccomp,
		"containers":                   list{in.sandboxContainer()},
	}
	var ann obj
	if in.sidecar() {
		in.addProxy(pod, true)
		ann = in.configHash()
	} else {
		pod["volumes"] = list{obj{
			"name": volTrust,
			"configMap": obj{
				"name": in.name(compTrust),
				"items": list{
					obj{"key": "bundle.pem", "path": "bundle.pem"},
					obj{"key": TrustStoreName, "path": TrustStoreName},
					obj{"key": WgetRCName, "path": WgetRCName},
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
func (in sandboxInput) sandboxContainer() obj {
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

// sandboxSecurity is the sandbox container's securityContext. In a
// sidecar pod the nat rules exempt the proxy's UID, so the sandbox, which
// may run as root, loses the capabilities that would let it become that
// user (SETUID, SETGID) or change the rules (NET_ADMIN), and raw sockets
// (NET_RAW); no_new_privs keeps a setuid binary from giving them back.
func (in sandboxInput) sandboxSecurity() obj {
	sc := obj{
		"allowPrivilegeEscalation": false,
		"seccompProfile":           obj{"type": "RuntimeDefault"},
	}
	if in.sidecar() {
		sc["capabilities"] = obj{"drop": list{"NET_ADMIN", "NET_RAW", "SETGID", "SETUID"}}
	}
	return sc
}

func restricted() obj {
	return obj{
		"runAsNonRoot":             true,
		"runAsUser":                proxyUID,
		"runAsGroup":               proxyUID,
		"readOnlyRootFilesystem":   true,
		"allowPrivilegeEscalation": false,
		"capabilities":             obj{"drop": list{"ALL"}},
		"seccompProfile":           obj{"type": "RuntimeDefault"},
	}
}

// addProxy adds the egress proxy, the init containers that build and
// publish bundle.pem, and their volumes to pod. As a sidecar the proxy is
// a native sidecar (an init container that keeps running), started and
// ready before the sandbox container starts.
func (in sandboxInput) addProxy(pod obj, sidecar bool) {
	listen := fmt.Sprintf(":%d", ProxyPort)
	if sidecar {
		listen = fmt.Sprintf("127.0.0.1:%d", ProxyPort)
	}
	proxy := in.proxyContainer(listen)
	inits := list{in.trustContainer()}
	if sidecar {
		// The rules go in first: no container of the pod starts with
		// its egress open.
		inits = append(list{in.shared.netInit}, inits...)
		proxy["args"] = append(proxy["args"].(list), "--transparent-listen", fmt.Sprintf("127.0.0.1:%d", TransparentPort))
		proxy["restartPolicy"] = "Always"
		inits = append(inits, proxy)
	} else {
		pod["containers"] = list{proxy}
	}
	pod["initContainers"] = inits
	pod["serviceAccountName"] = in.name(compProxy)
	pod["automountServiceAccountToken"] = false
	pod["securityContext"] = in.shared.proxyPodSecurity
	pod["volumes"] = in.proxyVolumes()
}

func (in sandboxInput) proxyVolumes() list {
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

// secretVolume names the volume of one Secret. Volume names are DNS
// labels, Secret names DNS subdomains (dots, up to 253 characters), so a
// name that does not fit is replaced by a stable hash of it.
func secretVolume(secret string) string {
	name := "secret-" + secret
	if len(name) <= 63 && dnsLabel.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(secret))
	return "secret-" + hex.EncodeToString(sum[:8])
}

func (in sandboxInput) proxyContainer(listen string) obj {
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
func (in sandboxInput) trustContainer() obj {
	return obj{
		"name":  "egress-trust-publish",
		"image": in.opts.ProxyImage,
		"args": list{
			"trust-bundle",
			"--ca", caPublicDir + "/ca.crt",
			"--out", trustWorkDir + "/bundle.pem",
			"--truststore", trustWorkDir + "/" + TrustStoreName,
			"--wgetrc", trustWorkDir + "/" + WgetRCName,
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

// netInitContainer installs transparent mode's nat and filter rules in
// the pod's network namespace and exits. It is the pod's only container
// with NET_ADMIN, and needs root for it: Kubernetes grants an added
// capability only to a root process.
func (in sandboxInput) netInitContainer() obj {
	return obj{
		"name":  "egress-transparent-init",
		"image": in.opts.NetInitImage,
		"args": list{
			"transparent-init",
			"--proxy-uid", fmt.Sprint(proxyUID),
			"--port", fmt.Sprint(TransparentPort),
		},
		"resources": obj{"requests": obj{"cpu": "10m", "memory": "16Mi"}},
		"securityContext": obj{
			"runAsUser":                0,
			"runAsNonRoot":             false,
			"readOnlyRootFilesystem":   true,
			"allowPrivilegeEscalation": false,
			"capabilities":             obj{"drop": list{"ALL"}, "add": list{"NET_ADMIN"}},
			"seccompProfile":           obj{"type": "RuntimeDefault"},
		},
	}
}

func (in sandboxInput) proxyDeployment() obj {
	o := in.object("apps/v1", "Deployment", in.name(compProxy), compProxy)
	pod := obj{}
	in.addProxy(pod, false)
	return deployment(o, in.selector(compProxy), in.labels(compProxy), in.configHash(), pod)
}

func (in sandboxInput) proxyService() obj {
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
func (in sandboxInput) sandboxNetworkPolicy() obj {
	o := in.object("networking.k8s.io/v1", "NetworkPolicy", in.name(compSandbox), compSandbox)
	dns := obj{"ports": list{obj{"protocol": "UDP", "port": 53}, tcp(53)}}
	var egress list
	if in.sidecar() {
		egress = list{dns, obj{"ports": list{tcp(443), tcp(6443)}}}
	} else {
		egress = list{dns, obj{
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

// proxyNetworkPolicy admits only the sandbox to the proxy port; the admin
// port stays open for the kubelet's probes and metrics scrapers.
func (in sandboxInput) proxyNetworkPolicy() obj {
	o := in.object("networking.k8s.io/v1", "NetworkPolicy", in.name(compProxy), compProxy)
	o["spec"] = obj{
		"podSelector": obj{"matchLabels": in.selector(compProxy)},
		"policyTypes": list{"Ingress"},
		"ingress": list{
			obj{
				"from":  list{obj{"podSelector": obj{"matchLabels": in.selector(compSandbox)}}},
				"ports": list{tcp(ProxyPort)},
			},
			obj{"ports": list{tcp(AdminPort)}},
		},
	}
	return o
}
