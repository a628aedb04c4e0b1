//! The statistics of sweeps and receipts: nearest-rank percentiles and the seeded
//! percentile bootstrap.

pub(crate) use crate::eval::turns::nearest_rank;

/// The mean, `None` for no values.
pub(crate) fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        None
    } else {
        Some(values.iter().sum::<f64>() / values.len() as f64)
    }
}

/// The 95% percentile-bootstrap interval of the mean: `resamples` resamples of the
/// values with replacement (each as many as the values), each resample's mean, sorted;
/// the interval runs from the nearest-rank 2.5th to the 97.5th percentile of those
/// means. A fresh generator seeded with `seed` draws the resamples, so the interval
/// depends on the values, `resamples` and `seed` alone. `None` for no values; at least
/// one resample is drawn.
pub(crate) fn bootstrap_mean(values: &[f64], resamples: u32, seed: u64) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut means: Vec<f64> = (0..resamples.max(1))
        .map(|_| (0..n).map(|_| values[rng.usize(..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_unstable_by(f64::total_cmp);
    Some((nearest_rank(&means, 0.025)?, nearest_rank(&means, 0.975)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_ranks() {
        let v: Vec<u32> = (1..=20).collect();
        assert_eq!(nearest_rank(&v, 0.5), Some(10));
        assert_eq!(nearest_rank(&v, 0.95), Some(19));
        assert_eq!(nearest_rank(&v, 0.0), Some(1));
        assert_eq!(nearest_rank(&v, 1.0), Some(20));
        assert_eq!(nearest_rank::<u32>(&[], 0.5), None);
        assert_eq!(nearest_rank(&[7], 0.95), Some(7));
    }

    #[test]
    fn the_bootstrap_is_reproducible_and_exact_where_it_can_be() {
        assert_eq!(bootstrap_mean(&[], 2000, 1), None);
        assert_eq!(bootstrap_mean(&[0.25; 9], 2000, 1), Some((0.25, 0.25)));
        // Many distinct resample means: another seed moves the ends.
        let v = [0.1, 0.35, 0.72, 0.9, 0.05, 0.5, 0.61, 0.22];
        assert_eq!(bootstrap_mean(&v, 2000, 7), bootstrap_mean(&v, 2000, 7));
        assert_ne!(bootstrap_mean(&v, 2000, 7), bootstrap_mean(&v, 2000, 8));
        let (low, high) = bootstrap_mean(&v, 2000, 7).unwrap();
        let m = mean(&v).unwrap();
        assert!(low < m && m < high, "{low} {m} {high}");
    }
}
