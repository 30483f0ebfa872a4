#!/bin/sh
# A stand-in for /usr/lib/apt/apt-helper in ddtp_fetch_test: `cat-file PATH` prints the file
# (the fixtures are not compressed).
[ "$1" = "cat-file" ] || exit 100
exec cat "$2"
