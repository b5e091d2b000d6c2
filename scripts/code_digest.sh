#!/usr/bin/env bash
# Prints one sha256 over the code a GPU run executes (grace/, patches/, scripts/; Python, patch and
# shell files, by path and content). Run scripts record it in their meta.txt, because a copy of
# the tree run elsewhere need not carry its commits: run this at a commit here
# (`git stash; git checkout C; bash scripts/code_digest.sh`) to find which commit a run used.
set -euo pipefail
cd "$(dirname "$0")/.."
find grace patches scripts -type f \( -name '*.py' -o -name '*.patch' -o -name '*.sh' \) -print0 \
  | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
