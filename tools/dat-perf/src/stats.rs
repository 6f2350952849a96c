//! Summaries of per-iteration samples, and rates from byte and op counts.

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    /// perftest's "typical": the median.
    pub median: f64,
    pub p99: f64,
    pub avg: f64,
    pub max: f64,
}

/// Nearest-rank percentile of sorted samples: the smallest value with at
/// least `p`% of the samples at or below it.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// None for no samples; NaNs are dropped (a sample is a clock difference, so
/// they do not occur, but a summary must not panic on one).
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    let mut s: Vec<f64> = samples.iter().copied().filter(|v| !v.is_nan()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    let median = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
    Some(Summary { n, min: s[0], median, p99: percentile(&s, 99.0), avg: s.iter().sum::<f64>() / n as f64, max: s[n - 1] })
}

/// MB/s as perftest reports it: 2^20 bytes per second.
pub fn mb_per_s(bytes: f64, secs: f64) -> f64 {
    if secs > 0.0 { bytes / secs / (1u64 << 20) as f64 } else { 0.0 }
}

/// Millions of operations per second.
pub fn mops(ops: f64, secs: f64) -> f64 {
    if secs > 0.0 { ops / secs / 1e6 } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_one_to_hundred() {
        let v: Vec<f64> = (1..=100).rev().map(|i| i as f64).collect();
        let s = summarize(&v).unwrap();
        assert_eq!(s.n, 100);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 100.0);
        assert_eq!(s.median, 50.5);
        assert_eq!(s.p99, 99.0);
        assert_eq!(s.avg, 50.5);
    }

    #[test]
    fn odd_count_and_outlier() {
        let s = summarize(&[3.0, 1.0, 2.0, 1000.0, 2.0]).unwrap();
        assert_eq!(s.median, 2.0);
        assert_eq!(s.p99, 1000.0);
        assert_eq!(s.avg, 201.6);
    }

    #[test]
    fn single_and_empty() {
        let s = summarize(&[7.5]).unwrap();
        assert_eq!((s.min, s.median, s.p99, s.avg, s.max), (7.5, 7.5, 7.5, 7.5, 7.5));
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[f64::NAN]).is_none());
    }

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=1000).map(|i| i as f64).collect();
        assert_eq!(percentile(&v, 99.0), 990.0);
        assert_eq!(percentile(&v, 50.0), 500.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 100.0), 1000.0);
    }

    #[test]
    fn rates() {
        assert_eq!(mb_per_s((1u64 << 20) as f64 * 10.0, 2.0), 5.0);
        assert_eq!(mops(3e6, 1.5), 2.0);
        assert_eq!(mb_per_s(1.0, 0.0), 0.0);
    }
}
