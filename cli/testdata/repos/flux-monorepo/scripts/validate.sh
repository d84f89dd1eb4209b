#!/usr/bin/env bash
# Validates the manifests with kubeconform, as CI runs it.
set -o errexit
find . -type f -name '*.yaml' -print0 | xargs -0 -n1 kubeconform -strict -ignore-missing-schemas
