#!/bin/sh
# retention_crash.sh with the removals made by `trajpack rm` (one commit
# for all the files, then one rebase; `trajpack prune` removes through
# the same writer call) instead of rm through a writable mount: 8 kills
# of the removal and 4 of gc.
RETENTION_REMOVE_WITH=trajpack
RETENTION_KILL_TRIALS=${RETENTION_KILL_TRIALS:-8}
RETENTION_GC_KILL_TRIALS=${RETENTION_GC_KILL_TRIALS:-4}
. "$(dirname "$0")/retention_crash.sh"
