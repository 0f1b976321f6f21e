//! The statistics the benchmarks report, in one place: the mean and sample standard
//! deviation of repetitions ([`mean_sd`]). A leaf: it depends on no vtnt crate, so any
//! benchmark (`vtnt-evaluation`, `vtnt-bench`) may use it without pulling in another's
//! dependencies.

/// Mean and sample standard deviation (n - 1); `None` for no values, sd 0 for one.
pub fn mean_sd(v: &[f64]) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let sd = if v.len() > 1 {
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    Some((m, sd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_sd() {
        assert_eq!(mean_sd(&[]), None);
        assert_eq!(mean_sd(&[3.0]), Some((3.0, 0.0)));
        let (m, sd) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(m, 5.0);
        assert!((sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }
}
