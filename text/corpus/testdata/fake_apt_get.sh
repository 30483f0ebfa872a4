#!/bin/sh
# A stand-in for apt-get in ddtp_fetch_test (no network): `update` copies the files of
# $FAKE_ARCHIVE into the lists directory given as -o Dir::State::Lists=DIR (or fails when
# $FAKE_APT_FAIL is set); `indextargets` prints a stanza per Translation file there, as apt-get
# does. Every argument is appended to $FAKE_APT_LOG, one per line.
lists=""
cmd=""
for arg in "$@"; do
  [ -n "$FAKE_APT_LOG" ] && printf '%s\n' "$arg" >> "$FAKE_APT_LOG"
  case "$arg" in
    Dir::State::Lists=*) lists="${arg#Dir::State::Lists=}" ;;
    update|indextargets) cmd="$arg" ;;
  esac
done
case "$cmd" in
  update)
    if [ -n "$FAKE_APT_FAIL" ]; then
      echo "E: Could not resolve fake.example" >&2
      exit 100
    fi
    echo "Get:1 http://fake.example/debian bookworm InRelease"
    echo "W: a warning from the fake" >&2
    cp "$FAKE_ARCHIVE"/* "$lists"/
    ;;
  indextargets)
    for f in "$lists"/*_i18n_Translation-*; do
      [ -e "$f" ] || continue
      lang="${f##*Translation-}"
      lang="${lang%.lz4}"
      lang="$(printf '%s' "$lang" | sed 's/%5f/_/g')"
      printf 'MetaKey: main/i18n/Translation-%s\nURI: http://fake.example/debian/dists/bookworm/main/i18n/Translation-%s\nFilename: %s\nRelease: bookworm\nComponent: main\nFallback-Of: \nLanguage: %s\nIdentifier: Translations\n\n' \
        "$lang" "$lang" "$f" "$lang"
    done
    ;;
  *)
    echo "E: fake apt-get: no command" >&2
    exit 100
    ;;
esac
