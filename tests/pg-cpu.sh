# Sourced by the scripts under tests/ that read the database's CPU, as
# `mcq bench scale` reads it: `cpu_us` prints the microseconds of CPU of
# the postmaster whose data directory is `$data`, of its reaped children
# and of its live children. Live processes are read in nanoseconds from
# /proc/PID/schedstat (PostgreSQL's have one thread each); reaped ones,
# and every process on a kernel that keeps no such account, in clock
# ticks from /proc/PID/stat.
hz=$(getconf CLK_TCK)

# Microseconds of CPU of the single-threaded process $1, whose
# /proc/PID/stat utime and stime are $2 and $3 ticks.
process_us() {
    local ns
    ns=$(cut -d' ' -f1 "/proc/$1/schedstat" 2>/dev/null) || ns=0
    if [ "${ns:-0}" -gt 0 ]; then
        echo $((ns / 1000))
    else
        echo $((($2 + $3) * 1000000 / hz))
    fi
}

cpu_us() {
    local pm total pid fields
    pm=$(head -1 "$data/postmaster.pid")
    fields=$(sed 's/.*) //' "/proc/$pm/stat")
    read -r -a f <<<"$fields"
    total=$(((f[13] + f[14]) * 1000000 / hz + $(process_us "$pm" "${f[11]}" "${f[12]}")))
    for pid in $(pgrep -P "$pm"); do
        fields=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || continue
        read -r -a f <<<"$fields"
        total=$((total + $(process_us "$pid" "${f[11]}" "${f[12]}")))
    done
    echo "$total"
}
