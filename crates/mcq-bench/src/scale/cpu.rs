//! CPU time of the database's processes and of this one, from `/proc`.
//!
//! PostgreSQL forks a backend per connection, so its CPU is the
//! postmaster's own, its reaped children's (`cutime`, `cstime`: backends
//! that ended during the run) and that of the children still alive.
//! Sampled before and after a size, the difference is what the queue cost
//! the database. Only a database on this machine whose data directory is
//! readable can be measured; elsewhere the figures are absent.

use std::path::Path;

/// Clock ticks of a `/proc/PID/stat` time field per second.
pub(crate) fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|t| t.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        // Linux has reported 100 to user space on every common platform.
        .unwrap_or(100.0)
}

/// The postmaster's pid, from `postmaster.pid` in the data directory.
pub(crate) fn postmaster_pid(data_directory: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(data_directory.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// The fields of `/proc/PID/stat` after the command name: `[0]` is the
/// state, `[1]` the parent, `[11..15]` utime, stime, cutime, cstime.
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; it ends at the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    Some(
        rest.split_whitespace()
            .skip(1)
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

/// CPU ticks of `pid` and its reaped children, and of its live children.
pub(crate) fn tree_ticks(pid: u32) -> Option<u64> {
    let own = stat_fields(pid)?;
    let mut ticks = own.get(10..14)?.iter().sum::<u64>();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(fields) = stat_fields(child)
            && fields.first() == Some(&u64::from(pid))
        {
            ticks += fields.get(10..12).map_or(0, |t| t.iter().sum::<u64>());
        }
    }
    Some(ticks)
}

/// Busy CPU ticks of the whole machine, every core summed, from the first
/// line of `/proc/stat` (user, nice, system, irq, softirq, steal; guest
/// time is inside user): with the database's and this process's taken
/// away, what every other process used.
pub(crate) fn machine_busy_ticks() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = text
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy = [0, 1, 2, 5, 6, 7]
        .iter()
        .map(|&i| fields.get(i).copied().unwrap_or(0));
    Some(busy.sum())
}

/// CPU ticks of this process (every thread: the simulated workers, the
/// relays and the benchmark itself).
pub(crate) fn own_ticks() -> Option<u64> {
    let fields = stat_fields(std::process::id())?;
    Some(fields.get(10..12)?.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_and_its_tree_have_cpu_times() {
        let machine = machine_busy_ticks().expect("/proc/stat");
        let own = own_ticks().expect("/proc/self/stat");
        assert!(
            machine >= own,
            "the machine's busy time holds this process's"
        );
        let tree = tree_ticks(std::process::id()).expect("/proc");
        assert!(tree >= own, "{tree} < {own}");
        assert!(ticks_per_second() >= 1.0);
        assert_eq!(postmaster_pid(Path::new("/nonexistent")), None);
    }
}
