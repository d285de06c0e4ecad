//! Histograms of ULP distances and relative errors: fixed bucket sets, counts as plain arrays
//! (no allocation per element), labels made once at the end.

/// ULP buckets: `0`, `1`, `2-3`, `4-7`, ..., `2^63-(2^64-1)`: bucket k >= 1 holds [2^(k-1), 2^k).
pub(crate) const ULP_BUCKETS: usize = 65;

/// The ULP bucket of a distance.
#[inline(always)]
pub(crate) fn ulp_bucket(d: u64) -> usize {
    (64 - d.leading_zeros()) as usize
}

/// The label of ULP bucket `k`.
pub(crate) fn ulp_label(k: usize) -> String {
    match k {
        0 => "0".to_string(),
        1 => "1".to_string(),
        _ => {
            let lo = 1u128 << (k - 1);
            let hi = (1u128 << k) - 1;
            format!("{lo}-{hi}")
        }
    }
}

/// Relative-error buckets (powers of two): `0`, `<2^-30`, `2^-30..2^-29`, ..., `2^9..2^10`,
/// `>=2^10`.
pub(crate) const REL_MIN_EXP: i32 = -30;
pub(crate) const REL_MAX_EXP: i32 = 10;
/// Bucket 0: exactly 0; bucket 1: below 2^REL_MIN_EXP; then one per binade; last: >= 2^REL_MAX_EXP.
pub(crate) const REL_BUCKETS: usize = (REL_MAX_EXP - REL_MIN_EXP) as usize + 3;

/// The relative-error bucket of a finite, non-negative relative error (branch-free: the
/// binade comes from the exponent field).
#[inline(always)]
pub(crate) fn rel_bucket(r: f64) -> usize {
    let bits = r.to_bits();
    // floor(log2(r)) for normal r; zero and subnormals give -1023 (the "below" bucket).
    let e = ((bits >> 52) & 0x7FF) as i32 - 1023;
    let k = (e - REL_MIN_EXP + 2).clamp(1, REL_BUCKETS as i32 - 1) as usize;
    if bits == 0 {
        0
    } else {
        k
    }
}

/// The label of relative-error bucket `k`.
pub(crate) fn rel_label(k: usize) -> String {
    if k == 0 {
        "0".to_string()
    } else if k == 1 {
        format!("<2^{REL_MIN_EXP}")
    } else if k == REL_BUCKETS - 1 {
        format!(">=2^{REL_MAX_EXP}")
    } else {
        let e = k as i32 - 2 + REL_MIN_EXP;
        format!("2^{e}..2^{}", e + 1)
    }
}

/// The non-empty span of a histogram (lowest to highest non-empty bucket, empty buckets inside
/// kept), labelled.
pub(crate) fn labelled(counts: &[u64], label: fn(usize) -> String) -> Vec<(String, u64)> {
    let first = counts.iter().position(|&c| c != 0);
    let last = counts.iter().rposition(|&c| c != 0);
    match (first, last) {
        (Some(f), Some(l)) => (f..=l).map(|k| (label(k), counts[k])).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulp_buckets_are_zero_one_then_powers_of_two() {
        assert_eq!(ulp_bucket(0), 0);
        assert_eq!(ulp_bucket(1), 1);
        assert_eq!(ulp_bucket(2), 2);
        assert_eq!(ulp_bucket(3), 2);
        assert_eq!(ulp_bucket(4), 3);
        assert_eq!(ulp_bucket(7), 3);
        assert_eq!(ulp_bucket(8), 4);
        assert_eq!(ulp_bucket(u64::MAX), 64);
        assert_eq!(ulp_label(0), "0");
        assert_eq!(ulp_label(1), "1");
        assert_eq!(ulp_label(2), "2-3");
        assert_eq!(ulp_label(3), "4-7");
        assert_eq!(ulp_label(64), "9223372036854775808-18446744073709551615");
    }

    #[test]
    fn relative_error_buckets_are_binades() {
        assert_eq!(rel_bucket(0.0), 0);
        assert_eq!(rel_label(rel_bucket(0.0)), "0");
        assert_eq!(rel_label(rel_bucket(1e-12)), "<2^-30");
        assert_eq!(rel_label(rel_bucket(0.75)), "2^-1..2^0");
        assert_eq!(rel_label(rel_bucket(1.0)), "2^0..2^1");
        assert_eq!(rel_label(rel_bucket(0.0078125)), "2^-7..2^-6");
        assert_eq!(rel_label(rel_bucket(0.0078124)), "2^-8..2^-7");
        assert_eq!(rel_label(rel_bucket(1024.0)), ">=2^10");
        assert_eq!(rel_label(rel_bucket(1023.0)), "2^9..2^10");
        assert_eq!(rel_label(rel_bucket(f64::MAX)), ">=2^10");
    }

    #[test]
    fn labelled_keeps_the_non_empty_span() {
        let mut c = [0u64; ULP_BUCKETS];
        c[1] = 5;
        c[3] = 2;
        assert_eq!(
            labelled(&c, ulp_label),
            vec![
                ("1".to_string(), 5),
                ("2-3".to_string(), 0),
                ("4-7".to_string(), 2)
            ]
        );
        assert!(labelled(&[0u64; 4], ulp_label).is_empty());
    }
}
