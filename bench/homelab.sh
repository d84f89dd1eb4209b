#!/usr/bin/env bash
# Makes the Flux-heavy home-lab repository that docs/benchmarks.md measures
# ("Deploy units as Flux and Argo CD build them"), from a clone of
# onedr0p/home-ops (github.com/onedr0p/home-ops, Apache-2.0; nothing of it
# is committed here) at d9078e4dd5:
#
#   - every app of its `default` namespace copied under a new name
#     (`<app>-b`), listed beside the original, so the repository has 104
#     Flux Kustomizations;
#   - an agents app: a Flux Kustomization over an AgentRuntime, a
#     Connection, a SandboxClass and their Secret;
#   - two commits: the repository, then one file changed (the Connection's path
#     prefix widened), for `diff --base HEAD~1 --head HEAD`.
#
#   bench/homelab.sh HOME_OPS_GIT_DIR OUT_DIR
set -euo pipefail
src=$1 out=$2
rev=d9078e4dd5
rm -rf "$out" && mkdir -p "$out"
git --git-dir="$src" archive "$rev" | tar -x -C "$out"
cd "$out"
apps=kubernetes/apps/default
for dir in "$apps"/*/; do
  app=$(basename "$dir")
  cp -r "$apps/$app" "$apps/$app-b"
  find "$apps/$app-b" -type f -name '*.yaml' -exec sed -i "s#/default/$app/#/default/$app-b/#g" {} +
  # The Flux Kustomizations' names (home-assistant's file holds two).
  sed -i -e "s#^\(  *\)name: $app\(-[a-z0-9-]*\)\?\$#\1name: $app-b\2#" \
    -e "s#^\(  *\)APP: $app\$#\1APP: $app-b#" "$apps/$app-b/ks.yaml"
  sed -i "s#^  - ./$app/ks.yaml\$#&\n  - ./$app-b/ks.yaml#" "$apps/kustomization.yaml"
done
sed -i 's#^  - ./namespace.yaml$#&\n  - ./agents/ks.yaml#' "$apps/kustomization.yaml"
mkdir -p "$apps/agents/app"
cat >"$apps/agents/ks.yaml" <<'EOF'
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: agents
spec:
  interval: 1h
  path: ./kubernetes/apps/default/agents/app
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
    namespace: flux-system
  targetNamespace: default
EOF
cat >"$apps/agents/app/kustomization.yaml" <<'EOF'
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ./secret.yaml
  - ./connection.yaml
  - ./sandboxclass.yaml
  - ./agentruntime.yaml
EOF
cat >"$apps/agents/app/secret.yaml" <<'EOF'
apiVersion: v1
kind: Secret
metadata:
  name: acme-github-token
stringData:
  user: x-access-token
  token: bench-token-not-a-secret
EOF
cat >"$apps/agents/app/connection.yaml" <<'EOF'
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata:
  name: github-acme
spec:
  hosts: [api.github.com]
  credential:
    kind: secret
    secretRef:
      name: acme-github-token
  placement:
    inject:
      - hosts: [api.github.com]
        header: Authorization
        value: "Bearer {{ .token }}"
        placeholderEnv: [GH_TOKEN]
        rules:
          - methods: [GET, HEAD]
            pathPrefixes: [/repos/acme/widgets]
EOF
cat >"$apps/agents/app/sandboxclass.yaml" <<'EOF'
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: SandboxClass
metadata:
  name: workspace
spec:
  image: ghcr.io/acme/agent-workspace:1.4.2
  connections:
    - role: vcs
EOF
cat >"$apps/agents/app/agentruntime.yaml" <<'EOF'
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: AgentRuntime
metadata:
  name: support
spec:
  promptPackRef: {name: support}
  facades: [{type: websocket, port: 8080}]
  sandbox:
    enabled: true
    connections:
      - sandbox: workspace
        role: vcs
        connection: github-acme
EOF
git init -q
git add -A
git -c user.name=bench -c user.email=bench@localhost commit -qm base
sed -i 's#/repos/acme/widgets#/repos/acme#' "$apps/agents/app/connection.yaml"
git -c user.name=bench -c user.email=bench@localhost commit -qam 'agents: access widened to every acme repository'
echo "$out: $(grep -rh --include='*.yaml' '^apiVersion: kustomize.toolkit.fluxcd.io/' kubernetes | wc -l) Flux Kustomizations"
