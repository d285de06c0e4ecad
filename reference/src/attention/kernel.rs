//! The two tile products of attention, with fixed reduction orders, written so the compiler
//! vectorises them; on x86_64 explicit AVX-512 ([`super::tile_avx512`]) or AVX2 forms are
//! chosen at run time.
//!
//! The bits never depend on that choice: the code has no FMA contraction (Rust never
//! contracts) and the order of every f32 addition is fixed by the source, whatever the vector
//! width:
//! - [`qk_tile`] with [`ReductionOrder::Lanes16`]: element d of a dot product is multiplied and
//!   added into lane d % 16 in increasing d, and the lanes are combined by
//!   [`crate::dot::combine_lanes`], exactly [`crate::dot::dot_f32`]; with
//!   [`ReductionOrder::Sequential`], `((q0 k0 + q1 k1) + q2 k2) + ...`.
//! - [`pv_tile`]: `acc[d] = 0; for j in keys (increasing): acc[d] += p[j] * v[j][d]` per output
//!   element (lanes are output elements, so vectorising over d reorders nothing).

use super::recipe::ReductionOrder;
use super::rows::Rows;
use crate::dot::{combine_lanes, LANES};
use std::ops::Range;

/// Scores `out[r * ld + (j - keys.start)] = q[r] . k[j]` for `j in keys`.
pub fn qk_tile(
    order: ReductionOrder,
    q: &[&[f32]],
    k: &Rows,
    keys: Range<usize>,
    out: &mut [f32],
    ld: usize,
) {
    match order {
        ReductionOrder::Sequential => {
            for (r, qr) in q.iter().enumerate() {
                for j in keys.clone() {
                    out[r * ld + j - keys.start] = crate::dot::dot_f32_sequential(qr, k.row(j));
                }
            }
        }
        ReductionOrder::Lanes16 => {
            #[cfg(target_arch = "x86_64")]
            {
                if k.dim().is_multiple_of(LANES) && use_avx512() {
                    // SAFETY: the function's only requirement is AVX-512F, which
                    // `use_avx512` (`crate::cpu::avx512`) detected at run time just above.
                    return unsafe { super::tile_avx512::qk_lanes16(q, k, keys, out, ld) };
                }
                if crate::cpu::avx2() {
                    // SAFETY: the function's only requirement is AVX2, which `cpu::avx2`
                    // detected at run time just above.
                    return unsafe { qk_lanes16_avx2(q, k, keys, out, ld) };
                }
            }
            qk_lanes16(q, k, keys, out, ld)
        }
    }
}

/// `out[r * dim + d] = sum_{j in keys} p[r * ld + (j - keys.start)] * v[j][d]`, in increasing j.
pub fn pv_tile(p: &[f32], ld: usize, rows: usize, v: &Rows, keys: Range<usize>, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if v.dim().is_multiple_of(16) && use_avx512() {
            // SAFETY: the function's only requirement is AVX-512F, which `use_avx512`
            // (`crate::cpu::avx512`) detected at run time just above.
            return unsafe { super::tile_avx512::pv(p, ld, rows, v, keys, out) };
        }
        if crate::cpu::avx2() {
            // SAFETY: the function's only requirement is AVX2, which `cpu::avx2` detected at
            // run time just above.
            return unsafe { pv_avx2(p, ld, rows, v, keys, out) };
        }
    }
    pv_generic(p, ld, rows, v, keys, out)
}

/// [`pv_tile`] with the keys summed in 16 lanes ([`super::recipe::PvOrder::Lanes16`]): key j
/// of the tile goes into lane (j - keys.start) % 16 of each output element, the lanes are
/// combined by [`crate::dot::combine_lanes`]. Scalar: a recipe that asks for this order is
/// never on a fast path.
pub fn pv_tile_lanes(
    p: &[f32],
    ld: usize,
    rows: usize,
    v: &Rows,
    keys: Range<usize>,
    out: &mut [f32],
) {
    let dim = v.dim();
    let s0 = keys.start;
    for r in 0..rows {
        for d in 0..dim {
            let mut acc = [0.0f32; crate::dot::LANES];
            for j in keys.clone() {
                acc[(j - s0) % crate::dot::LANES] += p[r * ld + j - s0] * v.row(j)[d];
            }
            out[r * dim + d] = crate::dot::combine_lanes(acc);
        }
    }
}

/// Whether the AVX-512 tile products run (`crate::cpu::avx512`: the CPU has AVX-512F and
/// neither `CONFORM_NO_AVX512` nor `CONFORM_NO_SIMD` is set; the bits are the same either way).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn use_avx512() -> bool {
    crate::cpu::avx512()
}

/// [`qk_lanes16`] through the AVX2 forms of [`avx2`] (same bits).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn qk_lanes16_avx2(q: &[&[f32]], k: &Rows, keys: Range<usize>, out: &mut [f32], ld: usize) {
    let dim = k.dim();
    if !dim.is_multiple_of(LANES) {
        return qk_lanes16(q, k, keys, out, ld);
    }
    let s0 = keys.start;
    // Blocks of 32 keys stay in L1 while every query row pair passes over them.
    let mut kb = keys.start;
    while kb < keys.end {
        let ke = (kb + 32).min(keys.end);
        let mut r0 = 0;
        while r0 + 2 <= q.len() {
            let qs = [q[r0], q[r0 + 1]];
            let mut j = kb;
            while j + 2 <= ke {
                let res = avx2::dots_2x2(qs, [k.row(j), k.row(j + 1)], dim);
                for (r, row) in res.iter().enumerate() {
                    out[(r0 + r) * ld + j - s0] = row[0];
                    out[(r0 + r) * ld + j + 1 - s0] = row[1];
                }
                j += 2;
            }
            if j < ke {
                for (r, qr) in qs.iter().enumerate() {
                    out[(r0 + r) * ld + j - s0] = avx2::dot(qr, k.row(j), dim);
                }
            }
            r0 += 2;
        }
        for (r, qr) in q.iter().enumerate().skip(r0) {
            for j in kb..ke {
                out[r * ld + j - s0] = avx2::dot(qr, k.row(j), dim);
            }
        }
        kb = ke;
    }
}

/// [`pv_generic`] through [`avx2::pv_2x32`] (same bits).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn pv_avx2(p: &[f32], ld: usize, rows: usize, v: &Rows, keys: Range<usize>, out: &mut [f32]) {
    let dim = v.dim();
    if !dim.is_multiple_of(32) {
        return pv_generic(p, ld, rows, v, keys, out);
    }
    let s0 = keys.start;
    // One 32-column slice of the V tile stays in L1 while every row pair passes over it.
    for c in (0..dim).step_by(32) {
        let mut r = 0;
        while r < rows {
            let two = r + 1 < rows;
            let r1 = if two { r + 1 } else { r };
            let (a, b) = avx2::pv_2x32(p, ld, r, r1, v, keys.clone(), s0, c);
            out[r * dim + c..r * dim + c + 32].copy_from_slice(&a);
            if two {
                out[r1 * dim + c..r1 * dim + c + 32].copy_from_slice(&b);
            }
            r += if two { 2 } else { 1 };
        }
    }
}

/// AVX2 forms of the same arithmetic: a 16-lane accumulator is two ymm registers (lanes 0-7,
/// 8-15), lane l of a dot accumulator is lane `d % 16` of [`crate::dot::dot_f32`]; separate
/// multiply and add (no FMA), so the bits equal the portable code's. Safe `#[target_feature]`
/// functions: `unsafe` remains only on the raw loads and stores, in bounds by the asserts.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::rows::Rows;
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// [`crate::dot::combine_lanes`] of the 16 lanes `lo` (0-7) and `hi` (8-15) with the same
    /// pairings: `l[i] + l[i + 8]`, then `+ 4`, `+ 2`, `+ 1` (IEEE addition is commutative, so
    /// operand order within a pair does not matter).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn combine(lo: __m256, hi: __m256) -> f32 {
        let t = _mm256_add_ps(lo, hi);
        let u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps::<1>(t));
        let w = _mm_add_ps(u, _mm_movehl_ps(u, u));
        _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps::<1>(w, w)))
    }

    /// One dot product (`dim` a multiple of 16, both rows at least `dim` long: checked).
    #[target_feature(enable = "avx2")]
    pub fn dot(q: &[f32], k: &[f32], dim: usize) -> f32 {
        assert!(q.len() >= dim && k.len() >= dim && dim.is_multiple_of(16));
        let mut lo = _mm256_setzero_ps();
        let mut hi = _mm256_setzero_ps();
        for d in (0..dim).step_by(16) {
            // SAFETY: d + 16 <= dim (d < dim, both multiples of 16) and dim <= q.len(),
            // k.len() (asserted above): the four 8-float loads at d and d + 8 are inside.
            let (q0, k0, q1, k1) = unsafe {
                let (qp, kp) = (q.as_ptr().add(d), k.as_ptr().add(d));
                (
                    _mm256_loadu_ps(qp),
                    _mm256_loadu_ps(kp),
                    _mm256_loadu_ps(qp.add(8)),
                    _mm256_loadu_ps(kp.add(8)),
                )
            };
            lo = _mm256_add_ps(lo, _mm256_mul_ps(q0, k0));
            hi = _mm256_add_ps(hi, _mm256_mul_ps(q1, k1));
        }
        combine(lo, hi)
    }

    /// Dot products of 2 query rows with 2 keys (`dim` a multiple of 16, every row at least
    /// `dim` long: checked).
    #[target_feature(enable = "avx2")]
    pub fn dots_2x2(q: [&[f32]; 2], k: [&[f32]; 2], dim: usize) -> [[f32; 2]; 2] {
        assert!(dim.is_multiple_of(16) && q.iter().chain(k.iter()).all(|x| x.len() >= dim));
        let z = _mm256_setzero_ps();
        let mut acc = [[[z; 2]; 2]; 2];
        for d in (0..dim).step_by(16) {
            // SAFETY: d + 16 <= dim (d < dim, both multiples of 16) and both key rows are at
            // least dim long (asserted above): the loads at d and d + 8 are inside.
            let kv = unsafe {
                [
                    [
                        _mm256_loadu_ps(k[0].as_ptr().add(d)),
                        _mm256_loadu_ps(k[0].as_ptr().add(d + 8)),
                    ],
                    [
                        _mm256_loadu_ps(k[1].as_ptr().add(d)),
                        _mm256_loadu_ps(k[1].as_ptr().add(d + 8)),
                    ],
                ]
            };
            for r in 0..2 {
                // SAFETY: as for the keys: d + 16 <= dim <= q[r].len() (asserted above).
                let x = unsafe {
                    [
                        _mm256_loadu_ps(q[r].as_ptr().add(d)),
                        _mm256_loadu_ps(q[r].as_ptr().add(d + 8)),
                    ]
                };
                for c in 0..2 {
                    for h in 0..2 {
                        acc[r][c][h] = _mm256_add_ps(acc[r][c][h], _mm256_mul_ps(x[h], kv[c][h]));
                    }
                }
            }
        }
        let mut res = [[0.0f32; 2]; 2];
        for r in 0..2 {
            for c in 0..2 {
                res[r][c] = combine(acc[r][c][0], acc[r][c][1]);
            }
        }
        res
    }

    /// Columns `c..c + 32` of P V for rows `ra` and `rb`, keys in increasing order (every
    /// access checked by the asserts).
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub fn pv_2x32(
        p: &[f32],
        ld: usize,
        ra: usize,
        rb: usize,
        v: &Rows,
        keys: Range<usize>,
        s0: usize,
        c: usize,
    ) -> ([f32; 32], [f32; 32]) {
        let z = _mm256_setzero_ps();
        let mut a = [z; 4];
        let mut b = [z; 4];
        if keys.is_empty() {
            return ([0.0; 32], [0.0; 32]);
        }
        // Bounds, once: rows `keys` of `v` lie inside its slice (a `Rows` invariant) and hold
        // columns c..c + 32; P rows ra, rb hold the keys' columns.
        let (data, base, stride) = v.raw();
        assert!(keys.end <= v.len() && c + 32 <= v.dim() && keys.start >= s0);
        assert!(base + (keys.end - 1) * stride + v.dim() <= data.len());
        assert!(ra.max(rb) * ld + (keys.end - s0) <= p.len());
        // SAFETY: ra * ld, rb * ld <= ra.max(rb) * ld < p.len() (third assert, keys
        // non-empty).
        let (pa_ptr, pb_ptr) = unsafe { (p.as_ptr().add(ra * ld), p.as_ptr().add(rb * ld)) };
        for j in keys {
            // SAFETY: s0 <= j < keys.end, so j - s0 < keys.end - s0 and row ra (rb) of P holds
            // index j - s0: ra.max(rb) * ld + (keys.end - s0) <= p.len() (third assert).
            let (pa, pb) = unsafe { (*pa_ptr.add(j - s0), *pb_ptr.add(j - s0)) };
            let (pa, pb) = (_mm256_set1_ps(pa), _mm256_set1_ps(pb));
            for t in 0..4 {
                let at = base + j * stride + c + 8 * t;
                // SAFETY: j < keys.end and c + 32 <= v.dim(): columns c..c + 32 of value row j
                // end at most at base + (keys.end - 1) * stride + v.dim() <= data.len()
                // (second assert), so the 8 floats at c + 8 * t (t < 4) are inside.
                let x = unsafe { _mm256_loadu_ps(data.as_ptr().add(at)) };
                a[t] = _mm256_add_ps(a[t], _mm256_mul_ps(pa, x));
                b[t] = _mm256_add_ps(b[t], _mm256_mul_ps(pb, x));
            }
        }
        let mut oa = [0.0f32; 32];
        let mut ob = [0.0f32; 32];
        for t in 0..4 {
            // SAFETY: 8 * t + 8 <= 32 (t < 4): each store is inside `oa` / `ob`.
            unsafe {
                _mm256_storeu_ps(oa.as_mut_ptr().add(8 * t), a[t]);
                _mm256_storeu_ps(ob.as_mut_ptr().add(8 * t), b[t]);
            }
        }
        (oa, ob)
    }
}

/// Dot products of `R` query rows with `C` keys at once (register blocking); each is the
/// 16-lane order of [`crate::dot::dot_f32`].
#[inline(always)]
fn dots<const R: usize, const C: usize>(q: [&[f32]; R], k: [&[f32]; C]) -> [[f32; C]; R] {
    let n = q[0].len();
    let mut acc = [[[0.0f32; LANES]; C]; R];
    let full = n / LANES * LANES;
    let mut d0 = 0;
    while d0 < full {
        let ks: [&[f32]; C] = std::array::from_fn(|c| &k[c][d0..d0 + LANES]);
        for r in 0..R {
            let qs = &q[r][d0..d0 + LANES];
            for c in 0..C {
                for l in 0..LANES {
                    acc[r][c][l] += qs[l] * ks[c][l];
                }
            }
        }
        d0 += LANES;
    }
    for d in full..n {
        for r in 0..R {
            for c in 0..C {
                acc[r][c][d - full] += q[r][d] * k[c][d];
            }
        }
    }
    let mut res = [[0.0f32; C]; R];
    for r in 0..R {
        for c in 0..C {
            res[r][c] = combine_lanes(acc[r][c]);
        }
    }
    res
}

#[inline(always)]
fn qk_lanes16(q: &[&[f32]], k: &Rows, keys: Range<usize>, out: &mut [f32], ld: usize) {
    const R: usize = 4;
    const C: usize = 2;
    let s0 = keys.start;
    let mut r0 = 0;
    while r0 < q.len() {
        let nr = (q.len() - r0).min(R);
        let mut j = keys.start;
        while j < keys.end {
            let nc = (keys.end - j).min(C);
            if nr == R && nc == C {
                let res = dots::<R, C>(
                    std::array::from_fn(|r| q[r0 + r]),
                    std::array::from_fn(|c| k.row(j + c)),
                );
                for (r, row) in res.iter().enumerate() {
                    for (c, &x) in row.iter().enumerate() {
                        out[(r0 + r) * ld + j + c - s0] = x;
                    }
                }
            } else {
                for r in 0..nr {
                    for c in 0..nc {
                        let [[x]] = dots::<1, 1>([q[r0 + r]], [k.row(j + c)]);
                        out[(r0 + r) * ld + j + c - s0] = x;
                    }
                }
            }
            j += nc;
        }
        r0 += nr;
    }
}

#[inline(always)]
fn pv_generic(p: &[f32], ld: usize, rows: usize, v: &Rows, keys: Range<usize>, out: &mut [f32]) {
    let dim = v.dim();
    let s0 = keys.start;
    let out = &mut out[..rows * dim];
    out.fill(0.0);
    // Two rows at a time share the loads of each value row.
    let mut r = 0;
    while r + 2 <= rows {
        let (a, b) = out[r * dim..(r + 2) * dim].split_at_mut(dim);
        for j in keys.clone() {
            let vj = v.row(j);
            let pa = p[r * ld + j - s0];
            let pb = p[(r + 1) * ld + j - s0];
            for d in 0..dim {
                a[d] += pa * vj[d];
                b[d] += pb * vj[d];
            }
        }
        r += 2;
    }
    if r < rows {
        let a = &mut out[r * dim..(r + 1) * dim];
        for j in keys.clone() {
            let vj = v.row(j);
            let pa = p[r * ld + j - s0];
            for d in 0..dim {
                a[d] += pa * vj[d];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qk_tile_equals_dot_f32_for_every_row_and_key() {
        for dim in [37, 64, 128, 160] {
            check_dim(dim);
        }
    }

    /// Values over many binades, so any change of the addition order changes some bits.
    fn wild(n: usize, seed: u64) -> Vec<f32> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let m = (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                m * f32::from_bits((((x >> 8) % 24) as u32 + 115) << 23)
            })
            .collect()
    }

    /// Every explicit form (AVX-512, AVX2, portable) of both tile products gives the same bits
    /// as the definitions (`dot_f32`; sequential sums over keys), for row and key counts that
    /// are not multiples of the register blocks.
    #[test]
    fn every_vector_form_of_the_tile_products_equals_the_definition() {
        for dim in [16, 48, 128] {
            for (rows, nkeys) in [(1, 1), (3, 5), (4, 4), (5, 33), (9, 37), (16, 64)] {
                let q = wild(rows * dim, 7 + dim as u64);
                let kd = wild((nkeys + 2) * dim, 11 + rows as u64);
                let qr: Vec<&[f32]> = q.chunks(dim).collect();
                let k = Rows::dense(&kd, dim);
                let keys = 2..nkeys + 2;
                let ld = nkeys + 3;
                let want_s: Vec<u32> = (0..rows * ld)
                    .map(|i| {
                        let (r, c) = (i / ld, i % ld);
                        if c < nkeys {
                            crate::dot::dot_f32(qr[r], k.row(c + 2)).to_bits()
                        } else {
                            0
                        }
                    })
                    .collect();
                let p = wild(rows * ld, 13 + nkeys as u64);
                let want_o: Vec<u32> = (0..rows * dim)
                    .map(|i| {
                        let (r, d) = (i / dim, i % dim);
                        let mut s = 0.0f32;
                        for j in keys.clone() {
                            s += p[r * ld + j - 2] * k.row(j)[d];
                        }
                        s.to_bits()
                    })
                    .collect();
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                let mut forms: Vec<(&str, Vec<f32>, Vec<f32>)> = Vec::new();
                let mut s = vec![0.0; rows * ld];
                let mut o = vec![f32::NAN; rows * dim];
                qk_lanes16(&qr, &k, keys.clone(), &mut s, ld);
                pv_generic(&p, ld, rows, &k, keys.clone(), &mut o);
                forms.push(("portable", s.clone(), o.clone()));
                #[cfg(target_arch = "x86_64")]
                {
                    if std::is_x86_feature_detected!("avx2") {
                        s.fill(0.0);
                        o.fill(f32::NAN);
                        // SAFETY: AVX2 is available (checked just above).
                        unsafe {
                            qk_lanes16_avx2(&qr, &k, keys.clone(), &mut s, ld);
                            pv_avx2(&p, ld, rows, &k, keys.clone(), &mut o);
                        }
                        forms.push(("avx2", s.clone(), o.clone()));
                    }
                    if std::is_x86_feature_detected!("avx512f") {
                        s.fill(0.0);
                        o.fill(f32::NAN);
                        // SAFETY: AVX-512F is available (checked just above).
                        unsafe {
                            super::super::tile_avx512::qk_lanes16(
                                &qr,
                                &k,
                                keys.clone(),
                                &mut s,
                                ld,
                            );
                            super::super::tile_avx512::pv(&p, ld, rows, &k, keys.clone(), &mut o);
                        }
                        forms.push(("avx512", s.clone(), o.clone()));
                    }
                }
                for (name, s, o) in &forms {
                    assert_eq!(
                        bits(s),
                        want_s,
                        "{name} Q.K^T dim {dim} rows {rows} keys {nkeys}"
                    );
                    assert_eq!(
                        bits(o),
                        want_o,
                        "{name} P.V dim {dim} rows {rows} keys {nkeys}"
                    );
                }
            }
        }
    }

    fn check_dim(dim: usize) {
        let q: Vec<f32> = (0..5 * dim)
            .map(|i| ((i * 7919) % 101) as f32 * 0.013 - 0.6)
            .collect();
        let k: Vec<f32> = (0..9 * dim)
            .map(|i| ((i * 104729) % 97) as f32 * 0.021 - 1.0)
            .collect();
        let qr: Vec<&[f32]> = q.chunks(dim).collect();
        let kr = Rows::dense(&k, dim);
        let mut out = vec![0.0; 5 * 8];
        qk_tile(ReductionOrder::Lanes16, &qr, &kr, 1..9, &mut out, 8);
        for r in 0..5 {
            for j in 1..9 {
                let e = crate::dot::dot_f32(qr[r], kr.row(j));
                assert_eq!(out[r * 8 + j - 1].to_bits(), e.to_bits());
            }
        }
        let mut p = vec![0.0; 3 * 8];
        for (i, x) in p.iter_mut().enumerate() {
            *x = (i as f32) * 0.1 - 1.0;
        }
        let mut o = vec![0.0; 3 * dim];
        pv_tile(&p, 8, 3, &kr, 1..9, &mut o);
        for r in 0..3 {
            for d in 0..dim {
                let mut s = 0.0f32;
                for j in 1..9 {
                    s += p[r * 8 + j - 1] * kr.row(j)[d];
                }
                assert_eq!(o[r * dim + d].to_bits(), s.to_bits());
            }
        }
    }
}
