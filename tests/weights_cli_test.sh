#!/usr/bin/env bash
# Weights in and out (client/cli_weights.cc): `meshrt export` writes a checkpoint saved by a real
# 2-worker run (model parallel: w1, w2 and their Adam slots split over the workers) as a .npz
# whose arrays numpy reads with the right keys and shapes and the values of the checkpoint's
# shards (assembled here independently, from the manifest); `meshrt train --init` from that .npz
# then reproduces the restored run's next loss exactly, and a subset of the arrays gives the same
# first loss on a cluster as on the single-process reference. Bad --init files and flags are
# refused naming what is wrong.
set -euo pipefail
meshrt=$PWD/client/meshrt
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp  # where --init without a checkpoint root writes its checkpoint
model=(--model mlp --seed 2 --batch 8 --d_model 8 --d_ff 16)
fail() { echo "FAIL: $*"; exit 1; }

$meshrt train "${model[@]}" --steps 3 --mesh x:2 --layout d_ff:x --local 2 \
  --checkpoint_root "$tmp" --save ck > "$tmp/train.out"
$meshrt export ck "$tmp/w.npz" --checkpoint_root "$tmp" > "$tmp/export.out"
grep -q "wrote 9 arrays of checkpoint ck (step 3) to $tmp/w.npz" "$tmp/export.out" \
  || fail "export: $(cat "$tmp/export.out")"
$meshrt export "$tmp/ck" "$tmp/w12.npz" --variables w1,w2 > /dev/null

$py - "$tmp" <<'PY'
import glob, os, re, sys
import numpy as np
tmp = sys.argv[1]
version = os.path.join(tmp, "ck", open(os.path.join(tmp, "ck", "CURRENT")).read().strip())
text = open(os.path.join(version, "manifest.pbtxt")).read()
def blocks(kind):
    # Top-level `kind { ... }` blocks of the text-format manifest.
    out, depth, start = [], 0, None
    for m in re.finditer(r"(\w+) \{|\}", text):
        if m.group(0) == "}":
            depth -= 1
            if depth == 0 and start is not None:
                out.append(text[start:m.end()]); start = None
        else:
            if depth == 0 and m.group(1) == kind:
                start = m.start()
            depth += 1
    return out
shapes = {}
for v in blocks("variables"):
    name = re.search(r'name: "([^"]*)"', v).group(1)
    shapes[name] = tuple(int(s) for s in re.findall(r"size: (\d+)", v))
whole = {n: np.zeros(s, np.float32) for n, s in shapes.items()}
split = set()
for s in blocks("shards"):
    name = re.search(r'variable: "([^"]*)"', s).group(1)
    begin = [int(b) for b in re.findall(r"begin: (\d+)", s)]
    size = [int(b) for b in re.findall(r"slice_shape: (\d+)", s)]
    data = np.fromfile(os.path.join(version, re.search(r'file: "([^"]*)"', s).group(1)), "<f4")
    if tuple(size) != shapes[name]:
        split.add(name)
    whole[name][tuple(slice(b, b + n) for b, n in zip(begin, size))] = data.reshape(size)
assert {"w1", "w2", "w1/m", "w2/v"} <= split, split   # the export had shards to assemble
with np.load(os.path.join(tmp, "w.npz")) as f:
    assert sorted(f.files) == sorted(shapes), (f.files, shapes)
    assert f["w1"].shape == (8, 16) and f["w2"].shape == (16, 8) and f["global_step"].shape == ()
    for n in f.files:
        assert f[n].dtype == np.float32, n
        assert np.array_equal(f[n], whole[n]), n
    assert f["global_step"] == 3 and f["data_step"] == 3
    np.savez(os.path.join(tmp, "subset.npz"), w1=f["w1"], w2=f["w2"])
with np.load(os.path.join(tmp, "w12.npz")) as g, np.load(os.path.join(tmp, "w.npz")) as f:
    assert sorted(g.files) == ["w1", "w2"] and np.array_equal(g["w1"], f["w1"])
np.savez(os.path.join(tmp, "unknown.npz"), nope=np.zeros(2, np.float32))
np.savez(os.path.join(tmp, "shape.npz"), w1=np.zeros((3, 3), np.float32))
print("export: 9 arrays, equal to the assembled shards")
PY

# Every variable (weights, Adam slots, counters) from the export, on another layout: the first
# step's loss is the restored run's next one, bit for bit (same mesh and layout for both).
cluster=(--mesh x:2 --layout batch:x --local 2)
$meshrt train "${model[@]}" --steps 4 "${cluster[@]}" --checkpoint_root "$tmp" --restore ck \
  --loss_csv "$tmp/restored.csv" > /dev/null
$meshrt train "${model[@]}" --steps 4 "${cluster[@]}" --init "$tmp/w.npz" \
  --loss_csv "$tmp/init.csv" > "$tmp/init.out"
grep -q "initialised 9 variables from $tmp/w.npz" "$tmp/init.out" || fail "$(cat "$tmp/init.out")"
ls -d "$tmp"/meshrt-init-*/imports/init-* > /dev/null || fail "no --init checkpoint in \$TMPDIR"
restored=$(sed -n 2p "$tmp/restored.csv" | cut -d, -f2)
init=$(sed -n 2p "$tmp/init.csv" | cut -d, -f2)
[[ $(sed -n 2p "$tmp/restored.csv" | cut -d, -f1) == 4 ]] || fail "the restored run's step is not 4"
[[ $restored == "$init" ]] || fail "--init's first loss $init is not the restored run's $restored"

# Only the weights: the rest from their initializers; the same on a cluster and the reference,
# and not the loss without --init.
$meshrt train "${model[@]}" --steps 1 "${cluster[@]}" --init "$tmp/subset.npz" \
  --checkpoint_root "$tmp" --loss_csv "$tmp/sub_local.csv" > /dev/null
ls "$tmp"/imports/init-* > /dev/null || fail "no imports/ checkpoint under --checkpoint_root"
$meshrt train "${model[@]}" --steps 1 --reference --init "$tmp/subset.npz" \
  --loss_csv "$tmp/sub_ref.csv" > /dev/null
$meshrt train "${model[@]}" --steps 1 --reference --loss_csv "$tmp/fresh.csv" > /dev/null
$py - "$tmp" <<'PY'
import sys
tmp = sys.argv[1]
loss = lambda name: float(open(f"{tmp}/{name}.csv").read().splitlines()[1].split(",")[1])
local, ref, fresh = loss("sub_local"), loss("sub_ref"), loss("fresh")
assert abs(local - ref) <= 1e-5 * abs(ref), (local, ref)
assert abs(local - fresh) > 1e-3, (local, fresh)
print(f"--init w1,w2: first loss {local} on x:2, {ref} on the reference; {fresh} without --init")
PY

# Refused, naming what is wrong.
expect_error() {  # expected message, then the command
  local want=$1; shift
  if "$@" > "$tmp/err.out" 2>&1; then fail "$* succeeded"; fi
  grep -qF -- "$want" "$tmp/err.out" || fail "$*: expected '$want', got: $(cat "$tmp/err.out")"
}
expect_error "'nope' is not a variable of the model" \
  $meshrt train "${model[@]}" --steps 1 --reference --init "$tmp/unknown.npz"
expect_error "variable 'w1': expected shape [d_model:8, d_ff:16], got (3, 3)" \
  $meshrt train "${model[@]}" --steps 1 --reference --init "$tmp/shape.npz"
expect_error "--init and --restore both set the starting values" \
  $meshrt train "${model[@]}" --steps 1 --reference --init "$tmp/w.npz" --restore ck
expect_error "has no variable 'zz'" $meshrt export "$tmp/ck" "$tmp/x.npz" --variables w1,zz
expect_error "not a .npz file" \
  $meshrt train "${model[@]}" --steps 1 --reference --init "$tmp/ck/CURRENT"
# (Into files first: `grep -q` stops reading at the first match, and under pipefail the help's
# writer then dies of SIGPIPE and fails the pipeline.)
$meshrt export --help > "$tmp/export_help.txt"
grep -q "numpy.load" "$tmp/export_help.txt"
$meshrt train --help > "$tmp/train_help.txt"
grep -q -- "--init" "$tmp/train_help.txt"
echo PASS
