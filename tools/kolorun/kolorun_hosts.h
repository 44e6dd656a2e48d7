// kolorun --hosts: the command that starts one host's kolorun through the remote-shell template.
// ssh joins the words after the host and runs them in the remote user's shell, so every word
// kolorun appends is shell-quoted: CMD and its arguments reach the ranks unchanged.
#pragma once

#include <string>
#include <vector>

#include "tools/kolorun/kolorun_options.h"

namespace kolo::kolorun {

// The argument vector kolorun execs for host `host`: the --rsh template split on spaces with
// {host} replaced, then, shell-quoted, `env` with the job's secret (KOLO_SECRET, or
// KOLO_SECRET_FILE as an absolute path when only that is set: ssh does not pass the environment
// on), this kolorun's binary with --nnodes/--node-rank and the options each host needs, and CMD.
std::vector<std::string> host_command(const Options& opts, int host);

}  // namespace kolo::kolorun
