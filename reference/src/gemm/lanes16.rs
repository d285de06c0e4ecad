//! The fixed-order f32 matmul `C[i, j] = dot_f32(A[i, :], B[j, :])`, register- and
//! cache-blocked, with exactly the bits of [`crate::dot::dot_f32`] for every element.
//!
//! Why the blocking cannot change a bit: each output keeps its own 16 lane accumulators and
//! sees its products in the same order as `dot_f32` — element `k` multiplied (one f32 rounding)
//! and added (one f32 rounding) into lane `k % 16`, in increasing `k`, lanes combined by the
//! tree `+8, +4, +2, +1` ([`crate::dot::combine_lanes`]); no FMA. A micro-tile computes
//! `MR x NR` outputs at once only to reuse each loaded 16-wide row segment `NR` (or `MR`)
//! times; the outputs never share an accumulator. Tiles, cache blocks and parallel tasks only
//! decide *when* an output is computed, never *how*.
//!
//! The tail of K: both operands are packed with K rounded up to 16; the padding of A is `+0`
//! and that of B is `-0`, so each padded product is `+0 * -0 = -0`, and `x + (-0) = x` for
//! every f32 `x` (`+0` and `-0` included, NaN stays NaN): the padded lanes are left exactly as
//! `dot_f32` leaves them. (Padding both with `+0` would turn a `-0` lane into `+0`.)
//!
//! Forms: the micro-kernel is one generic function over plain `[f32; 16]` arrays, compiled
//! three times — for AVX-512F, for AVX2 (both chosen at run time through [`crate::cpu`]) and
//! for the target's baseline (the portable form every architecture runs: NEON on aarch64).
//! The arithmetic is element-wise `*` then `+` in all three, so the compiler's vectorisation
//! cannot change the results; the forms differ only in the tile shape that fits the registers.

use crate::dot::{combine_lanes, LANES};
use crate::parallel::{fill_chunks, map_tasks, Threads};

/// Operands as the micro-kernels read them: rows of `kp` floats (K rounded up to 16), padded
/// with `pad` (see the module docs). A matrix whose K is already a multiple of 16 is borrowed
/// as it is.
pub(crate) struct Packed<'a> {
    data: std::borrow::Cow<'a, [f32]>,
    rows: usize,
    kp: usize,
}

impl<'a> Packed<'a> {
    /// Packs `rows` rows of length `k` taken from `row(r)`.
    pub(crate) fn new<'r>(
        rows: usize,
        k: usize,
        pad: f32,
        row: impl Fn(usize) -> &'r [f32],
    ) -> Packed<'a> {
        let kp = k.div_ceil(LANES) * LANES;
        let mut data = vec![pad; rows * kp];
        for (r, dst) in data.chunks_exact_mut(kp.max(1)).enumerate().take(rows) {
            dst[..k].copy_from_slice(&row(r)[..k]);
        }
        Packed {
            data: data.into(),
            rows,
            kp,
        }
    }

    /// The transpose of a row-major `[k, n]` matrix, as `n` packed rows of K (always owned),
    /// built in blocks of 32 x 32 on `threads` threads.
    pub(crate) fn transposed(
        m: &[f32],
        k: usize,
        n: usize,
        pad: f32,
        threads: Threads,
    ) -> Packed<'static> {
        const T: usize = 32;
        let kp = k.div_ceil(LANES) * LANES;
        let mut data = vec![pad; n * kp];
        // Each task fills 256 packed rows (256 columns of the source: 1 KiB of each source row
        // per visit, so few TLB misses), in 32 x 32 tiles.
        const TASK: usize = 256;
        fill_chunks(&mut data, TASK * kp.max(1), threads, |task, rows| {
            let c0 = task * TASK;
            let w = rows.len() / kp.max(1);
            for k0 in (0..k).step_by(T) {
                for j0 in (0..w).step_by(T) {
                    let tw = T.min(w - j0);
                    for kk in k0..(k0 + T).min(k) {
                        let src = &m[kk * n + c0 + j0..][..tw];
                        for (dj, &v) in src.iter().enumerate() {
                            rows[(j0 + dj) * kp + kk] = v;
                        }
                    }
                }
            }
        });
        Packed {
            data: data.into(),
            rows: n,
            kp,
        }
    }

    /// A row-major `[rows, k]` matrix: borrowed when `k` is a multiple of 16, else packed.
    pub(crate) fn from_matrix(m: &'a [f32], rows: usize, k: usize, pad: f32) -> Packed<'a> {
        if k.is_multiple_of(LANES) {
            return Packed {
                data: m[..rows * k].into(),
                rows,
                kp: k,
            };
        }
        Packed::new(rows, k, pad, |r| &m[r * k..(r + 1) * k])
    }

    #[inline(always)]
    fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.kp..(r + 1) * self.kp]
    }
}

/// `C[i, j] = dot_f32(a[i, :], b[j, :])` for `a` `[m, k]` and `b` `[n, k]`, both row-major
/// (K contiguous), into a row-major `[m, n]` result. Bitwise equal to calling
/// [`crate::dot::dot_f32`] per element, for every thread count and vector form.
pub fn matmul_lanes16(
    a: &[f32],
    b: &[f32],
    m: usize,
    n: usize,
    k: usize,
    threads: Threads,
) -> Vec<f32> {
    assert!(
        a.len() >= m * k && b.len() >= n * k,
        "operand shorter than its shape"
    );
    let pa = Packed::from_matrix(a, m, k, 0.0);
    let pb = Packed::from_matrix(b, n, k, -0.0);
    matmul_packed(&pa, &pb, threads)
}

/// Rows of A per cache block. With the K passes below, only a pass's slice of the block
/// (`ROWS_PER_BLOCK x K_PER_PASS` floats, 256 KiB) has to stay in L2; the block's lane
/// accumulators (`ROWS_PER_BLOCK x COLS_PER_BLOCK x 16` floats) are the price of the passes.
const ROWS_PER_BLOCK: usize = 128;

/// Columns per cache block.
const COLS_PER_BLOCK: usize = 128;

/// The matmul of packed operands (`a`: M rows, `b`: N rows, the same `kp`).
pub(crate) fn matmul_packed(a: &Packed<'_>, b: &Packed<'_>, threads: Threads) -> Vec<f32> {
    let (m, n, kp) = (a.rows, b.rows, a.kp);
    debug_assert_eq!(kp, b.kp);
    let mut c = vec![0.0f32; m * n];
    if m == 0 || n == 0 {
        return c;
    }
    let mc = ROWS_PER_BLOCK;
    let (row_blocks, col_blocks) = (m.div_ceil(mc), n.div_ceil(COLS_PER_BLOCK));
    // Fixed tasks (one cache block each, in row-major block order); results are placed by
    // position, so the scheduling cannot matter.
    let blocks = map_tasks(row_blocks * col_blocks, threads, |t| {
        let (rb, cb) = (t / col_blocks, t % col_blocks);
        let rows = rb * mc..((rb + 1) * mc).min(m);
        let cols = cb * COLS_PER_BLOCK..((cb + 1) * COLS_PER_BLOCK).min(n);
        let mut out = vec![0.0f32; rows.len() * cols.len()];
        block(a, b, rows, cols, &mut out);
        out
    });
    for (t, out) in blocks.into_iter().enumerate() {
        let (rb, cb) = (t / col_blocks, t % col_blocks);
        let r0 = rb * mc;
        let c0 = cb * COLS_PER_BLOCK;
        let w = ((cb + 1) * COLS_PER_BLOCK).min(n) - c0;
        for (r, src) in out.chunks_exact(w).enumerate() {
            c[(r0 + r) * n + c0..(r0 + r) * n + c0 + w].copy_from_slice(src);
        }
    }
    c
}

/// One cache block through the widest form the CPU may use.
fn block(
    a: &Packed<'_>,
    b: &Packed<'_>,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    out: &mut [f32],
) {
    thread_local! {
        // One lane scratch per thread, reused by its blocks (no allocation per block).
        static LANES_SCRATCH: std::cell::RefCell<Vec<[f32; LANES]>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    let mut lanes = LANES_SCRATCH.take();
    block_in(a, b, rows, cols, out, &mut lanes);
    LANES_SCRATCH.set(lanes);
}

fn block_in(
    a: &Packed<'_>,
    b: &Packed<'_>,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    out: &mut [f32],
    lanes: &mut Vec<[f32; LANES]>,
) {
    let blk = Block { a, b, rows, cols };
    #[cfg(target_arch = "x86_64")]
    {
        if crate::cpu::avx512() {
            // SAFETY: the callee's only requirement is AVX-512F, which `crate::cpu::avx512`
            // detected at run time just above (the CONFORM_NO_AVX512 and CONFORM_NO_SIMD
            // switches only make it answer false).
            return unsafe { block_avx512(&blk, out, lanes) };
        }
        if crate::cpu::avx2() {
            // SAFETY: the callee's only requirement is AVX2, which `crate::cpu::avx2` detected
            // at run time just above (CONFORM_NO_SIMD only makes it answer false).
            return unsafe { block_avx2(&blk, out, lanes) };
        }
    }
    // 1 x 2 outputs: with 16 vector registers (SSE2) a wider tile spills.
    block_tiles::<1, 2>(&blk, out, lanes)
}

/// One cache block: rows of `a` by rows of `b`.
struct Block<'p, 'd> {
    a: &'p Packed<'d>,
    b: &'p Packed<'d>,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
}

/// Compiled with AVX-512F enabled; calling it needs the CPU check (see the dispatcher above).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn block_avx512(blk: &Block<'_, '_>, out: &mut [f32], lanes: &mut Vec<[f32; LANES]>) {
    // 4 x 4 outputs: 16 accumulators of one zmm each, 4 row segments, 1-2 column segments.
    block_tiles::<4, 4>(blk, out, lanes)
}

/// Compiled with AVX2 enabled; calling it needs the CPU check (see the dispatcher above).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn block_avx2(blk: &Block<'_, '_>, out: &mut [f32], lanes: &mut Vec<[f32; LANES]>) {
    // 2 x 2 outputs: 8 accumulators of 2 ymm each.
    block_tiles::<2, 2>(blk, out, lanes)
}

/// K per pass over a cache block: the `MR` row segments and `NR` column segments of one pass
/// (`KC` floats each) stay in L1 while the tiles sweep the block.
const K_PER_PASS: usize = 512;

/// Sweeps a cache block with `MR x NR` micro-tiles, in passes of [`K_PER_PASS`]. Each output's
/// 16 lane accumulators are kept in `lanes` between passes: resuming a lane's running sum from
/// its stored value is the same sum, so the passes change no bit. Column tiles are outer (B's
/// `NR` segments stay in L1 while A's block streams from L2); the edges take `1 x 1` tiles.
#[inline(always)]
fn block_tiles<const MR: usize, const NR: usize>(
    blk: &Block<'_, '_>,
    out: &mut [f32],
    lanes: &mut Vec<[f32; LANES]>,
) {
    let (h, w) = (blk.rows.len(), blk.cols.len());
    lanes.clear();
    lanes.resize(h * w, [0.0f32; LANES]);
    sweep_passes::<MR, NR>(blk.a, blk.b, &blk.rows, &blk.cols, lanes);
    for (o, l) in out.iter_mut().zip(lanes.iter()) {
        *o = combine_lanes(*l);
    }
}

/// The passes of [`block_tiles`] over one block's lane accumulators.
#[inline(always)]
fn sweep_passes<const MR: usize, const NR: usize>(
    a: &Packed<'_>,
    b: &Packed<'_>,
    rows: &std::ops::Range<usize>,
    cols: &std::ops::Range<usize>,
    lanes: &mut [[f32; LANES]],
) {
    let (h, w) = (rows.len(), cols.len());
    let mut k0 = 0;
    while k0 < a.kp {
        let k1 = (k0 + K_PER_PASS).min(a.kp);
        let mut j = 0;
        while j < w {
            let nr = NR.min(w - j);
            let mut i = 0;
            while i < h {
                let mr = MR.min(h - i);
                let ar = |r: usize| &a.row(rows.start + i + r)[k0..k1];
                let br = |c: usize| &b.row(cols.start + j + c)[k0..k1];
                if mr == MR && nr == NR {
                    let mut acc: [[[f32; LANES]; NR]; MR] = std::array::from_fn(|r| {
                        std::array::from_fn(|c| lanes[(i + r) * w + j + c])
                    });
                    tile::<MR, NR>(std::array::from_fn(ar), std::array::from_fn(br), &mut acc);
                    for (r, row) in acc.iter().enumerate() {
                        lanes[(i + r) * w + j..][..NR].copy_from_slice(row);
                    }
                } else {
                    for r in 0..mr {
                        for c in 0..nr {
                            let mut acc = [[lanes[(i + r) * w + j + c]]];
                            tile::<1, 1>([ar(r)], [br(c)], &mut acc);
                            lanes[(i + r) * w + j + c] = acc[0][0];
                        }
                    }
                }
                i += mr;
            }
            j += nr;
        }
        k0 = k1;
    }
}

/// Continues `MR x NR` outputs' lane accumulators over row segments whose length is a multiple
/// of 16: element `k` into lane `k % 16`, multiply then add.
#[inline(always)]
fn tile<const MR: usize, const NR: usize>(
    a: [&[f32]; MR],
    b: [&[f32]; NR],
    acc: &mut [[[f32; LANES]; NR]; MR],
) {
    let kp = a[0].len();
    let mut k = 0;
    while k < kp {
        let av: [&[f32; LANES]; MR] = std::array::from_fn(|r| {
            a[r][k..k + LANES]
                .try_into()
                .expect("segments are a multiple of 16 long")
        });
        for (c, brow) in b.iter().enumerate() {
            let bv: &[f32; LANES] = brow[k..k + LANES]
                .try_into()
                .expect("segments are a multiple of 16 long");
            for r in 0..MR {
                for l in 0..LANES {
                    acc[r][c][l] += av[r][l] * bv[l];
                }
            }
        }
        k += LANES;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::dot_f32;

    fn pattern(len: usize, seed: u32) -> Vec<f32> {
        // Magnitudes over many binades, both signs, some signed zeros: orders differ in f32.
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                match s % 29 {
                    0 => -0.0,
                    1 => 0.0,
                    _ => {
                        let mant = (s >> 8) as f32 / (1u32 << 24) as f32 + 0.5;
                        let exp = ((s >> 3) % 24) as i32 - 12;
                        let sign = if s & 1 == 0 { 1.0 } else { -1.0 };
                        // 2^exp built from its bits (exp is within the normal range).
                        sign * mant * f32::from_bits(((exp + 127) as u32) << 23)
                    }
                }
            })
            .collect()
    }

    fn check(m: usize, n: usize, k: usize, threads: usize) {
        let a = pattern(m * k, (m * 31 + k) as u32);
        let b = pattern(n * k, (n * 17 + k) as u32 + 7);
        let c = matmul_lanes16(&a, &b, m, n, k, Threads(threads));
        for i in 0..m {
            for j in 0..n {
                let want = dot_f32(&a[i * k..(i + 1) * k], &b[j * k..(j + 1) * k]);
                assert_eq!(
                    c[i * n + j].to_bits(),
                    want.to_bits(),
                    "m{m} n{n} k{k} at ({i}, {j})"
                );
            }
        }
    }

    #[test]
    fn equals_dot_f32_on_every_edge_shape() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (3, 5, 7),
            (4, 4, 16),
            (5, 9, 33),
            (17, 70, 15),
            (9, 3, 100),
            (130, 67, 48),
        ] {
            check(m, n, k, 1);
            check(m, n, k, 3);
        }
    }

    #[test]
    fn signed_zero_lanes_survive_the_padding() {
        // Every product -0: dot_f32 gives -0 (lanes untouched beyond k stay +0, and
        // -0 + +0 = +0 in the tree, so the result is whatever the tree gives — compare bits).
        for k in 1..40 {
            let a = vec![-0.0f32; k];
            let b = vec![1.0f32; k];
            let c = matmul_lanes16(&a, &b, 1, 1, k, Threads::ONE);
            assert_eq!(c[0].to_bits(), dot_f32(&a, &b).to_bits(), "k = {k}");
        }
    }

    #[test]
    fn empty_shapes() {
        assert!(matmul_lanes16(&[], &[1.0; 12], 0, 3, 4, Threads::ONE).is_empty());
        assert_eq!(
            matmul_lanes16(&[], &[], 2, 3, 0, Threads::ONE),
            vec![0.0; 6]
        );
    }
}
