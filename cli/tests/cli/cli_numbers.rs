//! Every number the command line takes, at its extremes (issue 26): threads, iterations,
//! warm-ups, seeds, seed sets, memory sizes, thresholds, history runs and the M/K/N of
//! `mc2 plan`. Parsing (through clap, as the binary parses) never panics; a value it accepts is
//! within the documented bounds, anything else is a clear error. A few real invocations check
//! that what parses is then refused or clamped with a message, never a panic or an abort.

use clap::Parser;
use conform_cli::{Cli, Command};
use conform_reference::parallel::Threads;
use proptest::prelude::*;

/// Extreme spellings of numbers: huge, negative, fractional, exponents, non-finite, empty.
fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i128>().prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        (0u64..20).prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        Just("18446744073709551616".to_string()),
        Just("340282366920938463463374607431768211456".to_string()),
        Just("-0".to_string()),
        Just("1e400".to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("".to_string()),
        Just(" 7 ".to_string()),
        Just("0x10".to_string()),
        "[0-9]{1,40}[KMGT]?",
        "-?[0-9]{0,5}\\.[0-9]{0,5}[kmgtKMGT]?",
    ]
}

/// Parses `args` as the binary would; Err (clap's message) on a refusal. A panic fails the
/// property.
fn parse(args: &[&str]) -> Result<Cli, String> {
    let argv: Vec<&str> = std::iter::once("conform")
        .chain(args.iter().copied())
        .collect();
    Cli::try_parse_from(argv).map_err(|e| e.to_string())
}

/// A clear refusal: clap's error names the option, or (for a value that looks like an
/// option, `-.`) the unexpected argument.
fn refused(e: &str, flag: &str) -> bool {
    e.starts_with("error:") && (e.contains(flag) || e.contains("unexpected argument"))
}

fn run_args(cli: Cli) -> conform_cli::run::RunArgs {
    match cli.command {
        Command::Run(a) => *a,
        c => panic!("not run: {c:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn threads_are_between_1_and_the_machine_ceiling(v in number_text()) {
        for cmd in [&["run"][..], &["adequacy"], &["golden", "verify"], &["golden", "bless"],
                    &["perf", "record", "--out", "p.json"]] {
            let mut args = cmd.to_vec();
            args.extend(["--threads", v.as_str()]);
            match parse(&args) {
                Ok(cli) => {
                    let n = match cli.command {
                        Command::Run(a) => a.threads,
                        Command::Adequacy(a) => a.threads,
                        Command::Golden(conform_cli::golden::GoldenCommand::Verify {
                            threads, ..
                        })
                        | Command::Golden(conform_cli::golden::GoldenCommand::Bless {
                            threads, ..
                        }) => threads,
                        Command::Perf(conform_cli::perf::PerfCommand::Record(r)) => {
                            r.run.threads
                        }
                        c => panic!("{c:?}"),
                    }
                    .unwrap();
                    prop_assert!(n >= 1 && n <= Threads::max_allowed(), "{v}: {n}");
                }
                Err(e) => prop_assert!(refused(&e, "--threads"), "{v}: {e}"),
            }
        }
    }

    #[test]
    fn iterations_and_warmups_are_bounded(v in number_text()) {
        match parse(&["run", "--perf", "--iterations", &v]) {
            Ok(cli) => {
                let n = run_args(cli).iterations.unwrap();
                prop_assert!((1..=conform_cli::run::MAX_ITERATIONS).contains(&n));
            }
            Err(e) => prop_assert!(refused(&e, "--iterations"), "{v}: {e}"),
        }
        match parse(&["run", "--perf", "--warmup", &v]) {
            Ok(cli) => {
                let n = run_args(cli).warmup.unwrap();
                prop_assert!(n <= conform_cli::run::MAX_ITERATIONS);
            }
            Err(e) => prop_assert!(refused(&e, "--warmup"), "{v}: {e}"),
        }
    }

    #[test]
    fn seeds_are_any_u64_and_nothing_else(v in number_text()) {
        match parse(&["run", "--seed", &v]) {
            Ok(cli) => prop_assert_eq!(run_args(cli).seed, v.parse::<u64>().ok()),
            Err(e) => prop_assert!(refused(&e, "--seed"), "{v}: {e}"),
        }
        if let Err(e) = parse(&["adequacy", "--seed", &v]) {
            prop_assert!(refused(&e, "--seed"), "{v}: {e}");
        }
    }

    #[test]
    fn seed_sets_are_bounded(v in number_text()) {
        match parse(&["adequacy", "--seed-sets", &v]) {
            Ok(cli) => match cli.command {
                Command::Adequacy(a) => prop_assert!(
                    a.seed_sets <= conform_harness::adequacy::text::MAX_SEED_SETS
                ),
                c => panic!("{c:?}"),
            },
            Err(e) => prop_assert!(refused(&e, "--seed-sets"), "{v}: {e}"),
        }
    }

    #[test]
    fn memory_limits_are_at_least_one_byte(v in number_text()) {
        match parse(&["run", "--max-memory", &v]) {
            Ok(cli) => prop_assert!(run_args(cli).max_memory.unwrap() >= 1),
            Err(e) => prop_assert!(refused(&e, "--max-memory"), "{v}: {e}"),
        }
    }

    #[test]
    fn thresholds_and_history_runs_parse_without_panicking(v in number_text()) {
        for args in [
            &["run", "--perf", "--against", "reference", "--ab-threshold", &v][..],
            &["perf", "compare", "--baseline", "a", "--candidate", "b", "--threshold", &v],
            &["report", "--input", "r.json", "--out", "d", "--history-runs", &v],
        ] {
            let _ = parse(args);
        }
    }

    #[test]
    fn mc2_dimensions_parse_without_panicking(m in number_text(), k in number_text()) {
        let _ = parse(&["mc2", "plan", "--m", &m, "--k", &k, "--n", "8", "--dtype", "f16",
                        "--costs", "c.toml"]);
    }
}

// A few real invocations: the values that parse are refused (or clamped) with a message.

use crate::cli;
use cli::repo;

#[test]
fn extreme_values_end_with_a_message_and_exit_2() {
    let costs = repo().join("suites/mc2/costs-seed-example.toml");
    let costs = costs.to_str().unwrap();
    let huge = u64::MAX.to_string();
    for (args, says) in [
        (vec!["run", "--threads", "100000"], "at most"),
        (vec!["run", "--max-memory", "0.1"], "less than one byte"),
        (
            vec!["run", "--perf", "--iterations", "4294967295"],
            "--iterations",
        ),
        (vec!["adequacy", "--seed-sets", "4294967295"], "--seed-sets"),
        (
            vec![
                "mc2", "plan", "--m", &huge, "--k", "64", "--n", "64", "--dtype", "f16", "--costs",
                costs,
            ],
            "",
        ),
        (
            vec![
                "perf",
                "compare",
                "--baseline",
                "a",
                "--candidate",
                "b",
                "--threshold",
                "NaN",
            ],
            "",
        ),
    ] {
        let o = cli::conform(&repo(), &args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
    }
}
