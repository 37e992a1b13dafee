#!/bin/sh
# logged_command.sh LOG COMMAND...: runs COMMAND, writes what it printed
# (stdout and stderr) to LOG, prints it too and exits with COMMAND's status.
# CMakeLists.txt runs the kernels' device compiles so, for the kernel report
# to read ptxas's lines from LOG (tools/kernel_report).
log=$1
shift
"$@" >"$log" 2>&1
status=$?
cat "$log"
exit "$status"
