//! Latency percentiles (NumPy's default "linear" method, so the numbers match the Python
//! harness's `np.percentile`) and process CPU time from `/proc`.

/// The `p`-th percentile (0..=100) of `sorted` (ascending), interpolating linearly between
/// the two nearest ranks; `None` for an empty slice.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let rank = (p.clamp(0.0, 100.0) / 100.0) * last as f64;
    let below = rank.floor() as usize;
    let above = (below + 1).min(last);
    let fraction = rank - below as f64;
    Some(sorted[below] + (sorted[above] - sorted[below]) * fraction)
}

/// p50, p95 and p99 of `values` (any order), and the mean and maximum.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub mean: f64,
    pub max: f64,
}

pub fn summarize(values: &mut [f64]) -> Option<Summary> {
    values.sort_unstable_by(f64::total_cmp);
    Some(Summary {
        p50: percentile(values, 50.0)?,
        p95: percentile(values, 95.0)?,
        p99: percentile(values, 99.0)?,
        mean: values.iter().sum::<f64>() / values.len() as f64,
        max: *values.last()?,
    })
}

/// Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ; 100 on every Linux
/// architecture this runs on).
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

/// User + system CPU seconds used so far by process `pid` ("self" for this process), all
/// threads included; `None` where `/proc` is unavailable.
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; the fields after its ')' are fixed.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is index 0, so utime (field 14) is index 11 and stime index 12.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / CLOCK_TICKS_PER_SECOND)
}

/// Resident set size of process `pid` in bytes (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_bytes(pid: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_match_numpy_linear() {
        // np.percentile([1, 2, 3, 4], [50, 95, 99]) == [2.5, 3.85, 3.97]
        let values = [1.0, 2.0, 3.0, 4.0];
        assert!((percentile(&values, 50.0).unwrap() - 2.5).abs() < 1e-12);
        assert!((percentile(&values, 95.0).unwrap() - 3.85).abs() < 1e-12);
        assert!((percentile(&values, 99.0).unwrap() - 3.97).abs() < 1e-12);
        assert_eq!(percentile(&values, 0.0), Some(1.0));
        assert_eq!(percentile(&values, 100.0), Some(4.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        // 1..=100: p99 = 99.01, p50 = 50.5.
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert!((percentile(&hundred, 99.0).unwrap() - 99.01).abs() < 1e-9);
        assert!((percentile(&hundred, 50.0).unwrap() - 50.5).abs() < 1e-9);
    }

    #[test]
    fn summary_sorts_first() {
        let mut values = vec![4.0, 1.0, 3.0, 2.0];
        let summary = summarize(&mut values).unwrap();
        assert!((summary.p50 - 2.5).abs() < 1e-12);
        assert_eq!(summary.max, 4.0);
        assert!((summary.mean - 2.5).abs() < 1e-12);
        assert!(summarize(&mut []).is_none());
    }

    #[test]
    fn reads_own_cpu_time_and_rss() {
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(cpu_seconds("self").unwrap() >= 0.0);
            assert!(rss_bytes("self").unwrap() > 0);
        }
    }
}
