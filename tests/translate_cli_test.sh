#!/usr/bin/env bash
# The translation experiment end to end with real daemons, on a tiny made-up corpus: `meshrt data
# translations --source aligned` splits it, `meshrt vocab train` makes a SentencePiece vocabulary,
# `meshrt train --model transformer_encdec` gives the single-process losses (--reference) within
# 1e-5 relative under data-parallel, model-parallel and 2-D layouts on 4 worker processes (dropout
# on: its random bits are layout-invariant), the checkpoint carries its vocabulary and restores on
# another mesh, a resumed run continues with the same losses, the planner (--layout auto) and
# `meshrt explain` know the model, and `meshrt translate` (greedy and beam search, with scores) writes the same lines
# on the reference interpreter and on every layout; `meshrt bleu` scores them. Bad input is refused
# with one line before anything runs.
set -euo pipefail
meshrt=$PWD/client/meshrt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

python3 - <<'PY'
import itertools
adj = [("red", "rouge"), ("small", "petit"), ("old", "vieux"), ("green", "vert"), ("big", "grand")]
noun = [("cat", "chat"), ("dog", "chien"), ("bird", "oiseau"), ("horse", "cheval"),
        ("fish", "poisson"), ("wolf", "loup")]
verb = [("sleeps", "dort"), ("eats", "mange"), ("runs", "court"), ("sings", "chante")]
en, fr = [], []
for (a, af), (n, nf), (v, vf) in itertools.product(adj, noun, verb):
    en.append(f"the {a} {n} {v} .")
    fr.append(f"le {nf} {af} {vf} .")
open("en.txt", "w").write("\n".join(en) + "\n")
open("fr.txt", "w").write("\n".join(fr) + "\n")
PY
$meshrt data translations --source aligned --input en.txt --input fr.txt --lang fr --out data \
  --dev_percent 10 --test_percent 10 > data.out
grep -q "120 pairs" data.out
for f in data/{train,dev,test}.{en,fr} data/SOURCES; do test -s "$f"; done
$meshrt vocab train --input data/train.en data/train.fr --size 48 --out v.model > vocab.out
grep -q "vocab size: 48" <($meshrt vocab inspect v.model)

small=(--model transformer_encdec --data data --target_lang fr --vocab v.model --steps 8 --seed 5
       --optimizer adam --lr 0.01 --batch 8 --length 12 --d_model 32 --heads 4 --d_ff 64
       --layers 1)
$meshrt train "${small[@]}" --reference --loss_csv ref.csv > ref.out
grep -q "encoded 98 sentence pairs" ref.out
head -1 ref.csv | grep -q '^step,loss'
test "$(wc -l < ref.csv)" -eq 9

# A missing --vocab file is trained on the training split and written (the same model as above).
$meshrt train "${small[@]}" --steps 1 --reference --vocab auto.model --vocab_size 48 > auto.out
grep -q "trained a vocabulary of 48 pieces" auto.out
cmp v.model auto.model

compare() {  # compare CSV $1 against the reference's losses
  python3 - ref.csv "$1" <<'PY'
import csv, sys
ref = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[1]))]
got = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[2]))]
assert len(ref) == len(got) == 8, (len(ref), len(got))
worst = max(abs(a - b) / abs(a) for a, b in zip(ref, got))
print(f"{sys.argv[2]}: max relative loss difference over 8 steps {worst:.2e}")
assert worst <= 1e-5, worst
assert ref[-1] < ref[0], "the loss did not fall"
PY
}

layouts=("batch:rows" "heads:cols,d_ff:cols,vocab:cols" "batch:rows,heads:cols,d_ff:cols,vocab:cols")
for layout in "${layouts[@]}"; do
  name=$(tr -c 'a-z' _ <<<"$layout")
  $meshrt train "${small[@]}" --mesh rows:2,cols:2 --layout "$layout" --local 4 \
    --loss_csv "$name.csv" > "$name.out" 2>&1 || { cat "$name.out"; exit 1; }
  compare "$name.csv"
done

# A longer 2-D run (the corpus is easy) saves a checkpoint with its vocabulary and a dev BLEU
# column; it continues on one processor (another mesh), its loss going on from where it stopped.
$meshrt train "${small[@]}" --steps 200 --mesh rows:2,cols:2 --layout "${layouts[2]}" --local 4 \
  --save ck --eval_bleu_every 100 --eval_bleu_lines 8 --loss_csv bleu.csv > save.out 2>&1 ||
  { cat save.out; exit 1; }
cmp v.model ck/vocab.model
grep -q "dev BLEU" save.out
head -1 bleu.csv | grep -q ',bleu$'
test "$(grep -c ',[0-9.]*$' bleu.csv)" -ge 3
$meshrt train "${small[@]}" --steps 202 --reference --restore ck --loss_csv restored.csv > restored.out
python3 - ref.csv restored.csv <<'PY'
import csv, sys
ref = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[1]))]
got = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[2]))]
assert len(got) == 2 and got[0] < ref[0], (got, ref[0])
PY

# Nothing lost: a run of 4 steps resumed to 8 (--checkpoint_dir, --resume; dropout's bits and the
# data position come back with the checkpoint) gives the uninterrupted run's losses.
two_d=(--mesh rows:2,cols:2 --layout "${layouts[2]}" --local 4)
$meshrt train "${small[@]}" "${two_d[@]}" --steps 4 --checkpoint_dir part --save_every 2 \
  > part.out 2>&1 || { cat part.out; exit 1; }
$meshrt train "${small[@]}" "${two_d[@]}" --checkpoint_dir part --resume --loss_csv resumed.csv \
  > resumed.out 2>&1 || { cat resumed.out; exit 1; }
python3 - "${name}.csv" resumed.csv <<'PY'
import csv, sys
full = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(sys.argv[1]))}
resumed = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(sys.argv[2]))}
assert sorted(resumed) == [5, 6, 7, 8], sorted(resumed)
for step, loss in resumed.items():
    assert loss == full[step], (step, loss, full[step])
PY

# The planner and explain know the model: --layout auto trains, explain shows the layout's slices.
$meshrt train "${small[@]}" --steps 2 --mesh rows:2,cols:2 --layout auto --local 4 \
  --export_graph encdec.pbtxt > auto_layout.out 2>&1 || { cat auto_layout.out; exit 1; }
grep -q "planner: chose mesh rows:2,cols:2" auto_layout.out
$meshrt explain encdec.pbtxt --mesh rows:2,cols:2 --layout "${layouts[2]}" > explain.out 2>&1
grep -q "shared/embedding .*\[vocab:24, d_model:32\]" explain.out
grep -q "decoder/layer_0/encdec_attention/q" explain.out

# Translations: the reference interpreter, then every layout; the same text, scores to rounding.
translate() {  # $1 = output name, then flags
  local name=$1
  shift
  $meshrt translate ck --input data/test.en --output "$name.fr" --scores "$@" > "$name.log" 2>&1 ||
    { cat "$name.log"; exit 1; }
  grep -q "sentences/s" "$name.log"
  test "$(wc -l < "$name.fr")" -eq "$(wc -l < data/test.en)"
}
same() {  # the lines of $1 and $2 agree: text exactly, scores within 1e-4 relative
  python3 - "$1" "$2" <<'PY'
import sys
a = [l.rstrip("\n").split("\t", 1) for l in open(sys.argv[1])]
b = [l.rstrip("\n").split("\t", 1) for l in open(sys.argv[2])]
assert len(a) == len(b) and a, (len(a), len(b))
for (sa, ta), (sb, tb) in zip(a, b):
    assert ta == tb, (sys.argv[1], sys.argv[2], ta, tb)
    assert abs(float(sa) - float(sb)) <= 1e-4 * max(1.0, abs(float(sa))), (sa, sb)
PY
}
translate greedy_ref --reference
translate beam_ref --reference --beam 3 --alpha 0.6
grep -q "beam 3" beam_ref.log
for layout in "${layouts[@]}"; do
  name=$(tr -c 'a-z' _ <<<"$layout")
  translate "greedy_$name" --local 4 --mesh rows:2,cols:2 --layout "$layout"
  same greedy_ref.fr "greedy_$name.fr"
  translate "beam_$name" --local 4 --mesh rows:2,cols:2 --layout "$layout" --beam 3 --alpha 0.6
  same beam_ref.fr "beam_$name.fr"
done
# A beam search's score is its log-probability over the length penalty: never above greedy's sum
# by more than rounding for the same tokens, and the scores are negative log-probabilities.
python3 - greedy_ref.fr beam_ref.fr <<'PY'
import sys
for path in sys.argv[1:]:
    for line in open(path):
        score = float(line.split("\t", 1)[0])
        assert score <= 1e-6, (path, line)
PY

# The model learnt the corpus: greedy and beam BLEU on the test split well above chance.
for name in greedy beam; do
  cut -f2 ${name}_ref.fr > $name.txt
  $meshrt bleu $name.txt data/test.fr > $name.bleu
  head -1 $name.bleu | grep -Eq '^BLEU = [0-9]+\.[0-9]{2}$'
  awk 'NR == 1 { if ($3 < 15) { print FILENAME ": " $0; exit 1 } }' $name.bleu
done

# Bad input: one line, before anything starts.
expect_error() {  # $1 = expected exit code, $2 = text the error contains, then the command
  local code=$1 text=$2
  shift 2
  set +e
  "$@" > err.out 2> err.txt
  local got=$?
  set -e
  test "$got" -eq "$code" || { echo "exit $got, wanted $code: $*"; cat err.txt; exit 1; }
  grep -q -- "$text" err.txt || { echo "no '$text' in:"; cat err.txt; exit 1; }
  test "$(wc -l < err.txt)" -eq 1 || { cat err.txt; exit 1; }
}
expect_error 2 "needs --input" $meshrt translate ck --reference
expect_error 2 "exactly one of" $meshrt translate ck --input data/test.en
expect_error 2 "--beam needs K >= 1" $meshrt translate ck --input data/test.en --reference --beam 0
expect_error 2 "2 x beam <= the vocabulary" $meshrt translate ck --input data/test.en --reference \
  --beam 40
$meshrt train --model mlp --steps 1 --reference --save mlp_ck > /dev/null
expect_error 1 "not a transformer_encdec checkpoint" $meshrt translate mlp_ck --input data/test.en \
  --reference --vocab v.model
expect_error 2 "needs --vocab" $meshrt train --model transformer_encdec --data data --reference
echo "translate_cli_test: all passed"
