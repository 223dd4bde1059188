#!/bin/sh
# retention_follow.sh with the following mount reading the archive over
# HTTP (lighttpd on 127.0.0.1) while another writer thins it locally.
RETENTION_FOLLOW_REMOTE=1
. "$(dirname "$0")/retention_follow.sh"
