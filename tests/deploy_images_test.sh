#!/usr/bin/env bash
# One image for the whole deployment: every overlay renders (kubectl kustomize) with a single image
# reference across its Deployment, StatefulSet and Job (every container and init container), with
# an explicit tag; a training overlay runs its parent overlay's image. Then, as deploy/README.md
# tells a user to point an overlay at their registry, `kustomize edit set image
# meshrt=example.com/meshrt:9.9.9` on a copy of each overlay in turn: every container of that
# overlay, and of every overlay built on it (training on local-dev, training-production on
# production), must then run example.com/meshrt:9.9.9, and the other overlays must not change.
# kubectl has no `kustomize edit`, so tests/deploy_images.js makes the same edit to the copy's
# kustomization.yaml.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# shellcheck source=SCRIPTDIR/manifest_test_lib.sh
source "$PWD/tests/manifest_test_lib.sh"
deploy=$(dirname "$(src_of deploy/.yamllint.yaml)")
images_js=$(src_of tests/deploy_images.js)

skip_without_kubectl
command -v node >/dev/null 2>&1 || fail "node is not on PATH ($PATH); run tools/setup.sh"

out=$(mktemp -d "${TEST_TMPDIR:-/tmp}/deploy_images.XXXXXX")
trap 'rm -rf "$out"' EXIT

overlays=()
for dir in "$deploy"/k8s/overlays/*/; do overlays+=("$(basename "$dir")"); done
[ "${#overlays[@]}" -ge 4 ] ||
  fail "expected the local-dev, production, training and training-production overlays, found: ${overlays[*]}"

# render K8S_DIR OVERLAY PREFIX: PREFIX.yaml (the rendering) and PREFIX.images (deploy_images.js).
render() {
  timeout 60 kubectl kustomize "$1/overlays/$2" >"$3.yaml" || fail "kubectl kustomize $1/overlays/$2"
  node "$images_js" list "$3.yaml" >"$3.images" || fail "listing the images of $1/overlays/$2"
}
# parent K8S_DIR OVERLAY: the overlay OVERLAY builds on (`resources: - ../NAME`), or nothing.
parent() { sed -n 's|^  - \.\./\([A-Za-z0-9_-]*\)$|\1|p' "$1/overlays/$2/kustomization.yaml"; }
# builds_on K8S_DIR OVERLAY BASE: whether OVERLAY is BASE or built on it, directly or not.
builds_on() {
  local o=$2
  while [ -n "$o" ]; do
    [ "$o" = "$3" ] && return 0
    o=$(parent "$1" "$o")
  done
  return 1
}
# the_image PREFIX: the one image PREFIX.images lists (fails when it lists several or none).
the_image() {
  local images
  images=$(cut -d' ' -f4 "$1.images" | sort -u)
  [ -n "$images" ] || fail "$1: no container found"
  [ "$(wc -l <<<"$images")" -eq 1 ] ||
    fail "$(basename "$1"): containers run different images:"$'\n'"$(cat "$1.images")"
  echo "$images"
}

echo "== one image per overlay"
for overlay in "${overlays[@]}"; do
  render "$deploy/k8s" "$overlay" "$out/$overlay"
  workloads="Deployment/meshrt-coordinator StatefulSet/meshrt-worker"
  grep -q '^kind: Job$' "$out/$overlay.yaml" && workloads+=" Job/meshrt-train"
  for w in $workloads; do
    grep -q "^$w containers " "$out/$overlay.images" || fail "$overlay: no container of $w listed"
  done
  image=$(the_image "$out/$overlay")
  # A bare name or :latest is whatever the registry holds that day.
  if ! [[ "$image" =~ :[A-Za-z0-9_][A-Za-z0-9_.-]*$ ]] || [[ "$image" == *:latest ]]; then
    fail "$overlay: the image $image has no tag, or :latest"
  fi
  echo "$overlay: $(wc -l <"$out/$overlay.images") containers ($workloads) run $image"
  echo "$image" >"$out/$overlay.image"
done
for overlay in "${overlays[@]}"; do
  p=$(parent "$deploy/k8s" "$overlay")
  [ -n "$p" ] || continue
  [ "$(cat "$out/$overlay.image")" = "$(cat "$out/$p.image")" ] ||
    fail "$overlay runs $(cat "$out/$overlay.image"), but the overlay it builds on ($p) runs $(cat "$out/$p.image")"
done
[ -n "$(parent "$deploy/k8s" training)" ] || fail "overlays/training no longer builds on another overlay"

echo "== kustomize edit set image meshrt=example.com/meshrt:9.9.9, overlay by overlay"
want=example.com/meshrt:9.9.9
for edited in "${overlays[@]}"; do
  copy="$out/edit-$edited"
  mkdir -p "$copy"
  cp -r "$deploy/k8s" "$copy/k8s"
  kustomization="$copy/k8s/overlays/$edited/kustomization.yaml"
  node "$images_js" set "$kustomization" "meshrt=$want" || fail "editing $kustomization"
  cmp -s "$deploy/k8s/overlays/$edited/kustomization.yaml" "$kustomization" &&
    fail "self-check: setting the image left overlays/$edited/kustomization.yaml unchanged"
  for overlay in "${overlays[@]}"; do
    render "$copy/k8s" "$overlay" "$copy/$overlay"
    if builds_on "$copy/k8s" "$overlay" "$edited"; then
      # Every container, init containers included, whatever the images were before.
      wrong=$(grep -v " $want\$" "$copy/$overlay.images" || true)
      [ -z "$wrong" ] ||
        fail "after setting the image in overlays/$edited, overlays/$overlay still runs other images:"$'\n'"$wrong"
      echo "set in $edited: $overlay runs $want ($(wc -l <"$copy/$overlay.images") containers)"
    else
      cmp -s "$out/$overlay.images" "$copy/$overlay.images" ||
        fail "setting the image in overlays/$edited changed overlays/$overlay, which is not built on it"
    fi
  done
done

echo "== the helper's edit is kustomize's"
# A registry with a port is a name, not a tag; a digest replaces the tag; the entry is replaced.
k="$out/kustomization.yaml"
printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nimages:\n  - name: meshrt\n    newTag: dev\n' >"$k"
node "$images_js" set "$k" meshrt=localhost:5000/meshrt@sha256:0123
node "$images_js" set "$k" other=other:1
expected=$'images:\n  - name: meshrt\n    newName: localhost:5000/meshrt\n    digest: sha256:0123\n  - name: other\n    newTag: "1"'
[ "$(sed -n '/^images:/,$p' "$k")" = "$expected" ] ||
  fail "deploy_images.js set wrote:"$'\n'"$(cat "$k")"$'\n'"expected:"$'\n'"$expected"

echo "PASS: ${#overlays[@]} overlays run one tagged image each, and kustomize edit set image reaches every container"
