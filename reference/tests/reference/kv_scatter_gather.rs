//! Scatter (reshape-and-cache), gather and block copies: round trips through shuffled block
//! tables in every layout, padding, untouched NaN slots, bitwise moves and typed errors.

use conform_reference::kv::{
    copy_blocks, gather, gather_batch, gather_into, scatter, BlockCopy, CacheGeometry,
    KvCacheLayout, KvError, KvLayoutError,
};
use proptest::prelude::*;

/// A bf16 quiet NaN with a payload no generated row uses.
const POISON: u16 = 0x7FC1;

fn layouts(g: &CacheGeometry) -> Vec<KvCacheLayout> {
    let x = [8, 4, 2, 1]
        .into_iter()
        .find(|x| g.head_dim.is_multiple_of(*x))
        .unwrap();
    vec![
        KvCacheLayout::BnBsH,
        KvCacheLayout::BnNBsD,
        KvCacheLayout::VllmKey { x },
        KvCacheLayout::VllmValue,
    ]
}

/// A batch of sequences over a shuffled set of blocks.
#[derive(Clone, Debug)]
struct Batch {
    g: CacheGeometry,
    tables: Vec<Vec<i32>>,
    lens: Vec<usize>,
}

fn batch() -> impl Strategy<Value = Batch> {
    (
        1usize..10,
        1usize..6,
        1usize..4,
        prop::sample::select(vec![1usize, 2, 4, 6, 8, 16]),
    )
        .prop_flat_map(|(num_blocks, block_size, kv_heads, head_dim)| {
            let g = CacheGeometry {
                num_blocks,
                block_size,
                kv_heads,
                head_dim,
            };
            (
                Just(g),
                Just((0..num_blocks as i32).collect::<Vec<_>>()).prop_shuffle(),
                prop::collection::vec((0usize..4, 0usize..1000), 1..4),
            )
        })
        .prop_map(|(g, blocks, seqs)| {
            let mut next = 0;
            let mut tables = Vec::new();
            let mut lens = Vec::new();
            for (want, r) in seqs {
                let n = want.min(blocks.len() - next);
                let table = blocks[next..next + n].to_vec();
                next += n;
                // A length that needs exactly the table's blocks (0 for an empty table).
                let len = if n == 0 {
                    0
                } else {
                    (n - 1) * g.block_size + 1 + r % g.block_size
                };
                tables.push(table);
                lens.push(len);
            }
            Batch { g, tables, lens }
        })
}

/// Distinct finite bf16 patterns (never NaN) for row `i`, element `j`.
fn row_value(i: usize, j: usize) -> u16 {
    (((i * 131 + j * 7) % 0x7F00) as u16) | if (i + j) % 2 == 1 { 0x8000 } else { 0 }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn scatter_then_gather_round_trips_for_every_layout(
        b in batch(),
        padding in 0usize..4,
        order_seed in any::<u64>(),
    ) {
        let g = b.g;
        let row_len = g.kv_heads * g.head_dim;
        // Every token of every sequence, plus padding tokens, in a scrambled order.
        let mut tokens: Vec<(i64, Option<(usize, usize)>)> = Vec::new();
        for (s, (table, &len)) in b.tables.iter().zip(&b.lens).enumerate() {
            for t in 0..len {
                let slot = table[t / g.block_size] as i64 * g.block_size as i64
                    + (t % g.block_size) as i64;
                tokens.push((slot, Some((s, t))));
            }
        }
        tokens.extend(std::iter::repeat_n((-1, None), padding));
        let mut state = order_seed | 1;
        for i in (1..tokens.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            tokens.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let slots: Vec<i64> = tokens.iter().map(|t| t.0).collect();
        let rows: Vec<u16> = tokens
            .iter()
            .enumerate()
            .flat_map(|(i, t)| {
                let id = t.1.map(|(s, p)| s * 1000 + p + 1).unwrap_or(0);
                (0..row_len).map(move |j| if id == 0 { (i as u16) | 0x7F80 } else { row_value(id, j) })
            })
            .collect();
        for layout in layouts(&g) {
            let mut cache = vec![POISON; g.len()];
            let written = scatter(layout, &g, &mut cache, &rows, &slots).unwrap();
            prop_assert_eq!(written, tokens.len() - padding);
            // Exactly the written rows changed.
            prop_assert_eq!(
                cache.iter().filter(|&&v| v != POISON).count(),
                written * row_len
            );
            let max_blocks = b.tables.iter().map(|t| t.len()).max().unwrap_or(0);
            let mut flat = Vec::new();
            for t in &b.tables {
                flat.extend(t);
                flat.extend(std::iter::repeat_n(-1, max_blocks - t.len()));
            }
            let lens: Vec<i64> = b.lens.iter().map(|&l| l as i64).collect();
            let got = gather_batch(layout, &g, &cache, &flat, max_blocks, &lens).unwrap();
            for (s, rows_s) in got.iter().enumerate() {
                let expected: Vec<u16> = (0..b.lens[s])
                    .flat_map(|t| (0..row_len).map(move |j| row_value(s * 1000 + t + 1, j)))
                    .collect();
                prop_assert_eq!(rows_s, &expected, "{:?} seq {}", layout, s);
                let single = gather(layout, &g, &cache, &b.tables[s], b.lens[s]).unwrap();
                prop_assert_eq!(&single, rows_s);
            }
        }
    }
}

fn geometry() -> CacheGeometry {
    CacheGeometry {
        num_blocks: 4,
        block_size: 4,
        kv_heads: 2,
        head_dim: 8,
    }
}

#[test]
fn padding_slots_are_skipped() {
    let g = geometry();
    for layout in layouts(&g) {
        let mut cache = vec![POISON; g.len()];
        let rows: Vec<u16> = (0..4 * 16).map(|i| i as u16).collect();
        let slots = [-1, 5, -7, i64::MIN];
        assert_eq!(scatter(layout, &g, &mut cache, &rows, &slots), Ok(1));
        let written: Vec<u16> = cache.iter().copied().filter(|&v| v != POISON).collect();
        let mut expected: Vec<u16> = (16..32).collect();
        let mut got = written.clone();
        got.sort();
        expected.sort();
        assert_eq!(got, expected, "{layout:?}");
        assert_eq!(
            gather(layout, &g, &cache, &[1], 2).unwrap()[16..],
            rows[16..32]
        );
    }
}

#[test]
fn unused_nan_slots_keep_their_exact_bits() {
    let g = geometry();
    for layout in layouts(&g) {
        // Every element a NaN with its own payload (bf16 and f32 bit patterns).
        let before16: Vec<u16> = (0..g.len()).map(|i| 0x7F81 + (i % 0x7E) as u16).collect();
        let before32: Vec<u32> = (0..g.len())
            .map(|i| 0xFF80_0001 + i as u32) // negative signalling NaNs
            .collect();
        let slots = [3, -1, 14];
        let rows16: Vec<u16> = (0..3 * 16).map(|i| i as u16).collect();
        let rows32: Vec<u32> = rows16.iter().map(|&v| v as u32).collect();
        let mut c16 = before16.clone();
        let mut c32 = before32.clone();
        scatter(layout, &g, &mut c16, &rows16, &slots).unwrap();
        scatter(layout, &g, &mut c32, &rows32, &slots).unwrap();
        for b in 0..g.num_blocks {
            for s in 0..g.block_size {
                let target = matches!(b * g.block_size + s, 3 | 14);
                for h in 0..g.kv_heads {
                    for d in 0..g.head_dim {
                        let o = layout.offset(&g, b, s, h, d);
                        assert_eq!(c16[o] == before16[o], !target, "{layout:?} {b} {s}");
                        assert_eq!(c32[o] == before32[o], !target, "{layout:?} {b} {s}");
                    }
                }
            }
        }
    }
}

#[test]
fn data_moves_keep_float_bits_exactly() {
    let g = CacheGeometry {
        num_blocks: 2,
        block_size: 2,
        kv_heads: 1,
        head_dim: 8,
    };
    let specials = [
        f32::from_bits(0x7FA0_0001), // signalling NaN with payload
        f32::from_bits(0xFFC1_2345), // negative quiet NaN with payload
        -0.0,
        f32::from_bits(1), // smallest subnormal
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        -1.5,
    ];
    for layout in layouts(&g) {
        let mut cache = vec![0.0f32; g.len()];
        scatter(layout, &g, &mut cache, &specials, &[3]).unwrap();
        let back = gather(layout, &g, &cache, &[0, 1], 4).unwrap();
        let bits: Vec<u32> = back[24..].iter().map(|v| v.to_bits()).collect();
        let want: Vec<u32> = specials.iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits, want, "{layout:?}");
    }
}

#[test]
fn gather_never_reads_past_seq_len_or_unused_table_entries() {
    let g = geometry();
    for layout in layouts(&g) {
        let mut cache = vec![POISON; g.len()];
        let rows: Vec<u16> = (0..5 * 16).map(|i| i as u16).collect();
        scatter(layout, &g, &mut cache, &rows, &[8, 9, 10, 11, 0]).unwrap();
        // Block 2 then block 0; entries past the second are padding and never validated.
        let out = gather(layout, &g, &cache, &[2, 0, -1, 99], 5).unwrap();
        assert_eq!(out, rows, "{layout:?}");
        assert!(out.iter().all(|&v| v != POISON));
        assert_eq!(gather(layout, &g, &cache, &[-1], 0), Ok(vec![]));
    }
}

#[test]
fn scatter_rejects_a_slot_past_the_cache_and_writes_nothing() {
    let g = geometry();
    for layout in layouts(&g) {
        let mut cache = vec![POISON; g.len()];
        let rows = vec![1u16; 3 * 16];
        assert_eq!(
            scatter(layout, &g, &mut cache, &rows, &[0, 16, 1]),
            Err(KvError::SlotOutOfRange {
                token: 1,
                slot: 16,
                num_slots: 16
            })
        );
        assert_eq!(
            scatter(layout, &g, &mut cache, &rows, &[0, 1, i64::MAX]),
            Err(KvError::SlotOutOfRange {
                token: 2,
                slot: i64::MAX,
                num_slots: 16
            })
        );
        assert!(
            cache.iter().all(|&v| v == POISON),
            "{layout:?} wrote on error"
        );
    }
}

#[test]
fn scatter_rejects_two_tokens_writing_one_slot() {
    let g = geometry();
    let mut cache = vec![POISON; g.len()];
    let rows = vec![1u16; 3 * 16];
    assert_eq!(
        scatter(KvCacheLayout::BnBsH, &g, &mut cache, &rows, &[4, -1, 4]),
        Err(KvError::DuplicateSlot {
            slot: 4,
            first: 0,
            second: 2
        })
    );
    assert!(cache.iter().all(|&v| v == POISON));
}

#[test]
fn scatter_rejects_rows_of_the_wrong_length() {
    let g = geometry();
    let mut cache = vec![POISON; g.len()];
    assert_eq!(
        scatter(KvCacheLayout::BnNBsD, &g, &mut cache, &[0u16; 20], &[1, 2]),
        Err(KvError::WrongLength {
            name: "rows",
            expected: 32,
            actual: 20
        })
    );
}

#[test]
fn cache_buffers_of_the_wrong_length_are_typed_errors() {
    let g = geometry();
    for layout in layouts(&g) {
        let mut short = vec![0u16; g.len() - 1];
        let err = KvError::Layout(KvLayoutError::WrongLength {
            layout,
            expected: g.len(),
            actual: g.len() - 1,
        });
        assert_eq!(
            scatter(layout, &g, &mut short, &[0u16; 16], &[0]),
            Err(err.clone())
        );
        assert_eq!(gather(layout, &g, &short, &[0], 1), Err(err.clone()));
        assert_eq!(
            copy_blocks(layout, &g, &mut short, &[BlockCopy { src: 0, dst: 1 }]),
            Err(err)
        );
    }
}

#[test]
fn gather_rejects_a_negative_block_table_entry() {
    let g = geometry();
    let cache = vec![0u16; g.len()];
    assert_eq!(
        gather(KvCacheLayout::BnBsH, &g, &cache, &[0, -3], 5),
        Err(KvError::BlockTableEntryOutOfRange {
            index: 1,
            entry: -3,
            num_blocks: 4
        })
    );
}

#[test]
fn gather_rejects_a_block_table_entry_past_num_blocks() {
    let g = geometry();
    let cache = vec![0u16; g.len()];
    for layout in layouts(&g) {
        assert_eq!(
            gather(layout, &g, &cache, &[4], 1),
            Err(KvError::BlockTableEntryOutOfRange {
                index: 0,
                entry: 4,
                num_blocks: 4
            })
        );
        assert!(gather(layout, &g, &cache, &[3, i32::MAX], 4).is_ok());
        assert!(gather(layout, &g, &cache, &[3, i32::MAX], 5).is_err());
    }
}

#[test]
fn gather_rejects_a_seq_len_beyond_the_table_capacity() {
    let g = geometry();
    let cache = vec![0u16; g.len()];
    assert_eq!(
        gather(KvCacheLayout::VllmValue, &g, &cache, &[0, 1], 9),
        Err(KvError::SeqLenBeyondCapacity {
            seq_len: 9,
            table_len: 2,
            block_size: 4
        })
    );
    assert!(gather(KvCacheLayout::VllmValue, &g, &cache, &[0, 1], 8).is_ok());
}

#[test]
fn gather_into_rejects_an_output_of_the_wrong_length() {
    let g = geometry();
    let cache = vec![0u16; g.len()];
    let mut out = vec![7u16; 15];
    assert_eq!(
        gather_into(KvCacheLayout::BnBsH, &g, &cache, &[0], 1, &mut out),
        Err(KvError::WrongLength {
            name: "out",
            expected: 16,
            actual: 15
        })
    );
    assert!(out.iter().all(|&v| v == 7));
    let mut out = vec![7u16; 16];
    gather_into(KvCacheLayout::BnBsH, &g, &cache, &[0], 1, &mut out).unwrap();
    assert!(out.iter().all(|&v| v == 0));
}

#[test]
fn gather_batch_names_the_failing_sequence() {
    let g = geometry();
    let cache = vec![0u16; g.len()];
    let tables = [0, 1, 2, 9];
    assert_eq!(
        gather_batch(KvCacheLayout::BnBsH, &g, &cache, &tables, 2, &[8, 5]),
        Err(KvError::InSequence {
            seq: 1,
            source: Box::new(KvError::BlockTableEntryOutOfRange {
                index: 1,
                entry: 9,
                num_blocks: 4
            })
        })
    );
    assert_eq!(
        gather_batch(KvCacheLayout::BnBsH, &g, &cache, &tables, 2, &[-1, 1]),
        Err(KvError::InSequence {
            seq: 0,
            source: Box::new(KvError::SeqLenBeyondCapacity {
                seq_len: -1,
                table_len: 2,
                block_size: 4
            })
        })
    );
    assert_eq!(
        gather_batch(KvCacheLayout::BnBsH, &g, &cache, &tables, 3, &[1]),
        Err(KvError::WrongLength {
            name: "block_tables",
            expected: 3,
            actual: 4
        })
    );
}

#[test]
fn vllm_key_layout_rejects_head_dim_not_multiple_of_x() {
    let g = CacheGeometry {
        head_dim: 12,
        ..geometry()
    };
    let layout = KvCacheLayout::VllmKey { x: 8 };
    let mut cache = vec![0u16; g.len()];
    let err = KvError::Layout(KvLayoutError::HeadDimNotMultipleOfX { head_dim: 12, x: 8 });
    assert_eq!(
        scatter(layout, &g, &mut cache, &[0u16; 24], &[0]),
        Err(err.clone())
    );
    assert_eq!(gather(layout, &g, &cache, &[0], 1), Err(err.clone()));
    assert_eq!(copy_blocks(layout, &g, &mut cache, &[]), Err(err));
    assert!(matches!(
        gather(KvCacheLayout::VllmKey { x: 0 }, &g, &cache, &[0], 1),
        Err(KvError::Layout(KvLayoutError::HeadDimNotMultipleOfX {
            x: 0,
            ..
        }))
    ));
}

#[test]
fn zero_dimension_geometry_is_a_typed_error() {
    let g = CacheGeometry {
        kv_heads: 0,
        ..geometry()
    };
    assert_eq!(
        gather::<u16>(KvCacheLayout::BnBsH, &g, &[], &[0], 0),
        Err(KvError::Layout(KvLayoutError::ZeroDimension {
            name: "kv_heads"
        }))
    );
}

#[test]
fn copy_blocks_copies_whole_blocks_and_rejects_bad_copies() {
    let g = geometry();
    for layout in layouts(&g) {
        let mut cache: Vec<u16> = (0..g.len() as u16).collect();
        let before = cache.clone();
        copy_blocks(
            layout,
            &g,
            &mut cache,
            &[BlockCopy { src: 1, dst: 3 }, BlockCopy { src: 3, dst: 0 }],
        )
        .unwrap();
        for s in 0..g.block_size {
            for h in 0..g.kv_heads {
                for d in 0..g.head_dim {
                    let at = |b| layout.offset(&g, b, s, h, d);
                    assert_eq!(cache[at(3)], before[at(1)]);
                    assert_eq!(cache[at(0)], before[at(1)], "copies apply in order");
                    assert_eq!(cache[at(1)], before[at(1)]);
                    assert_eq!(cache[at(2)], before[at(2)]);
                }
            }
        }
        let before = cache.clone();
        for (copy, reason) in [
            (BlockCopy { src: 4, dst: 0 }, "src is not below num_blocks"),
            (BlockCopy { src: 0, dst: 4 }, "dst is not below num_blocks"),
            (BlockCopy { src: 2, dst: 2 }, "src equals dst"),
        ] {
            assert_eq!(
                copy_blocks(
                    layout,
                    &g,
                    &mut cache,
                    &[BlockCopy { src: 0, dst: 1 }, copy]
                ),
                Err(KvError::BadBlockCopy {
                    index: 1,
                    src: copy.src,
                    dst: copy.dst,
                    reason
                })
            );
            assert_eq!(cache, before, "nothing is written on error");
        }
    }
}
