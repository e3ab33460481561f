#!/usr/bin/env bash
# Everything the node tier needs, each step idempotent and cached (see each script):
#   hack/node-host.sh       Debian packages: containerd, runc, CNI plugins, iptables, buildah, debootstrap
#   hack/build-k8s.sh node  kubelet, kube-proxy from k8s.io/kubernetes (Go module proxy)
#   hack/build-images.sh    the OCI archives the node imports (pause, controller, curl, llama-server)
#   llmkube_testing.host_llama_server  that llama-server, extracted for this host (the agent tests)
#
# Where the tier cannot run (not Linux, not root) this prints why and exits 0, so `make test` goes
# on and the node tests report the same reason as their skip.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
rc=0
bash hack/node-host.sh || rc=$?
if [ "$rc" = 3 ]; then
  echo "[node-prereqs] skipping the node tier's build: the tests on it will be skipped too" >&2
  exit 0
fi
[ "$rc" = 0 ] || exit "$rc"
bash hack/build-k8s.sh node >/dev/null
bash hack/build-images.sh all
# The llama-server of the image, natively on this host: the host agent's tests run it (seconds).
"${PYTHON:-python3}" -m llmkube_testing.host_llama_server >/dev/null
echo "[node-prereqs] ready in $((SECONDS - t0)) s" >&2
