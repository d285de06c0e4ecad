//! Layout conversions: exact for every pair (round trips are the identity; converting then
//! reading element (block, slot, head, d) or gathering a sequence gives what the source gave).

use conform_reference::kv::{
    convert, convert_into, gather, CacheGeometry, KvCacheLayout, KvError, KvLayoutError,
};
use proptest::prelude::*;

fn geometry_and_layouts() -> impl Strategy<Value = (CacheGeometry, Vec<KvCacheLayout>)> {
    (
        1usize..6,
        1usize..7,
        1usize..4,
        prop::sample::select(vec![1usize, 2, 3, 4, 8, 16, 24]),
        prop::sample::select(vec![1usize, 2, 4, 8]),
    )
        .prop_map(|(num_blocks, block_size, kv_heads, head_dim, x)| {
            let g = CacheGeometry {
                num_blocks,
                block_size,
                kv_heads,
                head_dim,
            };
            let x = if head_dim % x == 0 { x } else { 1 };
            let layouts = vec![
                KvCacheLayout::BnBsH,
                KvCacheLayout::BnNBsD,
                KvCacheLayout::VllmKey { x },
                KvCacheLayout::VllmValue,
            ];
            (g, layouts)
        })
}

/// Bit patterns including NaNs with payloads, infinities and signed zeros.
fn buffer(len: usize, seed: u64) -> Vec<u16> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u16
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn conversions_between_every_pair_of_layouts_round_trip_exactly(
        (g, layouts) in geometry_and_layouts(),
        seed in any::<u64>(),
    ) {
        let src = buffer(g.len(), seed);
        for &from in &layouts {
            for &to in &layouts {
                let there = convert(from, to, &g, &src).unwrap();
                let back = convert(to, from, &g, &there).unwrap();
                prop_assert_eq!(&back, &src, "{:?} -> {:?} -> back", from, to);
                let mut into = vec![0u16; g.len()];
                convert_into(from, to, &g, &src, &mut into).unwrap();
                prop_assert_eq!(&into, &there);
            }
        }
    }

    #[test]
    fn convert_then_read_equals_read(
        (g, layouts) in geometry_and_layouts(),
        seed in any::<u64>(),
    ) {
        let src = buffer(g.len(), seed);
        for &from in &layouts {
            for &to in &layouts {
                let dst = convert(from, to, &g, &src).unwrap();
                for b in 0..g.num_blocks {
                    for s in 0..g.block_size {
                        for h in 0..g.kv_heads {
                            for d in 0..g.head_dim {
                                prop_assert_eq!(
                                    dst[to.offset(&g, b, s, h, d)],
                                    src[from.offset(&g, b, s, h, d)]
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn convert_then_gather_equals_gather(
        (g, layouts) in geometry_and_layouts(),
        seed in any::<u64>(),
        table_seed in any::<u64>(),
        len_frac in 0.0f64..=1.0,
    ) {
        let src = buffer(g.len(), seed);
        let mut table: Vec<i32> = (0..g.num_blocks as i32).collect();
        let mut s = table_seed | 1;
        for i in (1..table.len()).rev() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            table.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let len = (len_frac * (g.num_slots()) as f64) as usize;
        for &from in &layouts {
            let want = gather(from, &g, &src, &table, len).unwrap();
            for &to in &layouts {
                let dst = convert(from, to, &g, &src).unwrap();
                prop_assert_eq!(&gather(to, &g, &dst, &table, len).unwrap(), &want);
            }
        }
    }
}

#[test]
fn converting_to_the_same_layout_is_a_copy() {
    let g = CacheGeometry {
        num_blocks: 2,
        block_size: 3,
        kv_heads: 2,
        head_dim: 4,
    };
    let src = buffer(g.len(), 7);
    assert_eq!(
        convert(KvCacheLayout::BnBsH, KvCacheLayout::BnBsH, &g, &src).unwrap(),
        src
    );
}

#[test]
fn vllm_key_to_bnbsh_matches_a_hand_written_transpose() {
    // K [blocks, heads, D/x, bs, x] -> [blocks, bs, heads * D], written out by hand.
    let g = CacheGeometry {
        num_blocks: 2,
        block_size: 3,
        kv_heads: 2,
        head_dim: 4,
    };
    let x = 2;
    let src: Vec<u32> = (0..g.len() as u32).collect();
    let mut want = vec![0u32; g.len()];
    for b in 0..2 {
        for h in 0..2 {
            for dh in 0..2 {
                for s in 0..3 {
                    for dl in 0..2 {
                        let i = (((b * 2 + h) * 2 + dh) * 3 + s) * 2 + dl;
                        let d = dh * x + dl;
                        want[(b * 3 + s) * 8 + h * 4 + d] = src[i];
                    }
                }
            }
        }
    }
    assert_eq!(
        convert(KvCacheLayout::VllmKey { x }, KvCacheLayout::BnBsH, &g, &src).unwrap(),
        want
    );
}

#[test]
fn convert_rejects_buffers_of_the_wrong_size() {
    let g = CacheGeometry {
        num_blocks: 2,
        block_size: 4,
        kv_heads: 1,
        head_dim: 8,
    };
    assert_eq!(
        convert(
            KvCacheLayout::BnBsH,
            KvCacheLayout::VllmValue,
            &g,
            &[0u16; 63]
        ),
        Err(KvError::Layout(KvLayoutError::WrongLength {
            layout: KvCacheLayout::BnBsH,
            expected: 64,
            actual: 63
        }))
    );
    let mut dst = vec![0u16; 65];
    assert_eq!(
        convert_into(
            KvCacheLayout::BnBsH,
            KvCacheLayout::VllmValue,
            &g,
            &[1u16; 64],
            &mut dst
        ),
        Err(KvError::Layout(KvLayoutError::WrongLength {
            layout: KvCacheLayout::VllmValue,
            expected: 64,
            actual: 65
        }))
    );
    assert!(dst.iter().all(|&v| v == 0));
}

#[test]
fn convert_rejects_head_dim_not_multiple_of_x_on_either_side() {
    let g = CacheGeometry {
        num_blocks: 1,
        block_size: 2,
        kv_heads: 1,
        head_dim: 6,
    };
    let src = vec![0u16; g.len()];
    let err = Err(KvError::Layout(KvLayoutError::HeadDimNotMultipleOfX {
        head_dim: 6,
        x: 4,
    }));
    assert_eq!(
        convert(
            KvCacheLayout::BnBsH,
            KvCacheLayout::VllmKey { x: 4 },
            &g,
            &src
        ),
        err
    );
    assert_eq!(
        convert(
            KvCacheLayout::VllmKey { x: 4 },
            KvCacheLayout::BnBsH,
            &g,
            &src
        ),
        err
    );
}
