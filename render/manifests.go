package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

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
	volNames       = "egress-names"
	volProxyState  = "proxy-state"

	// ProxyStateFile is where the rendered proxy keeps the refresh tokens
	// authorization servers rotate: in an emptyDir of the proxy's own, so
	// they outlive a restart of its container (not of its pod), and the
	// proxy needs no right to write the Kubernetes Secret.
	ProxyStateFile = proxyStateDir + "/refresh-tokens.json"
	proxyStateDir  = "/var/run/keyhole/state"

	// caPublicDir holds only the CA's public certificate, for the
	// init container that builds bundle.pem.
	caPublicDir = "/var/run/keyhole/ca-public"
	// trustWorkDir is where the init container writes bundle.pem, which
	// the sandbox container of a sidecar pod mounts.
	trustWorkDir = "/var/run/keyhole/trust"
	// namesDir is where a sidecar pod's first init container copies the
	// pod's resolv.conf and hosts file for the proxy, which mounts them
	// over its own /etc/resolv.conf and /etc/hosts: the ones every
	// container of a pod shares are the sandbox's to write.
	namesDir = "/var/run/keyhole/names"
	// upstreamCADir is where Options.UpstreamCAConfigMap is mounted.
	upstreamCADir = "/etc/keyhole/upstream-ca"
	// caDir is where the CA's certificate and key are mounted, matching
	// config.DefaultCACert and config.DefaultCAKey.
	caDir = "/var/run/keyhole/ca"

	// trustFieldManager owns data.bundle.pem of <claim>-egress-trust,
	// so GitOps tools, which own only what the render declares, never
	// fight the init container over it.
	trustFieldManager = "keyhole-egress-trust"
	// trustWatchInterval is how often egress-trust-watch reads ca.crt;
	// the kubelet updates a Secret volume within about a minute.
	trustWatchInterval = "10s"

	// proxyUID runs the proxy and its init containers. In a sidecar pod
	// it is the one user whose connections the nat rules leave
	// unredirected, so it must be a user no sandbox image runs as: not
	// 0, not 65532 (the distroless and Chainguard "nonroot" that many
	// images use), not 65534 (nobody). docs/render.md.
	proxyUID = 64123

	// configHashAnnotation on the proxy Deployment's pod template changes
	// when proxy.json does, so a new config rolls the proxy's pods. The
	// sidecar pod carries none: it is the sandbox's own pod, which a rule
	// change must not restart, and its proxy reloads the config in place.
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

// names are the names of a sandbox's objects, each used by several.
type names struct {
	sandbox, proxy, trust, ca, selfSigned string
}

func (in sandboxInput) names() names {
	return names{
		sandbox:    in.name(compSandbox),
		proxy:      in.name(compProxy),
		trust:      in.name(compTrust),
		ca:         in.name(compCA),
		selfSigned: in.name("egress-selfsigned"),
	}
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
	watchResources   *fixed // egress-trust-watch, which runs as long as the pod
	proxyPorts       *fixed
	proxyResources   *fixed
	startupProbe     *fixed
	readinessProbe   *fixed
	livenessProbe    *fixed
	apiAccessVolume  *fixed
	trustVolume      *fixed
	namesVolume      *fixed // a sidecar pod's copies of resolv.conf and hosts, for the proxy
	// The proxy's listen addresses, as its arguments give them.
	listen, loopbackListen, adminListen, transparentListen, dnsListen string
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
		initResources:  fix(obj{"requests": obj{"cpu": "10m", "memory": "16Mi"}}),
		watchResources: fix(obj{"requests": obj{"cpu": "5m", "memory": "16Mi"}, "limits": obj{"memory": "64Mi"}}),
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
		trustVolume:       fix(obj{"name": volTrust, "emptyDir": obj{"medium": "Memory", "sizeLimit": "4Mi"}}),
		namesVolume:       fix(obj{"name": volNames, "emptyDir": obj{"medium": "Memory", "sizeLimit": "1Mi"}}),
		listen:            fmt.Sprintf(":%d", ProxyPort),
		loopbackListen:    fmt.Sprintf("127.0.0.1:%d", ProxyPort),
		adminListen:       fmt.Sprintf(":%d", AdminPort),
		transparentListen: fmt.Sprintf("127.0.0.1:%d", TransparentPort),
		dnsListen:         fmt.Sprintf("127.0.0.1:%d", DNSPort),
	}
}

func (in sandboxInput) name(comp string) string { return in.sb.Name + "-" + comp }

func (in sandboxInput) sidecar() bool { return in.opts.ProxyMode == ModeSidecar }

// sandboxSecurity is the sandbox container's securityContext. The
// sandbox, which may run as root, never gets raw sockets (NET_RAW: forged
// packets and ARP on the pod network, which a NetworkPolicy does not
// see) or a say over the pod's network (NET_ADMIN). In a sidecar pod the
// nat rules exempt the proxy's UID, so it also loses the capabilities that
// would let it become that user (SETUID, SETGID); no_new_privs keeps a
// setuid binary from giving them back.
func (in sandboxInput) sandboxSecurity() obj {
	sc := obj{
		"allowPrivilegeEscalation": false,
		"capabilities":             obj{"drop": list{"NET_ADMIN", "NET_RAW"}},
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

// netInitContainer installs transparent mode's nat and filter rules in
// the pod's network namespace and exits. It is the pod's only container
// with NET_ADMIN, and needs root for it: Kubernetes grants an added
// capability only to a root process. Being first, it also copies the
// pod's resolv.conf and hosts file for the proxy before any sandbox code
// has run.
func (in sandboxInput) netInitContainer() obj {
	return obj{
		"name":  "egress-transparent-init",
		"image": in.opts.NetInitImage,
		"args": list{
			"transparent-init",
			"--proxy-uid", fmt.Sprint(proxyUID),
			"--port", fmt.Sprint(TransparentPort),
			"--dns-port", fmt.Sprint(DNSPort),
			"--admin-port", fmt.Sprint(AdminPort),
			"--names-dir", namesDir,
		},
		"volumeMounts": list{obj{"name": volNames, "mountPath": namesDir}},
		"resources":    obj{"requests": obj{"cpu": "10m", "memory": "16Mi"}},
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

// objectWriter writes one object of a sandbox, with the Flux substitution
// annotation when flux is set (see writeManifests).
type objectWriter func(w *manifestWriter, m ymap, flux bool)

// manifestWriter writes a sandbox's objects straight into an emitter's
// buffer, keys in sorted order, the bytes emitYAML would write for the
// same objects built as maps. Building them as maps first made up most
// of a render's allocations (docs/benchmarks.md, "Render at scale");
// TestManifestsMatchMaps and FuzzManifestsMatchMaps hold the two to the
// same bytes.
type manifestWriter struct {
	sandboxInput
	n names
	// hash is the proxy config's SHA-256, hex encoded.
	hash string
}

// writeManifests appends a sandbox's Kubernetes objects to files, one
// file each in dir. An object whose bytes hold a literal "${" is written
// again with an annotation that keeps Flux's post-build substitution
// from rewriting, say, a header template.
func writeManifests(e *emitter, in sandboxInput, dir string, files []File) ([]File, error) {
	sum := sha256.Sum256(in.proxyJSON)
	w := &manifestWriter{sandboxInput: in, n: in.names(), hash: hex.EncodeToString(sum[:])}
	type object struct {
		kind, name string
		write      objectWriter
	}
	objs := [...]object{
		{"configmap", w.n.proxy, (*manifestWriter).proxyConfigMap},
		{"configmap", w.n.trust, (*manifestWriter).trustConfigMap},
		{"issuer", w.n.selfSigned, (*manifestWriter).issuer},
		{"certificate", w.n.ca, (*manifestWriter).certificate},
		{"serviceaccount", w.n.proxy, (*manifestWriter).serviceAccount},
		{"role", w.n.trust, (*manifestWriter).trustRole},
		{"rolebinding", w.n.trust, (*manifestWriter).trustRoleBinding},
		{"deployment", w.n.sandbox, (*manifestWriter).sandboxDeployment},
		{"networkpolicy", w.n.sandbox, (*manifestWriter).sandboxNetworkPolicy},
		{"deployment", w.n.proxy, (*manifestWriter).proxyDeployment},
		{"service", w.n.proxy, (*manifestWriter).proxyService},
		{"networkpolicy", w.n.proxy, (*manifestWriter).proxyNetworkPolicy},
	}
	todo := objs[:9]
	if !in.sidecar() {
		todo = objs[:]
	}
	for _, o := range todo {
		o.write(w, e.top(), false)
		if e.err == nil && bytes.Contains(e.buf, []byte("${")) {
			o.write(w, e.top(), true)
		}
		if e.err != nil {
			return nil, fmt.Errorf("encoding YAML: %s %s: %w", o.kind, o.name, e.err)
		}
		files = append(files, File{Path: dir + "/" + o.kind + "-" + o.name + ".yaml", Data: slices.Clone(e.buf)})
	}
	return files, nil
}

// head writes an object's apiVersion, kind and metadata (see metadata),
// for the objects with no other key before metadata.
func (w *manifestWriter) head(o *ymap, apiVersion, kind, name, comp string, flux bool) {
	o.str("apiVersion", apiVersion)
	o.str("kind", kind)
	w.metadata(o, name, comp, "", flux)
}

// metadata writes an object's metadata: its name, namespace and labels,
// and its annotations, bundle's keyhole.dev/bundle and Flux's.
func (w *manifestWriter) metadata(o *ymap, name, comp, bundle string, flux bool) {
	w.annotatedMetadata(o, name, comp, bundle, flux, nil)
}

// annotatedMetadata is metadata with annotations of its own besides.
func (w *manifestWriter) annotatedMetadata(o *ymap, name, comp, bundle string, flux bool, extra map[string]string) {
	md := o.mapping("metadata")
	if bundle != "" || flux || len(extra) > 0 {
		ann := md.mapping("annotations")
		for _, k := range slices.Sorted(maps.Keys(extra)) {
			ann.str(k, extra[k]) // a cloud's: eks.amazonaws.com, iam.gke.io
		}
		if bundle != "" {
			ann.str("keyhole.dev/bundle", bundle)
		}
		if flux {
			ann.str(fluxSubstitute, "disabled")
		}
	}
	w.labels(&md, "labels", comp)
	md.str("name", name)
	md.str("namespace", w.sb.Namespace)
}

// selector writes, as key, the immutable subset of labels a Deployment,
// Service and NetworkPolicy select a component's pods by.
func (w *manifestWriter) selector(m *ymap, key, comp string) {
	l := m.mapping(key)
	l.str("app.kubernetes.io/component", comp)
	l.str("app.kubernetes.io/instance", w.sb.Name)
	l.str("app.kubernetes.io/name", "keyhole")
}

func (w *manifestWriter) labels(m *ymap, key, comp string) {
	l := m.mapping(key)
	l.str("app.kubernetes.io/component", comp)
	l.str("app.kubernetes.io/instance", w.sb.Name)
	l.str("app.kubernetes.io/managed-by", "keyhole")
	l.str("app.kubernetes.io/name", "keyhole")
	l.str("app.kubernetes.io/part-of", "keyhole")
}

func (w *manifestWriter) proxyConfigMap(o ymap, flux bool) {
	o.str("apiVersion", "v1")
	d := o.mapping("data")
	d.str("proxy.json", string(w.proxyJSON))
	o.str("kind", "ConfigMap")
	w.metadata(&o, w.n.proxy, compProxy, "", flux)
}

// trustConfigMap declares <claim>-egress-trust without data: its
// bundle.pem is published by the proxy pod's init container, because the
// CA is only known once cert-manager has issued it.
func (w *manifestWriter) trustConfigMap(o ymap, flux bool) {
	owner := "Deployment " + w.n.proxy
	if w.sidecar() {
		owner = "Deployment " + w.n.sandbox
	}
	o.str("apiVersion", "v1")
	o.str("kind", "ConfigMap")
	w.metadata(&o, w.n.trust, compTrust, "bundle.pem is written in the cluster by the "+owner+
		" init container egress-trust-publish (field manager "+trustFieldManager+"): the system roots plus the public ca.crt of "+w.n.ca, flux)
}

// issuer is a self-signed Issuer that bootstraps the sandbox's CA. No CA
// Issuer follows it: the proxy mints its leaf certificates in process.
func (w *manifestWriter) issuer(o ymap, flux bool) {
	w.head(&o, "cert-manager.io/v1", "Issuer", w.n.selfSigned, compCA, flux)
	spec := o.mapping("spec")
	spec.empty("selfSigned", "{}")
}

func (w *manifestWriter) certificate(o ymap, flux bool) {
	w.head(&o, "cert-manager.io/v1", "Certificate", w.n.ca, compCA, flux)
	spec := o.mapping("spec")
	spec.str("commonName", w.n.ca)
	// 90 days, renewed 30 days ahead; the proxy re-reads a renewed CA.
	spec.str("duration", "2160h0m0s")
	spec.bool("isCA", true)
	ref := spec.mapping("issuerRef")
	ref.str("group", "cert-manager.io")
	ref.str("kind", "Issuer")
	ref.str("name", w.n.selfSigned)
	key := spec.mapping("privateKey")
	key.str("algorithm", "ECDSA")
	key.str("rotationPolicy", "Always")
	key.int("size", 256)
	spec.str("renewBefore", "720h0m0s")
	spec.str("secretName", w.n.ca)
	tmpl := spec.mapping("secretTemplate")
	w.labels(&tmpl, "labels", compCA)
	subject := spec.mapping("subject")
	subject.strs("organizations", "keyhole")
	spec.strs("usages", "cert sign", "crl sign", "digital signature")
}

// serviceAccount is the proxy pod's identity, used by the init
// container that publishes bundle.pem, and, annotated with what its
// workload identity Connections name (an IAM role for IRSA, a Google
// service account for GKE), the identity the proxy's cloud credentials
// are of; no container gets its Kubernetes token automatically.
func (w *manifestWriter) serviceAccount(o ymap, flux bool) {
	o.str("apiVersion", "v1")
	o.bool("automountServiceAccountToken", false)
	o.str("kind", "ServiceAccount")
	w.annotatedMetadata(&o, w.n.proxy, compProxy, "", flux, w.sb.ProxyAnnotations)
}

// trustRole may read and patch one ConfigMap: <claim>-egress-trust.
func (w *manifestWriter) trustRole(o ymap, flux bool) {
	w.head(&o, "rbac.authorization.k8s.io/v1", "Role", w.n.trust, compTrust, flux)
	rules := o.seq("rules")
	r := rules.mapping()
	r.strs("apiGroups", "")
	r.strs("resourceNames", w.n.trust)
	r.strs("resources", "configmaps")
	r.strs("verbs", "get", "patch")
}

func (w *manifestWriter) trustRoleBinding(o ymap, flux bool) {
	w.head(&o, "rbac.authorization.k8s.io/v1", "RoleBinding", w.n.trust, compTrust, flux)
	ref := o.mapping("roleRef")
	ref.str("apiGroup", "rbac.authorization.k8s.io")
	ref.str("kind", "Role")
	ref.str("name", w.n.trust)
	subjects := o.seq("subjects")
	s := subjects.mapping()
	s.str("kind", "ServiceAccount")
	s.str("name", w.n.proxy)
	s.str("namespace", w.sb.Namespace)
}

// deployment writes a Deployment of one replica up to its pod's spec,
// which it returns for the caller to write. hash adds the annotation that
// rolls the pods when proxy.json changes.
func (w *manifestWriter) deployment(o ymap, name, comp string, hash, flux bool) ymap {
	w.head(&o, "apps/v1", "Deployment", name, comp, flux)
	spec := o.mapping("spec")
	spec.int("replicas", 1)
	sel := spec.mapping("selector")
	w.selector(&sel, "matchLabels", comp)
	tmpl := spec.mapping("template")
	md := tmpl.mapping("metadata")
	if hash {
		ann := md.mapping("annotations")
		ann.str(configHashAnnotation, w.hash)
	}
	w.labels(&md, "labels", comp)
	return tmpl.mapping("spec")
}

func (w *manifestWriter) sandboxDeployment(o ymap, flux bool) {
	pod := w.deployment(o, w.n.sandbox, compSandbox, false, flux)
	pod.bool("automountServiceAccountToken", false)
	containers := pod.seq("containers")
	w.sandboxContainer(containers.mapping())
	if w.sidecar() {
		// The rules go in first: no container of the pod starts with its
		// egress open. The proxy is a native sidecar (an init container
		// that keeps running), started and ready before the sandbox
		// container starts.
		inits := pod.seq("initContainers")
		inits.fixed(w.shared.netInit)
		w.trustContainer(inits.mapping(), false)
		w.trustContainer(inits.mapping(), true)
		w.proxyContainer(inits.mapping(), true)
		w.proxyPod(&pod)
		return
	}
	// The proxy's address comes from the Service's variables (see
	// proxyHost), never from DNS, which the sandbox's NetworkPolicy
	// does not admit. A resolver on the pod's own loopback, where
	// nothing listens, makes a lookup fail at once rather than time out.
	dns := pod.mapping("dnsConfig")
	dns.strs("nameservers", "127.0.0.1")
	pod.str("dnsPolicy", "None")
	pod.bool("enableServiceLinks", true)
	pod.fixed("securityContext", w.shared.podSeccomp)
	vols := pod.seq("volumes")
	v := vols.mapping()
	cm := v.mapping("configMap")
	items := cm.seq("items")
	keyPath(items, "bundle.pem")
	keyPath(items, TrustStoreName)
	keyPath(items, WgetRCName)
	keyPath(items, PHPIniName)
	cm.str("name", w.n.trust)
	v.str("name", volTrust)
}

// keyPath writes an item of a volume: key k at path k.
func keyPath(items yseq, k string) {
	it := items.mapping()
	it.str("key", k)
	it.str("path", k)
}

// sandboxContainer mounts only the trust bundle: never a Secret, never the
// CA key. The sandbox image is the user's, so it may run as root (an
// agent file's sandbox_options.setup installs packages); it still gets
// the runtime's default seccomp profile and no privilege escalation.
func (w *manifestWriter) sandboxContainer(c ymap) {
	if len(w.env) == 0 {
		c.empty("env", "[]")
	} else {
		env := c.seq("env")
		for _, v := range w.env {
			m := env.mapping()
			m.str("name", v.Name)
			m.str("value", v.Value)
		}
	}
	c.str("image", w.image)
	c.str("name", compSandbox)
	c.fixed("securityContext", w.shared.sandboxSecurity)
	c.fixed("volumeMounts", w.shared.sandboxMounts)
}

// proxyPod writes, after the containers of a pod that runs the proxy, its
// security context, identity and volumes.
func (w *manifestWriter) proxyPod(pod *ymap) {
	pod.fixed("securityContext", w.shared.proxyPodSecurity)
	pod.str("serviceAccountName", w.n.proxy)
	vols := pod.seq("volumes")
	vols.fixed(w.shared.apiAccessVolume)
	v := vols.mapping()
	v.str("name", volCA)
	s := v.mapping("secret")
	s.int("defaultMode", 0o440)
	items := s.seq("items")
	keyPath(items, "tls.crt")
	keyPath(items, "tls.key")
	s.str("secretName", w.n.ca)
	v = vols.mapping()
	v.str("name", volCAPublic)
	s = v.mapping("secret")
	s.int("defaultMode", 0o444)
	keyPath(s.seq("items"), "ca.crt")
	s.str("secretName", w.n.ca)
	v = vols.mapping()
	cm := v.mapping("configMap")
	keyPath(cm.seq("items"), "proxy.json")
	cm.str("name", w.n.proxy)
	v.str("name", volProxyConfig)
	vols.fixed(w.shared.trustVolume)
	if w.sidecar() {
		vols.fixed(w.shared.namesVolume)
	}
	if w.opts.UpstreamCAConfigMap != "" {
		v := vols.mapping()
		cm := v.mapping("configMap")
		keyPath(cm.seq("items"), "ca.crt")
		cm.str("name", w.opts.UpstreamCAConfigMap)
		v.str("name", volUpstreamCA)
	}
	for _, sec := range w.secrets {
		v := vols.mapping()
		v.str("name", secretVolume(sec.Name))
		s := v.mapping("secret")
		s.int("defaultMode", 0o440)
		if len(sec.Keys) == 0 {
			s.empty("items", "[]")
		} else {
			items := s.seq("items")
			for _, k := range sec.Keys {
				keyPath(items, k)
			}
		}
		s.str("secretName", sec.Name)
	}
	if w.keepsRefreshTokens() {
		v := vols.mapping()
		e := v.mapping("emptyDir")
		e.str("sizeLimit", "1Mi")
		v.str("name", volProxyState)
	}
}

func mount(mounts yseq, name, path string, readOnly bool) {
	m := mounts.mapping()
	m.str("mountPath", path)
	m.str("name", name)
	if readOnly {
		m.bool("readOnly", true)
	}
}

// keepsRefreshTokens reports whether the sandbox's proxy uses a refresh
// token grant, whose server may rotate the refresh token: the proxy then
// gets a state file to keep the rotated one in.
func (w *manifestWriter) keepsRefreshTokens() bool {
	for _, h := range w.sb.Proxy.Hosts {
		if o := h.Inject.OAuth2; o != nil && o.Grant == config.OAuth2GrantRefreshToken {
			return true
		}
	}
	return false
}

func (w *manifestWriter) proxyContainer(c ymap, sidecar bool) {
	args := c.seq("args")
	args.str("--config")
	args.str(ProxyConfigDir + "/proxy.json")
	args.str("--listen")
	if sidecar {
		args.str(w.shared.loopbackListen)
	} else {
		args.str(w.shared.listen)
	}
	args.str("--admin-listen")
	args.str(w.shared.adminListen)
	for _, r := range w.opts.ProxyResolve {
		args.str("--resolve")
		args.str(r)
	}
	if w.opts.UpstreamCAConfigMap != "" {
		args.str("--upstream-ca")
		args.str(upstreamCADir + "/ca.crt")
	}
	if w.keepsRefreshTokens() {
		args.str("--state-file")
		args.str(ProxyStateFile)
	}
	if sidecar {
		args.str("--transparent-listen")
		args.str(w.shared.transparentListen)
		args.str("--dns-listen")
		args.str(w.shared.dnsListen)
	}
	w.proxyEnv(c)
	c.str("image", w.opts.ProxyImage)
	c.fixed("livenessProbe", w.shared.livenessProbe)
	c.str("name", compProxy)
	c.fixed("ports", w.shared.proxyPorts)
	c.fixed("readinessProbe", w.shared.readinessProbe)
	c.fixed("resources", w.shared.proxyResources)
	if sidecar {
		c.str("restartPolicy", "Always")
	}
	c.fixed("securityContext", w.shared.restricted)
	c.fixed("startupProbe", w.shared.startupProbe)
	mounts := c.seq("volumeMounts")
	mount(mounts, volProxyConfig, ProxyConfigDir, true)
	mount(mounts, volCA, caDir, true)
	if w.opts.UpstreamCAConfigMap != "" {
		mount(mounts, volUpstreamCA, upstreamCADir, true)
	}
	for _, s := range w.secrets {
		mount(mounts, secretVolume(s.Name), config.DefaultSecretsDir+"/"+s.Name, true)
	}
	if w.keepsRefreshTokens() {
		mount(mounts, volProxyState, proxyStateDir, false)
	}
	if sidecar {
		// Its own name files, not the ones the sandbox can write.
		for _, f := range [...]string{"hosts", "resolv.conf"} {
			m := mounts.mapping()
			m.str("mountPath", "/etc/"+f)
			m.str("name", volNames)
			m.bool("readOnly", true)
			m.str("subPath", f)
		}
	}
}

// trustContainer builds bundle.pem from the proxy image's system roots and
// the CA's public certificate, writes it for the pod's containers, and
// publishes it to the <claim>-egress-trust ConfigMap: the proxy binary's
// trust-bundle command, so the pod needs no image but the proxy's. It
// mounts only ca.crt: the CA key is never mounted in this container.
// The init container egress-trust-publish does it once, before any other
// container of the pod but the transparent-mode rules starts; with watch
// it is the native sidecar egress-trust-watch that follows, after it, each
// renewal of the CA for as long as the pod runs.
func (w *manifestWriter) trustContainer(c ymap, watch bool) {
	args := c.seq("args")
	for _, a := range [...]string{
		"trust-bundle",
		"--ca", caPublicDir + "/ca.crt",
		"--out", trustWorkDir + "/bundle.pem",
		"--truststore", trustWorkDir + "/" + TrustStoreName,
		"--wgetrc", trustWorkDir + "/" + WgetRCName,
		"--php-ini", trustWorkDir + "/" + PHPIniName,
		"--bundle-path", BundleFile,
		"--configmap", w.n.trust,
		"--field-manager", trustFieldManager,
	} {
		args.str(a)
	}
	name, resources := "egress-trust-publish", w.shared.initResources
	if watch {
		args.str("--watch")
		args.str(trustWatchInterval)
		name, resources = "egress-trust-watch", w.shared.watchResources
	}
	c.fixed("env", w.shared.trustEnv)
	c.str("image", w.opts.ProxyImage)
	c.str("name", name)
	c.fixed("resources", resources)
	if watch {
		c.str("restartPolicy", "Always")
	}
	c.fixed("securityContext", w.shared.restricted)
	mounts := c.seq("volumeMounts")
	mount(mounts, volCAPublic, caPublicDir, true)
	mount(mounts, volTrust, trustWorkDir, false)
	mount(mounts, volAPIAccess, "/var/run/secrets/kubernetes.io/serviceaccount", true)
}

func (w *manifestWriter) proxyDeployment(o ymap, flux bool) {
	pod := w.deployment(o, w.n.proxy, compProxy, true, flux)
	pod.bool("automountServiceAccountToken", false)
	w.proxyContainer(pod.seq("containers").mapping(), false)
	inits := pod.seq("initContainers")
	w.trustContainer(inits.mapping(), false)
	w.trustContainer(inits.mapping(), true)
	w.proxyPod(&pod)
}

func (w *manifestWriter) proxyService(o ymap, flux bool) {
	w.head(&o, "v1", "Service", w.n.proxy, compProxy, flux)
	spec := o.mapping("spec")
	p := spec.seq("ports").mapping()
	p.str("name", "proxy")
	p.int("port", ProxyPort)
	p.str("protocol", "TCP")
	p.str("targetPort", "proxy")
	w.selector(&spec, "selector", compProxy)
}

func port(ports yseq, protocol string, n int) {
	p := ports.mapping()
	p.int("port", n)
	p.str("protocol", protocol)
}

// sandboxNetworkPolicy confines the sandbox's egress. With the proxy in
// its own Deployment the sandbox reaches only the proxy, by the Service's
// cluster IP, and no DNS server. As a
// sidecar the proxy shares the sandbox's network namespace, and a
// NetworkPolicy, which applies to whole pods and knows addresses, not
// names, must let the proxy reach its upstreams (HTTPS on 443) and the
// API server (443 or 6443, for the trust bundle); inside the pod the
// transparent-mode rules hold every other user to the proxy
// (docs/render.md).
func (w *manifestWriter) sandboxNetworkPolicy(o ymap, flux bool) {
	w.head(&o, "networking.k8s.io/v1", "NetworkPolicy", w.n.sandbox, compSandbox, flux)
	spec := o.mapping("spec")
	egress := spec.seq("egress")
	if w.sidecar() {
		// The proxy's own lookups; the sandbox's are sent to the proxy.
		dns := egress.mapping()
		ports := dns.seq("ports")
		port(ports, "UDP", 53)
		port(ports, "TCP", 53)
	}
	rule := egress.mapping()
	ports := rule.seq("ports")
	if w.sidecar() {
		port(ports, "TCP", 443)
		port(ports, "TCP", 6443)
		for _, p := range w.opts.extraEgressPorts() {
			port(ports, "TCP", p)
		}
	} else {
		port(ports, "TCP", ProxyPort)
		to := rule.seq("to").mapping()
		w.selector(ptr(to.mapping("podSelector")), "matchLabels", compProxy)
	}
	w.selector(ptr(spec.mapping("podSelector")), "matchLabels", compSandbox)
	spec.strs("policyTypes", "Egress")
}

// proxyNetworkPolicy admits only the sandbox to the proxy port, and to
// the admin port every pod but keyhole's sandboxes: metrics scrapers run
// in pods, and the kubelet's probes come from the node, which a
// NetworkPolicy always admits. The two peers of the admin rule are
// "not a sandbox" or "not keyhole's": a selector's expressions all hold
// at once, so one peer could not say "not a keyhole sandbox".
func (w *manifestWriter) proxyNetworkPolicy(o ymap, flux bool) {
	w.head(&o, "networking.k8s.io/v1", "NetworkPolicy", w.n.proxy, compProxy, flux)
	spec := o.mapping("spec")
	ingress := spec.seq("ingress")
	fromSandbox := ingress.mapping()
	from := fromSandbox.seq("from").mapping()
	w.selector(ptr(from.mapping("podSelector")), "matchLabels", compSandbox)
	port(fromSandbox.seq("ports"), "TCP", ProxyPort)
	admin := ingress.mapping()
	peers := admin.seq("from")
	for _, not := range [...][2]string{{"app.kubernetes.io/component", compSandbox}, {"app.kubernetes.io/name", "keyhole"}} {
		peer := peers.mapping()
		peer.empty("namespaceSelector", "{}")
		sel := peer.mapping("podSelector")
		expr := sel.seq("matchExpressions").mapping()
		expr.str("key", not[0])
		expr.str("operator", "NotIn")
		expr.strs("values", not[1])
	}
	port(admin.seq("ports"), "TCP", AdminPort)
	w.selector(ptr(spec.mapping("podSelector")), "matchLabels", compProxy)
	spec.strs("policyTypes", "Ingress")
}

func ptr(m ymap) *ymap { return &m }
