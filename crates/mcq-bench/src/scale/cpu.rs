//! CPU time of the database's processes and of this one, from `/proc`.
//!
//! PostgreSQL forks a backend per connection, so its CPU is the
//! postmaster's own, its reaped children's (`cutime`, `cstime`: backends
//! that ended during the run) and that of the children still alive.
//! Sampled before and after a size, the difference is what the queue cost
//! the database. Only a database on this machine whose data directory is
//! readable can be measured; elsewhere the figures are absent.
//!
//! `/proc/PID/stat` counts in clock ticks (10 ms), each process's time
//! rounded down: with a few dozen tasks in a size, a backend's rounding
//! alone moved the CPU per task by hundreds of microseconds. The live
//! processes are therefore read in nanoseconds from `/proc/PID/schedstat`
//! (time on a CPU; PostgreSQL's processes have one thread each), and in
//! ticks only where the kernel keeps no such account, and for the reaped
//! children, whose time reaches the postmaster's fields only in ticks.

use std::path::Path;

/// Clock ticks of a `/proc/PID/stat` time field per second.
pub(crate) fn ticks_per_second() -> f64 {
    static TICK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICK.get_or_init(ask_ticks_per_second)
}

fn ask_ticks_per_second() -> f64 {
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

/// Seconds on a CPU of the main thread of `pid`, from the first field of
/// `/proc/PID/schedstat` (nanoseconds); `None` where the kernel keeps no
/// such account (it then writes zeros).
fn schedstat_seconds(text: &str) -> Option<f64> {
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    (ns > 0).then(|| ns as f64 / 1e9)
}

/// Seconds on a CPU of the single-threaded process whose `/proc/PID/stat`
/// fields are `fields`: in nanoseconds where the kernel counts them, else
/// its `utime` and `stime` ticks.
fn process_seconds(pid: u32, fields: &[u64], tick: f64) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|t| schedstat_seconds(&t))
        .unwrap_or_else(|| fields.get(10..12).map_or(0, |t| t.iter().sum::<u64>()) as f64 / tick)
}

/// Seconds on a CPU of the single-threaded process `pid`, of its reaped
/// children and of its live children (each single-threaded too, as
/// PostgreSQL's are).
pub(crate) fn tree_seconds(pid: u32) -> Option<f64> {
    let tick = ticks_per_second();
    let own = stat_fields(pid)?;
    let reaped = own.get(12..14)?.iter().sum::<u64>() as f64 / tick;
    let mut seconds = process_seconds(pid, &own, tick) + reaped;
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
            seconds += process_seconds(child, &fields, tick);
        }
    }
    Some(seconds)
}

/// Seconds of CPU between two readings of [`tree_seconds`]. A backend
/// that ended in between moves from the nanosecond account to its
/// parent's ticks, which may read a little less: never below zero.
pub(crate) fn spent(before: Option<f64>, after: Option<f64>) -> Option<f64> {
    before.zip(after).map(|(b, a)| (a - b).max(0.0))
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
    use std::process::{Command, Stdio};

    use super::*;

    #[test]
    fn this_process_and_its_tree_have_cpu_times() {
        let machine = machine_busy_ticks().expect("/proc/stat");
        let own = own_ticks().expect("/proc/self/stat");
        assert!(
            machine >= own,
            "the machine's busy time holds this process's"
        );
        assert!(tree_seconds(std::process::id()).is_some());
        assert_eq!(tree_seconds(u32::MAX), None, "no such process");
        assert!(ticks_per_second() >= 1.0);
        assert_eq!(postmaster_pid(Path::new("/nonexistent")), None);
    }

    #[test]
    fn schedstat_gives_nanoseconds_or_nothing() {
        assert_eq!(
            schedstat_seconds("153330363 207896353 78\n"),
            Some(0.153330363)
        );
        // A kernel without the account writes zeros.
        assert_eq!(schedstat_seconds("0 0 0\n"), None);
        assert_eq!(schedstat_seconds(""), None);
        assert_eq!(schedstat_seconds("x 1 2"), None);
    }

    /// A child that spends some CPU and then sleeps: its time, read finer
    /// than a tick, agrees with its ticks, and the tree of this process
    /// holds it.
    #[test]
    fn a_child_s_cpu_is_read_finer_than_a_tick() {
        let mut child = Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exec sleep 60",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn sh");
        let pid = child.id();
        // The burn ends when the shell becomes `sleep`.
        let mut waited = 0;
        while std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|comm| comm.trim() != "sleep")
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
            waited += 1;
            assert!(waited < 6_000, "the child never finished its loop");
        }
        let tick = ticks_per_second();
        let fields = stat_fields(pid).expect("the child's stat");
        let ticks = fields[10..12].iter().sum::<u64>() as f64 / tick;
        let fine = process_seconds(pid, &fields, tick);
        let tree = tree_seconds(std::process::id()).expect("this process's tree");
        let _ = child.kill();
        let _ = child.wait();
        // Read apart from the code under test, which would fall back to
        // ticks, and pass, if it failed to read it.
        let kernel_counts = std::fs::read_to_string("/proc/self/schedstat")
            .is_ok_and(|t| t.split_whitespace().next().is_some_and(|ns| ns != "0"));
        if !kernel_counts {
            eprintln!("this kernel keeps no schedstat account: ticks only");
            assert_eq!(fine, ticks);
            return;
        }
        assert!(ticks > 0.0, "the loop took no tick of CPU");
        assert!(
            (fine - ticks).abs() <= 2.0 / tick,
            "nanoseconds {fine} s against ticks {ticks} s"
        );
        let ns = (fine * 1e9).round() as u64;
        assert_ne!(ns % 1_000_000, 0, "{fine} s is read in whole milliseconds");
        assert!(
            tree >= fine,
            "the tree ({tree} s) holds the child ({fine} s)"
        );
    }
}
