#!/usr/bin/env bash
# Makes meshrt's credentials and stores them as the Kubernetes Secrets the manifests mount
# (deploy/README.md, "Security model"):
#
#   deploy/k8s/create-secrets.sh [--dry-run] [--tls CERT_DIR] [--clients NAME,...]
#       [--client_tls NAME=CERT_DIR ...] NAMESPACE DIR
#
# DIR (created mode 0700) keeps the tokens; a file already there is kept, a missing one is
# generated (64 hex digits from /dev/urandom, mode 0600):
#   cluster.token       the daemons' member credential      -> Secret meshrt-cluster-token
#   operator.token      may list and close every session    -> Secret meshrt-operator-token
#   metrics.token       what Prometheus presents on the      -> Secret meshrt-metrics-token
#                       daemons' /metrics (--metrics_port)
#   client.tokens       "NAME TOKEN" per client (--clients,  -> Secret meshrt-client-tokens
#                       default "client")                       (the coordinator's list)
#   client-NAME.token   that client's own line, to give it  -> Secret meshrt-client-NAME
#                       (rewritten from client.tokens)          (key client.token, for client pods)
# With --tls CERT_DIR, also Secret meshrt-tls from CERT_DIR/tls.crt, tls.key and ca.crt (the
# production overlay's mutual TLS). With --client_tls NAME=CERT_DIR (repeatable), client NAME's
# Secret meshrt-client-NAME also holds its own certificate, CERT_DIR/tls.crt and tls.key (client
# use, from your CA), and CERT_DIR/ca.crt: all a client pod needs, in one Secret (the
# training-production overlay's Job mounts meshrt-client-trainer so).
#
# The Secrets are applied (`kubectl apply`, so running it again updates them: that is how tokens
# are rotated, see deploy/README.md); --dry-run prints them as YAML instead and needs no cluster.
# Keep DIR out of version control: it holds every credential of the deployment.
set -euo pipefail

usage() {
  echo "usage: $0 [--dry-run] [--tls CERT_DIR] [--clients NAME,...] [--client_tls NAME=CERT_DIR ...] NAMESPACE DIR" >&2
  exit 2
}
die() {
  echo "create-secrets.sh: $*" >&2
  exit 1
}

dry_run=0
tls_dir=""
clients="client"
client_tls=()  # NAME=CERT_DIR
while [ "$#" -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --tls) [ "$#" -ge 2 ] || usage; tls_dir=$2; shift 2 ;;
    --clients) [ "$#" -ge 2 ] || usage; clients=$2; shift 2 ;;
    --client_tls)
      [ "$#" -ge 2 ] || usage
      [[ "$2" == ?*=?* ]] || die "--client_tls $2: expected NAME=CERT_DIR"
      client_tls+=("$2"); shift 2 ;;
    -h | --help) usage ;;
    -*) echo "create-secrets.sh: unknown flag $1" >&2; usage ;;
    *) break ;;
  esac
done
[ "$#" -eq 2 ] || usage
namespace=$1
dir=$2
command -v kubectl >/dev/null 2>&1 || die "kubectl is not on PATH"

# Secret names are DNS labels: so are the client names that go into them.
name_ok() { [[ "$1" =~ ^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$ ]]; }

umask 077
mkdir -p "$dir"
chmod 700 "$dir"
new_token() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
for file in cluster.token operator.token metrics.token; do
  [ -s "$dir/$file" ] || { new_token; echo; } >"$dir/$file"
done
if [ ! -s "$dir/client.tokens" ]; then
  IFS=, read -r -a names <<<"$clients"
  [ "${#names[@]}" -gt 0 ] || die "--clients: no name given"
  {
    echo "# NAME TOKEN: one line per client; NAME owns the sessions its token creates."
    for name in "${names[@]}"; do
      name_ok "$name" || die "--clients: '$name' is not a DNS label (a-z, 0-9, '-')"
      echo "$name $(new_token)"
    done
  } >"$dir/client.tokens"
fi

# One Secret object per call, as YAML on stdout (kubectl's client-side rendering).
secret() {
  local name=$1
  shift
  echo "---"
  kubectl create secret generic "$name" --namespace "$namespace" "$@" --dry-run=client -o yaml
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
{
  secret meshrt-cluster-token --from-file=cluster.token="$dir/cluster.token"
  secret meshrt-operator-token --from-file=operator.token="$dir/operator.token"
  secret meshrt-metrics-token --from-file=metrics.token="$dir/metrics.token"
  secret meshrt-client-tokens --from-file=client.tokens="$dir/client.tokens"
  # Each client's own line (the CLI's --auth_token_file reads the first token of a file). A NAME
  # on several lines (a token being rotated) gets its last one.
  seen=()
  while read -r first second rest; do
    case "$first" in "" | "#"*) continue ;; esac
    [ -z "${rest:-}" ] || die "$dir/client.tokens: '$first $second $rest': expected NAME TOKEN"
    [ -n "${second:-}" ] || die "$dir/client.tokens: a line holds only a token; give it a NAME"
    name_ok "$first" || die "$dir/client.tokens: client name '$first' is not a DNS label"
    echo "$first $second" >"$dir/client-$first.token"
    [[ " ${seen[*]} " == *" $first "* ]] || seen+=("$first")
  done <"$dir/client.tokens"
  for spec in "${client_tls[@]}"; do
    [[ " ${seen[*]} " == *" ${spec%%=*} "* ]] ||
      die "--client_tls $spec: no client '${spec%%=*}' in $dir/client.tokens (clients: ${seen[*]})"
    for file in tls.crt tls.key ca.crt; do
      [ -s "${spec#*=}/$file" ] || die "--client_tls $spec: ${spec#*=}/$file is missing or empty"
    done
  done
  for name in "${seen[@]}"; do
    files=(--from-file=client.token="$dir/client-$name.token")
    for spec in "${client_tls[@]}"; do
      [ "${spec%%=*}" = "$name" ] || continue
      for file in tls.crt tls.key ca.crt; do files+=(--from-file="$file=${spec#*=}/$file"); done
    done
    secret "meshrt-client-$name" "${files[@]}"
  done
  if [ -n "$tls_dir" ]; then
    for file in tls.crt tls.key ca.crt; do
      [ -s "$tls_dir/$file" ] || die "--tls $tls_dir: $file is missing or empty"
    done
    secret meshrt-tls --from-file=tls.crt="$tls_dir/tls.crt" \
      --from-file=tls.key="$tls_dir/tls.key" --from-file=ca.crt="$tls_dir/ca.crt"
  fi
} >"$out"

if [ "$dry_run" -eq 1 ]; then
  cat "$out"
else
  kubectl apply -f "$out"
fi
