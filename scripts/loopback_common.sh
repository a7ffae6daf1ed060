# Sourced by the scripts that time a job of several conveyor processes on loopback
# (grow_timing.sh, shrink_timing.sh), from the repository root: the binary (CONVEYOR),
# the folder that keeps the runs (OUT, a temporary one unless set) and a free port.
BIN=${CONVEYOR:-build/conveyor}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# start_node DIR PORT RANK: node RANK of the job "${JOB[@]}" over 3 processes in the
# background (its pid in $!), its output in DIR/nodeRANK.out and .err, the run in DIR/run.
start_node() {
  "$BIN" train "${JOB[@]}" --nnodes 3 --node-rank "$3" --rdzv "127.0.0.1:$2" --out "$1/run" \
    > "$1/node$3.out" 2> "$1/node$3.err" &
}
