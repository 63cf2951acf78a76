# Sourced by the scripts under tests/ that read the database's CPU, as
# `mcq bench scale` reads it: `ticks` prints the CPU ticks of the
# postmaster whose data directory is `$data`, of its reaped children and
# of its live children.
ticks() {
    local pm total=0 pid fields
    pm=$(head -1 "$data/postmaster.pid")
    fields=$(sed 's/.*) //' "/proc/$pm/stat")
    read -r -a f <<<"$fields"
    total=$((f[11] + f[12] + f[13] + f[14]))
    for pid in $(pgrep -P "$pm"); do
        fields=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || continue
        read -r -a f <<<"$fields"
        total=$((total + f[11] + f[12]))
    done
    echo "$total"
}
