#!/usr/bin/env bash
# Session 31, planned for an H200 and not run (both starts refused): one chat, plain, seven
# alternated runs each (8B, 1B); then prompt lookup k=4 and auto on chat at 1 and 4 chats (8B).
here="$(dirname "$0")"
bash "$here/h200one.sh"
bash "$here/auto.sh"
