//! The kernels against a straightforward per-element implementation of every figure, on
//! random data full of the awkward cases (NaN, Inf, poison, subnormals, zeros, values
//! whose difference overflows), and the kernel paths against each other bit for bit.

use super::chunks::{run_baseline_pass_on, run_pass_on, CHUNK};
use super::*;
use crate::verdict::heatmap::HeatGeometry;
use crate::verdict::lane::{Bf16Lane, F16Lane, F32Lane, F64Lane, I32Lane, I64Lane, I8Lane, U8Lane};
use conform_reference::ops::{ElemType, Tensor};
use conform_reference::parallel::Threads;

/// The same data everywhere.
use conform_reference::splitmix::SplitMix64 as Rng;

/// Everything about an element type the generator needs.
struct Kind {
    dtype: ElemType,
    bytes: usize,
    float: bool,
    value: fn(u64) -> f64,
    /// Codes worth having: NaNs (quiet, signalling, negative), infinities, extremes.
    specials: &'static [u64],
    poison: &'static [u64],
}

fn kind(dtype: ElemType) -> Kind {
    match dtype {
        ElemType::Bf16 => Kind {
            dtype,
            bytes: 2,
            float: true,
            value: Bf16Lane::value,
            specials: &[
                0x7FC0, 0xFFC1, 0x7F81, 0x7F80, 0xFF80, 0x7F7F, 0xFF7F, 0x0001,
            ],
            poison: &[0x7FA5, 0xFFA5],
        },
        ElemType::F16 => Kind {
            dtype,
            bytes: 2,
            float: true,
            value: F16Lane::value,
            specials: &[
                0x7E00, 0xFDA5, 0x7C01, 0x7C00, 0xFC00, 0x7BFF, 0xFBFF, 0x0001,
            ],
            poison: &[0x7DA5, 0xFDA6],
        },
        ElemType::F32 => Kind {
            dtype,
            bytes: 4,
            float: true,
            value: F32Lane::value,
            specials: &[
                0x7FC0_0000,
                0xFFC0_0001,
                0x7F80_0001,
                0x7F80_0000,
                0xFF80_0000,
                0x7F7F_FFFF,
                0xFF7F_FFFF,
                0x0000_0001,
            ],
            poison: &[0x7FA5_A5A5],
        },
        ElemType::F64 => Kind {
            dtype,
            bytes: 8,
            float: true,
            value: F64Lane::value,
            specials: &[
                0x7FF8_0000_0000_0000,
                0xFFF8_0000_0000_0001,
                0x7FF0_0000_0000_0001,
                0x7FF0_0000_0000_0000,
                0xFFF0_0000_0000_0000,
                0x7FEF_FFFF_FFFF_FFFF,
                0xFFEF_FFFF_FFFF_FFFF,
                0x0000_0000_0000_0001,
            ],
            poison: &[0x7FF4_A5A5_A5A5_A5A5, 0xFFF4_A5A5_A5A5_A5A5],
        },
        ElemType::U8 => Kind {
            dtype,
            bytes: 1,
            float: false,
            value: U8Lane::value,
            specials: &[0, 255],
            poison: &[0xA5],
        },
        ElemType::I8 => Kind {
            dtype,
            bytes: 1,
            float: false,
            value: I8Lane::value,
            specials: &[0, 0x7F, 0x80, 0xFF],
            poison: &[0xA5],
        },
        ElemType::I32 => Kind {
            dtype,
            bytes: 4,
            float: false,
            value: I32Lane::value,
            specials: &[0x8000_0000, 0x7FFF_FFFF, 0xFFFF_FFFF],
            poison: &[0xA5A5_A5A5],
        },
        ElemType::I64 => Kind {
            dtype,
            bytes: 8,
            float: false,
            value: I64Lane::value,
            specials: &[1 << 63, u64::MAX >> 1, u64::MAX, (1 << 53) + 1],
            poison: &[0xA5A5_A5A5_A5A5_A5A5],
        },
    }
}

fn mask(bytes: usize) -> u64 {
    if bytes == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * bytes)) - 1
    }
}

/// A random code of the type: any bit pattern for integers; for floats a random sign,
/// exponent and fraction, often with a zero exponent (subnormals) or zero fraction.
fn random_code(k: &Kind, rng: &mut Rng) -> u64 {
    let r = rng.next_u64() & mask(k.bytes);
    if !k.float {
        return match rng.below_u64(4) {
            0 => r % 7,
            1 => r % 300,
            _ => r,
        };
    }
    let frac_bits = match k.bytes {
        2 if k.dtype == ElemType::Bf16 => 7,
        2 => 10,
        4 => 23,
        _ => 52,
    };
    match rng.below_u64(8) {
        0 => r & (((1u64 << frac_bits) - 1) | (1 << (8 * k.bytes - 1))), // subnormal or zero
        1 => r & (1 << (8 * k.bytes - 1)),                               // +-0
        _ => r,
    }
}

/// actual, expected and golden (of the same type or F64) for `n` elements. Blocks of 64 are
/// either clean (finite everywhere, no poison) or dirty (specials sprinkled in).
fn data(k: &Kind, n: usize, golden_f64: bool, seed: u64) -> (Tensor, Tensor, Tensor) {
    let mut rng = Rng::new(seed);
    let (mut act, mut exp, mut gold) = (Vec::new(), Vec::new(), Vec::new());
    let finite = |c: u64| (k.value)(c).is_finite();
    let mut dirty = false;
    for j in 0..n {
        if j % 64 == 0 {
            dirty = rng.below_u64(3) == 0;
        }
        let mut e = random_code(k, &mut rng);
        while !finite(e) {
            e = random_code(k, &mut rng);
        }
        let mut a = match rng.below_u64(8) {
            0 | 1 => e,
            2 => e.wrapping_add(1) & mask(k.bytes),
            3 => e.wrapping_sub(rng.below_u64(4)) & mask(k.bytes),
            4 => e.wrapping_add(rng.below_u64(3000)) & mask(k.bytes),
            5 => e ^ (1 << (8 * k.bytes - 1)), // sign flipped
            _ => random_code(k, &mut rng),
        };
        if !finite(a) || k.poison.contains(&a) {
            a = e;
        }
        let ev = (k.value)(e);
        let mut g = if golden_f64 {
            let v = match rng.below_u64(5) {
                0 => ev,
                1 => (k.value)(a),
                2 => ev * (1.0 + (rng.below_u64(2001) as f64 - 1000.0) * 1e-6),
                3 => ev + (rng.below_u64(7) as f64 - 3.0) * 1e-300,
                _ => f64::from_bits(rng.next_u64() & 0x8FFF_FFFF_FFFF_FFFF),
            };
            v.to_bits()
        } else if rng.below_u64(3) == 0 {
            a
        } else {
            e
        };
        if dirty {
            let pick = |rng: &mut Rng| k.specials[rng.below_u64(k.specials.len() as u64) as usize];
            match rng.below_u64(24) {
                0 | 1 => a = k.poison[rng.below_u64(k.poison.len() as u64) as usize],
                2 => {
                    a = k.poison[0];
                    e = a; // poison expected too: not unwritten
                }
                3 | 4 => a = pick(&mut rng),
                5 | 6 => e = pick(&mut rng),
                7 => {
                    a = pick(&mut rng);
                    e = a;
                }
                8 | 9 => {
                    g = if golden_f64 {
                        [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::MAX][j % 4].to_bits()
                    } else {
                        pick(&mut rng)
                    }
                }
                10 => {
                    // The golden value's own special returned (an infinity matched against
                    // the golden side while `expected` stays finite).
                    a = pick(&mut rng);
                    g = if golden_f64 {
                        (k.value)(a).to_bits()
                    } else {
                        a
                    };
                }
                _ => {}
            }
        }
        act.extend_from_slice(&a.to_le_bytes()[..k.bytes]);
        exp.extend_from_slice(&e.to_le_bytes()[..k.bytes]);
        if golden_f64 {
            gold.extend_from_slice(&g.to_le_bytes());
        } else {
            gold.extend_from_slice(&g.to_le_bytes()[..k.bytes]);
        }
    }
    let t = |dtype, data| Tensor::new(dtype, vec![n], data).unwrap();
    let gdtype = if golden_f64 { ElemType::F64 } else { k.dtype };
    (t(k.dtype, act), t(k.dtype, exp), t(gdtype, gold))
}

/// The element rules, written independently of the kernel's.
#[allow(clippy::too_many_arguments)]
fn reference_rule_fails(
    rule: ElementRule,
    ab: u64,
    eb: u64,
    both_nan: bool,
    ulp: Option<u64>,
    comparable: bool,
    d: f64,
    ag: f64,
    rel: f64,
) -> bool {
    match rule {
        ElementRule::Bitwise { nan_bits } => ab != eb && (nan_bits || !both_nan),
        ElementRule::Ulp { max } => ulp.is_none_or(|u| u > max),
        ElementRule::Allclose { atol, rtol } => {
            !comparable || (d > atol && d / (ag + FLASHINFER_EPS) > rtol)
        }
        ElementRule::RelAbove { limit } => !comparable || rel > limit,
        ElementRule::Mixed { t } => !comparable || d > t + t * ag,
        ElementRule::CannDouble {
            rel_limit,
            small,
            small_err,
        } => !comparable || (ag < small && d > small_err) || (ag >= small && rel > rel_limit),
        ElementRule::AbsAbove { limit } => !comparable || d > limit,
    }
}

/// Every figure of a pass, written out the plain way: one element at a time over the
/// whole tensor, sums in element order, every candidate offered to the worst list, the heat
/// cell of each element by division.
fn reference_pass<A: Lane, G: Lane>(
    act: &[u8],
    exp: &[u8],
    gold: &[u8],
    cfg: &PassConfig<'_>,
) -> PassStats {
    let n = act.len() / A::BYTES;
    let mut st = PassStats::new(cfg.heat.map_or(0, HeatGeometry::cells));
    st.numel = n as u64;
    for j in 0..n {
        let ab = load::<A>(act, j);
        let eb = load::<A>(exp, j);
        let gb = load::<G>(gold, j);
        let (av, ev, gv) = (A::value(ab), A::value(eb), G::value(gb));
        let heat_cell = cfg.heat.map(|h| {
            let s = (j / h.row_stride) % h.row_len;
            let c = (j / h.col_stride) % h.col_len;
            (s / h.row_bucket) * h.cols + c / h.col_bucket
        });
        let poisoned = |b: u64| cfg.poison.contains(&b);
        let unwritten = match cfg.unwritten {
            Some(mask) => mask[j],
            None => poisoned(ab) && !poisoned(eb),
        };
        if unwritten {
            st.unwritten += 1;
            st.mismatches += 1;
            st.worst.offer(Candidate {
                flat: j,
                severity: Severity::Unwritten,
                abs_err: 0.0,
                actual: av,
                golden: gv,
                rel_err: 0.0,
                ulp: None,
            });
            continue;
        }
        // The judged side: `expected` for bits and ULPs, else the golden value, an infinity
        // where the output dtype cannot hold it.
        let jv = if matches!(
            cfg.rule,
            ElementRule::Bitwise { .. } | ElementRule::Ulp { .. }
        ) {
            ev
        } else if gv.abs() >= A::OVERFLOW {
            gv.signum() * f64::INFINITY
        } else {
            gv
        };
        let non_finite = !av.is_finite() && jv.is_finite();
        st.non_finite += non_finite as u64;
        let ulp = match (A::is_nan(ab), A::is_nan(eb)) {
            (true, true) => Some(0),
            (false, false) => Some(A::ord(ab).abs_diff(A::ord(eb))),
            _ => None,
        };
        match ulp {
            Some(u) => {
                st.max_ulp = st.max_ulp.max(u);
                st.ulp_hist[ulp_bucket(u)] += 1;
            }
            None => st.ulp_nan_mismatch += 1,
        }
        let comparable = av.is_finite() && gv.is_finite();
        let inf_match = jv.is_infinite() && av == jv;
        let ag = gv.abs();
        let (d, rel) = if comparable {
            let d = sat((av - gv).abs());
            (d, sat(d / (ag + CANN_EPS)))
        } else {
            (0.0, 0.0)
        };
        if comparable {
            st.comparable += 1;
            st.max_abs = st.max_abs.max(d);
            if ag != 0.0 {
                st.max_rel_plain = st.max_rel_plain.max(sat(d / ag));
            }
            st.sum_abs += d;
            st.sum_sq += d * d;
            st.sum_rel += rel;
            st.max_rel = st.max_rel.max(rel);
            st.rel_hist[rel_bucket(rel)] += 1;
            if let Some((small, small_err)) = cfg.small_value {
                if ag < small {
                    st.small += 1;
                    st.small_err += (d > small_err) as u64;
                } else {
                    st.normal += 1;
                    st.normal_sum_rel += rel;
                    st.normal_max_rel = st.normal_max_rel.max(rel);
                    st.normal_sum_sq += d * d;
                }
            }
        } else if !inf_match {
            st.non_comparable += 1;
        }
        if let Some(c) = heat_cell {
            st.heat[c] = st.heat[c].max(d);
        }
        let both_nan = A::is_nan(ab) && A::is_nan(eb);
        let rule_fails =
            reference_rule_fails(cfg.rule, ab, eb, both_nan, ulp, comparable, d, ag, rel);
        let fails = (rule_fails && !inf_match) || non_finite;
        st.mismatches += fails as u64;
        if comparable || fails {
            st.worst.offer(Candidate {
                flat: j,
                severity: if comparable {
                    Severity::Numeric
                } else {
                    Severity::NonComparable
                },
                abs_err: d,
                actual: av,
                golden: gv,
                rel_err: rel,
                ulp,
            });
        }
    }
    if !cfg.worst {
        st.worst = WorstList::new();
    }
    st
}

/// Every figure except the sums, floats as bits (NaN-safe, -0 distinct from +0).
fn exact_figures(st: &PassStats) -> String {
    let worst: Vec<String> = st
        .worst
        .clone()
        .into_vec()
        .iter()
        .map(|c| {
            format!(
                "{}:{:?}:{:x}:{:x}:{:x}:{:x}:{:?}",
                c.flat,
                c.severity,
                c.abs_err.to_bits(),
                c.actual.to_bits(),
                c.golden.to_bits(),
                c.rel_err.to_bits(),
                c.ulp
            )
        })
        .collect();
    let heat: Vec<u64> = st.heat.iter().map(|v| v.to_bits()).collect();
    format!(
        "numel {} comparable {} unwritten {} non_finite {} non_comparable {} mismatches {} \
         max_abs {:x} max_rel_plain {:x} max_rel {:x} max_ulp {} ulp_nan {} ulp_hist {:?} \
         rel_hist {:?} small {} small_err {} normal {} normal_max_rel {:x} worst {:?} heat {:?}",
        st.numel,
        st.comparable,
        st.unwritten,
        st.non_finite,
        st.non_comparable,
        st.mismatches,
        st.max_abs.to_bits(),
        st.max_rel_plain.to_bits(),
        st.max_rel.to_bits(),
        st.max_ulp,
        st.ulp_nan_mismatch,
        st.ulp_hist,
        st.rel_hist,
        st.small,
        st.small_err,
        st.normal,
        st.normal_max_rel.to_bits(),
        worst,
        heat
    )
}

fn sums(st: &PassStats) -> [f64; 5] {
    [
        st.sum_abs,
        st.sum_sq,
        st.sum_rel,
        st.normal_sum_rel,
        st.normal_sum_sq,
    ]
}

/// Every figure, sums included, floats as bits.
fn all_figures(st: &PassStats) -> String {
    let s: Vec<u64> = sums(st).iter().map(|v| v.to_bits()).collect();
    format!("{} sums {s:x?}", exact_figures(st))
}

/// Sums that differ only in the order of additions of non-negative terms.
fn sums_agree(got: &PassStats, want: &PassStats) -> bool {
    // Equal, or both finite and within 1e-12 * |want| (relative_eq! with no relative part:
    // unequal infinities and NaNs never agree).
    sums(got)
        .iter()
        .zip(sums(want))
        .all(|(&g, w)| approx::relative_eq!(g, w, epsilon = 1e-12 * w.abs(), max_relative = 0.0))
}

fn rules() -> Vec<ElementRule> {
    vec![
        ElementRule::Bitwise { nan_bits: false },
        ElementRule::Bitwise { nan_bits: true },
        ElementRule::Ulp { max: 0 },
        ElementRule::Ulp { max: 3 },
        ElementRule::Allclose {
            atol: 1e-3,
            rtol: 1e-2,
        },
        ElementRule::RelAbove { limit: 0.01 },
        ElementRule::Mixed { t: 1.0 / 128.0 },
        ElementRule::CannDouble {
            rel_limit: 0.01,
            small: 1.0 / 64.0,
            small_err: 1.0 / 4096.0,
        },
        ElementRule::AbsAbove { limit: 0.5 },
    ]
}

fn reference_for(a: &Tensor, e: &Tensor, g: &Tensor, cfg: &PassConfig<'_>) -> PassStats {
    let f64g = g.dtype == ElemType::F64;
    macro_rules! run {
        ($l:ty) => {
            if f64g {
                reference_pass::<$l, F64Lane>(&a.data, &e.data, &g.data, cfg)
            } else {
                reference_pass::<$l, $l>(&a.data, &e.data, &g.data, cfg)
            }
        };
    }
    match a.dtype {
        ElemType::Bf16 => run!(Bf16Lane),
        ElemType::F16 => run!(F16Lane),
        ElemType::F32 => run!(F32Lane),
        ElemType::F64 => run!(F64Lane),
        ElemType::U8 => run!(U8Lane),
        ElemType::I8 => run!(I8Lane),
        ElemType::I32 => run!(I32Lane),
        ElemType::I64 => run!(I64Lane),
    }
}

/// How many whole blocks the vectorised path takes (clean) and leaves (dirty).
fn block_kinds(k: &Kind, a: &Tensor, e: &Tensor, g: &Tensor, poison: &[u64]) -> (usize, usize) {
    let code = |t: &Tensor, bytes: usize, j: usize| {
        let mut b = [0u8; 8];
        b[..bytes].copy_from_slice(&t.data[j * bytes..(j + 1) * bytes]);
        u64::from_le_bytes(b)
    };
    let gvalue = |j: usize| {
        if g.dtype == ElemType::F64 {
            f64::from_bits(code(g, 8, j))
        } else {
            (k.value)(code(g, k.bytes, j))
        }
    };
    let whole = a.numel() / BLOCK;
    let clean = (0..whole)
        .filter(|b| {
            (b * BLOCK..(b + 1) * BLOCK).all(|j| {
                let (ac, ec) = (code(a, k.bytes, j), code(e, k.bytes, j));
                (k.value)(ac).is_finite()
                    && (k.value)(ec).is_finite()
                    && gvalue(j).is_finite()
                    && !poison.contains(&ac)
            })
        })
        .count();
    (clean, whole - clean)
}

const PATHS: [KernelPath; 3] = [
    KernelPath::Auto,
    KernelPath::Portable,
    KernelPath::PerElement,
];

/// An unwritten mask as the runner's two-fill test makes one, with both kinds of disagreement
/// with the first pattern: of the elements of `a` holding `pattern`, the even ones are
/// unwritten and the odd ones written (their value happens to be the pattern's); besides,
/// every 97th element is unwritten whatever it holds.
fn two_fill_mask(a: &Tensor, pattern: u64) -> Vec<bool> {
    let w = a.dtype.size_bytes();
    let p = &pattern.to_le_bytes()[..w];
    a.data
        .chunks_exact(w)
        .enumerate()
        .map(|(j, c)| (c == p && j % 2 == 0) || j % 97 == 5)
        .collect()
}

#[test]
fn every_path_gives_the_reference_figures_for_every_rule_and_lane() {
    // Axes with s and n: runs of 5 elements per heat cell, so runs straddle blocks.
    let shape = [2usize, 167, 3, 5];
    let axes: Vec<String> = ["b", "s", "n", "d"].iter().map(|s| s.to_string()).collect();
    let n: usize = shape.iter().product();
    assert!(!n.is_multiple_of(BLOCK));
    let heat = HeatGeometry::for_axes(&shape, &axes).unwrap();
    let dtypes = [
        ElemType::Bf16,
        ElemType::F16,
        ElemType::F32,
        ElemType::F64,
        ElemType::U8,
        ElemType::I32,
        ElemType::I64,
        ElemType::I8,
    ];
    let mut clean_blocks_seen = 0;
    for (di, &dtype) in dtypes.iter().enumerate() {
        let k = kind(dtype);
        for golden_f64 in [false, true] {
            let (a, e, g) = data(&k, n, golden_f64, 17 + di as u64 * 2 + golden_f64 as u64);
            for (ri, rule) in rules().into_iter().enumerate() {
                // Vary the optional parts with the rule.
                let poison = match ri % 3 {
                    0 => &k.poison[..1],
                    1 => k.poison,
                    _ => &[][..],
                };
                // Every fourth rule: the unwritten elements decided by a mask (the two-fill
                // test), marking some poison-holding elements written and some other ones
                // unwritten, in clean blocks too.
                let mask = two_fill_mask(&a, k.poison[0]);
                let cfg = PassConfig {
                    rule,
                    poison,
                    unwritten: (ri % 4 == 1).then_some(&mask[..]),
                    small_value: (ri % 2 == 0).then_some((1.0 / 64.0, 1.0 / 4096.0)),
                    heat: (ri % 4 != 3).then_some(&heat),
                    worst: ri % 5 != 4,
                };
                let want = reference_for(&a, &e, &g, &cfg);
                let mut first: Option<String> = None;
                for path in PATHS {
                    let got = run_pass_on(&a, &e, &g, &cfg, Threads(1), path);
                    let what = format!("{dtype:?} golden_f64 {golden_f64} {rule:?} {path:?}");
                    assert_eq!(exact_figures(&got), exact_figures(&want), "{what}");
                    assert!(
                        sums_agree(&got, &want),
                        "{what}: {:?} vs {:?}",
                        sums(&got),
                        sums(&want)
                    );
                    // The paths agree bit for bit, sums included.
                    let all = all_figures(&got);
                    match &first {
                        None => first = Some(all),
                        Some(f) => assert_eq!(&all, f, "{what}"),
                    }
                }
                // Some elements of every kind were there to judge.
                assert!(want.comparable > 0, "{dtype:?}");
                if k.float || golden_f64 {
                    assert!(want.non_comparable > 0, "{dtype:?}");
                }
                if !poison.is_empty() {
                    assert!(want.unwritten > 0, "{dtype:?}");
                }
                let (clean, dirty) = block_kinds(&k, &a, &e, &g, poison);
                let can_be_dirty = k.float || golden_f64 || !poison.is_empty();
                assert!(
                    clean >= 10 && (dirty >= 10 || !can_be_dirty),
                    "{dtype:?}: {clean} clean, {dirty} dirty"
                );
                clean_blocks_seen += clean;
            }
        }
    }
    assert!(clean_blocks_seen > 0);
}

#[test]
fn paths_and_thread_counts_agree_bit_for_bit_across_chunks() {
    let n = 2 * CHUNK + 1000 + 13;
    let k = kind(ElemType::Bf16);
    let (a, e, g) = data(&k, n, true, 99);
    let shape = [1usize, n / 13, 1, 13];
    let axes: Vec<String> = ["b", "s", "n", "d"].iter().map(|s| s.to_string()).collect();
    let heat = HeatGeometry::for_axes(&shape, &axes).unwrap();
    let cfg = PassConfig {
        rule: ElementRule::CannDouble {
            rel_limit: 0.01,
            small: 1.0 / 256.0,
            small_err: 1.0 / 65536.0,
        },
        poison: &k.poison[..1],
        unwritten: None,
        small_value: Some((1.0 / 256.0, 1.0 / 65536.0)),
        heat: Some(&heat),
        worst: true,
    };
    // The same with an unwritten mask: it is read by flat index in every chunk.
    let mask = two_fill_mask(&a, k.poison[0]);
    let masked = PassConfig {
        unwritten: Some(&mask),
        ..cfg.clone()
    };
    for cfg in [&cfg, &masked] {
        let one = all_figures(&run_pass_on(&a, &e, &g, cfg, Threads(1), KernelPath::Auto));
        for path in PATHS {
            for t in [1, 2, 3] {
                let got = run_pass_on(&a, &e, &g, cfg, Threads(t), path);
                assert_eq!(all_figures(&got), one, "{path:?} with {t} threads");
            }
        }
    }
    let want = reference_for(&a, &e, &g, &masked);
    let got = run_pass_on(&a, &e, &g, &masked, Threads(3), KernelPath::Auto);
    assert_eq!(exact_figures(&got), exact_figures(&want));
    assert!(want.unwritten > n as u64 / 97);
    let small = Some((1.0 / 256.0, 1.0 / 65536.0));
    let one = all_figures(&run_baseline_pass_on(
        &a,
        &g,
        small,
        Threads(1),
        KernelPath::Auto,
    ));
    for path in PATHS {
        for t in [1, 2, 3] {
            let got = run_baseline_pass_on(&a, &g, small, Threads(t), path);
            assert_eq!(all_figures(&got), one, "baseline {path:?} with {t} threads");
        }
    }
}

/// The baseline figures written out the plain way.
fn reference_baseline<A: Lane, G: Lane>(
    base: &[u8],
    gold: &[u8],
    small_value: Option<(f64, f64)>,
) -> PassStats {
    let n = base.len() / A::BYTES;
    let mut st = PassStats::new(0);
    st.numel = n as u64;
    for j in 0..n {
        let bv = A::value(load::<A>(base, j));
        let gv = G::value(load::<G>(gold, j));
        if !(bv.is_finite() && gv.is_finite()) {
            let gd = if gv.abs() >= A::OVERFLOW {
                gv.signum() * f64::INFINITY
            } else {
                gv
            };
            st.non_comparable += !(gd.is_infinite() && bv == gd) as u64;
            st.non_finite += (!bv.is_finite() && gd.is_finite()) as u64;
            continue;
        }
        st.comparable += 1;
        let d = sat((bv - gv).abs());
        st.max_abs = st.max_abs.max(d);
        st.sum_abs += d;
        if let Some((small, small_err)) = small_value {
            let ag = gv.abs();
            if ag < small {
                st.small += 1;
                st.small_err += (d > small_err) as u64;
            } else {
                let rel = sat(d / (ag + CANN_EPS));
                st.normal += 1;
                st.normal_sum_rel += rel;
                st.normal_max_rel = st.normal_max_rel.max(rel);
                st.normal_sum_sq += d * d;
            }
        }
    }
    st
}

#[test]
fn baseline_paths_give_the_reference_figures() {
    let n = 5000;
    for (i, dtype) in [ElemType::Bf16, ElemType::F16, ElemType::F32, ElemType::F64]
        .into_iter()
        .enumerate()
    {
        let k = kind(dtype);
        for golden_f64 in [false, true] {
            let (b, _, g) = data(&k, n, golden_f64, 500 + i as u64);
            for small in [None, Some((1.0 / 64.0, 1.0 / 4096.0))] {
                let want = match (dtype, golden_f64) {
                    (ElemType::Bf16, false) => {
                        reference_baseline::<Bf16Lane, Bf16Lane>(&b.data, &g.data, small)
                    }
                    (ElemType::Bf16, true) => {
                        reference_baseline::<Bf16Lane, F64Lane>(&b.data, &g.data, small)
                    }
                    (ElemType::F16, false) => {
                        reference_baseline::<F16Lane, F16Lane>(&b.data, &g.data, small)
                    }
                    (ElemType::F16, true) => {
                        reference_baseline::<F16Lane, F64Lane>(&b.data, &g.data, small)
                    }
                    (ElemType::F32, false) => {
                        reference_baseline::<F32Lane, F32Lane>(&b.data, &g.data, small)
                    }
                    (ElemType::F32, true) => {
                        reference_baseline::<F32Lane, F64Lane>(&b.data, &g.data, small)
                    }
                    _ => reference_baseline::<F64Lane, F64Lane>(&b.data, &g.data, small),
                };
                assert!(want.non_comparable > 0 && want.comparable > BLOCK as u64);
                for path in PATHS {
                    let got = run_baseline_pass_on(&b, &g, small, Threads(1), path);
                    let what = format!("{dtype:?} golden_f64 {golden_f64} {small:?} {path:?}");
                    assert_eq!(exact_figures(&got), exact_figures(&want), "{what}");
                    assert!(sums_agree(&got, &want), "{what}");
                }
            }
        }
    }
}
