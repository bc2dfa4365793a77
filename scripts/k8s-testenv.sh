#!/usr/bin/env bash
# Build the test Kubernetes control plane (kube-apiserver 1.20 from Debian's source package,
# etcd 3.4 from Debian's binary package) and cache it outside the repository.
#
#   scripts/k8s-testenv.sh build             # once per machine (~10 min on 2 cores); idempotent
#   scripts/k8s-testenv.sh build --kubectl   # also kubectl 1.20 (for the tutorial; seconds)
#   scripts/k8s-testenv.sh path              # print the cache directory (bin/kube-apiserver, bin/etcd)
#
# kubectl: Debian's source package `kubernetes` (the one kube-apiserver is built from) builds
# exactly one binary package, `kubernetes-client`: kubectl of the same version.  --kubectl
# unpacks that package's kubectl into the cache (apt-get download + dpkg-deb, no root, no
# build: about 5 s) instead of compiling it again (make WHAT=cmd/kubectl, minutes).
#
# The live tests (pytest -m k8s) find the binaries in the cache directory
# ($ARYL_K8S_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/aryl/k8s) and skip, with this
# command in the reason, when they are absent.  Needs root (apt-get) and Debian 12.
set -euo pipefail

CACHE=${ARYL_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aryl/k8s}
BIN=$CACHE/bin
USAGE="usage: $0 build [--kubectl] | path"

cmd=${1:-build}
[ $# -gt 0 ] && shift
KUBECTL=0
for a in "$@"; do
  case "$a" in
    --kubectl) KUBECTL=1 ;;
    *) echo "$USAGE" >&2; exit 2 ;;
  esac
done
case "$cmd" in
  path) echo "$CACHE"; exit 0 ;;
  build) ;;
  *) echo "$USAGE" >&2; exit 2 ;;
esac

get_kubectl() {
  # kubectl from Debian's kubernetes-client (built from the same source package)
  [ -x "$BIN/kubectl" ] && return 0
  local t0 d
  t0=$(date +%s)
  d=$(mktemp -d "${TMPDIR:-/tmp}/aryl-kubectl.XXXXXX")
  (cd "$d" && apt-get download kubernetes-client >/dev/null 2>&1) \
    || { rm -rf "$d"; echo "k8s-testenv: apt-get download kubernetes-client failed (deb entries for bookworm?)" >&2; return 1; }
  dpkg-deb -x "$d"/kubernetes-client_*.deb "$d/x"
  mkdir -p "$BIN"
  cp "$d/x/usr/bin/kubectl" "$BIN/kubectl.tmp"
  mv "$BIN/kubectl.tmp" "$BIN/kubectl"
  rm -rf "$d"
  echo "k8s test environment: kubectl $("$BIN/kubectl" version --client --short 2>/dev/null || true) in $(( $(date +%s) - t0 )) s, cached in $BIN"
}

if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/etcd" ]; then
  echo "k8s test environment: cached in $BIN"
  if [ "$KUBECTL" = 1 ]; then get_kubectl; fi
  exit 0
fi
command -v apt-get >/dev/null || { echo "k8s-testenv: needs Debian 12 (apt-get); see docs/kubernetes.md" >&2; exit 1; }
mkdir -p "$BIN"
start=$(date +%s)

export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

# 1. deb-src entries matching the deb ones (deb822 sources or a classic list).
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      | $SUDO tee /etc/apt/sources.list.d/aryl-deb-src.sources >/dev/null
  else
    grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' \
      | $SUDO tee /etc/apt/sources.list.d/aryl-deb-src.list >/dev/null
  fi
fi
$SUDO apt-get update -qq
# 2. Go, etcd and the reflect2 fix.
$SUDO apt-get install -y -qq golang-go etcd-server etcd-client rsync jq \
  golang-github-modern-go-reflect2-dev >/dev/null
cp "$(command -v etcd)" "$BIN/etcd"

# 3. The Kubernetes source package, unpacked in a scratch directory.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/aryl-k8s-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
apt-get source --download-only kubernetes >/dev/null
dpkg-source -x kubernetes_*.dsc k8s >/dev/null
cd k8s

# 4. The vendored reflect2 1.0.1 crashes under Go >= 1.18: use Debian's 1.0.2.
R2=$(dirname "$(find /usr/share/gocode -path '*modern-go/reflect2/reflect2.go' | head -1)")
rm -f vendor/github.com/modern-go/reflect2/*.go vendor/github.com/modern-go/reflect2/*.s
cp "$R2"/*.go vendor/github.com/modern-go/reflect2/
cp "$R2"/*.s vendor/github.com/modern-go/reflect2/ 2>/dev/null || true
rm -f vendor/github.com/modern-go/reflect2/*_test.go

# 5. Build kube-apiserver offline.
mkdir -p .go/src/k8s.io
ln -s ../../.. .go/src/k8s.io/kubernetes
GOPATH=$PWD/.go CGO_ENABLED=0 GOPROXY=off GOFLAGS=-mod=vendor HOME=$WORK \
  make WHAT="cmd/kube-apiserver" >"$WORK/make.log" 2>&1 || { tail -50 "$WORK/make.log"; exit 1; }
cp "$(find _output -type f -name kube-apiserver -perm -u+x | head -1)" "$BIN/kube-apiserver.tmp"
mv "$BIN/kube-apiserver.tmp" "$BIN/kube-apiserver"
echo "k8s test environment: built in $(( $(date +%s) - start )) s, cached in $BIN"
if [ "$KUBECTL" = 1 ]; then get_kubectl; fi
