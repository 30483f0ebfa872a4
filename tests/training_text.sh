# Sourced by the shell tests that train on text: sets `text` to Debian's fortunes file (tools/setup.sh
# installs the fortunes package) or, when it is missing, to a generated English-ish text in "$1"
# (the test's temporary folder), saying so: the test never passes silently without the package.
text=/usr/share/games/fortunes/cookie
if [[ ! -r $text ]]; then
  echo "NOTE: $text is missing (tools/setup.sh installs Debian's fortunes package); using a generated text"
  text="$1/text"
  for i in $(seq 1 400); do echo "The quick brown fox $i jumps over the lazy dog." ; done > "$text"
fi
