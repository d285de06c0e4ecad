//! The run-time KV tile of Ascend's prompt flash attention kernel on A2/A3, as its host
//! tiling chooses it (hicann/ops-transformer
//! `attention/prompt_flash_attention/op_host/prompt_flash_attention_tiling.cpp`,
//! `AdjustCVTilingCVDiff`; docs/ascend.md, rows `fa.ascend_pfa_*.kv_tile`).
//!
//! The kernel's CV-diff template (every A2/A3 case with a head dim the tiling does not split)
//! visits the KV axis in blocks of `sInnerFactor` keys, one online-softmax step per block. The
//! tiling starts from 1024 keys, or 512 when the key sequence (the key tensor's S) is at most
//! 1024; bf16 inputs and f16 in high-precision mode (inner_precise 0) take 512 whatever the
//! length; a short query (at most 16 rows) over more than 2048 keys without a mask takes 2048.
//! The search that follows (`FindOptimalTilingBasicBLock`) lowers the block in steps of 64 keys
//! only when the UB cannot hold it, which conform does not emulate (assumed not to happen for
//! the suites' shapes).

/// What the tile depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfaShape {
    /// The query's S (`seqSize`).
    pub q_seq: usize,
    /// The key tensor's S (`seqInnerSize`).
    pub kv_seq: usize,
    /// Whether a mask is passed (any sparse mode but 0, or an explicit mask).
    pub masked: bool,
    /// f16 in high-performance mode (inner_precise 1); bf16 and f16 high precision otherwise.
    pub high_performance: bool,
}

/// Default starting block (`CVDIFF_SINNER_FACTOR_DEFAULT`).
const DEFAULT: usize = 1024;
/// The block for short key sequences and for bf16 / f16 high precision.
const SMALL: usize = 512;
/// Key sequences up to this length start from [`SMALL`] (`CVDIFF_SMALL_KV_THRESHOLDS`).
const SMALL_KV: usize = 1024;
/// Queries up to this length (`CVDIFF_SMALL_QS_THRESHOLDS`) ...
const SMALL_QS: usize = 16;
/// ... over more keys than this without a mask take this block (`CVDIFF_SINNER_FACTOR_SMALL_QS`).
const LONG: usize = 2048;

/// The KV block of `s`, with the tiling's branch in words.
pub fn pfa_kv_tile(s: &PfaShape) -> (usize, String) {
    if s.q_seq <= SMALL_QS && s.kv_seq > LONG && !s.masked {
        return (
            LONG,
            format!(
                "{} query rows (at most {SMALL_QS}) over {} keys (more than {LONG}) without a mask: {LONG}-key blocks",
                s.q_seq, s.kv_seq
            ),
        );
    }
    if !s.high_performance {
        return (
            SMALL,
            "bf16 or f16 high precision: 512-key blocks".to_string(),
        );
    }
    if s.kv_seq <= SMALL_KV {
        (
            SMALL,
            format!(
                "f16 high performance over {} keys (at most {SMALL_KV}): 512-key blocks",
                s.kv_seq
            ),
        )
    } else {
        (
            DEFAULT,
            format!(
                "f16 high performance over {} keys (more than {SMALL_KV}): 1024-key blocks",
                s.kv_seq
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(q: usize, kv: usize, masked: bool, hp: bool) -> usize {
        pfa_kv_tile(&PfaShape {
            q_seq: q,
            kv_seq: kv,
            masked,
            high_performance: hp,
        })
        .0
    }

    #[test]
    fn the_branches_of_adjust_cv_tiling_cv_diff() {
        // bf16 / f16 high precision: 512, whatever the length.
        assert_eq!(tile(1024, 1024, true, false), 512);
        assert_eq!(tile(24, 8192, true, false), 512);
        // f16 high performance: 512 up to 1024 keys, 1024 above.
        assert_eq!(tile(1024, 1024, true, true), 512);
        assert_eq!(tile(2048, 2048, true, true), 1024);
        // A short unmasked query over a long context: 2048, in both modes.
        assert_eq!(tile(16, 2049, false, false), 2048);
        assert_eq!(tile(16, 2049, false, true), 2048);
        assert_eq!(tile(17, 4096, false, false), 512);
        assert_eq!(tile(16, 4096, true, false), 512);
        assert_eq!(tile(16, 2048, false, true), 1024);
        // Never the 128 keys conform assumed before.
        for q in [1, 8, 16, 128, 2048] {
            for kv in [1, 128, 200, 1024, 1025, 4096] {
                for m in [false, true] {
                    for hp in [false, true] {
                        assert!(tile(q, kv, m, hp) >= 512);
                    }
                }
            }
        }
    }
}
