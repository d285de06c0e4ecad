//! The report in a real headless browser (Debian's chromium): the page loads with no console
//! message at all (the page has no script, so any message is a CSP violation, a blocked load
//! or an error), the summary table, the SVG plots and the failure section are in the rendered
//! DOM, and a screenshot is produced.
//!
//! Console messages are read from chromium's own log (`--enable-logging=stderr --v=0`), where
//! every console message and uncaught error appears as an `INFO:CONSOLE` line; a control test
//! proves this detector catches a page that does log an error.
//!
//! Where no chromium is installed the trials are *ignored* (listed as such, so cargo test and
//! nextest count them as skipped, never as passed) and the reason is printed once — unless
//! `CONFORM_REQUIRE_CHROMIUM=1` (CI sets it), where they run and fail. `CONFORM_CHROMIUM` names
//! the binary explicitly. A libtest-mimic binary (`harness = false`) because the decision is
//! made at run time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

const CANDIDATES: [&str; 4] = [
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CONFORM_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| CANDIDATES.iter().map(move |c| dir.join(c)))
        .find(|p| p.is_file())
}

/// Why the browser trials cannot run here, or None when they can (or must: CI).
fn missing_browser() -> Option<String> {
    if find_chromium().is_some() || std::env::var("CONFORM_REQUIRE_CHROMIUM").as_deref() == Ok("1")
    {
        return None;
    }
    Some(format!(
        "chromium is not installed (tried {CANDIDATES:?} on PATH; `apt-get install chromium`, \
         or set CONFORM_CHROMIUM)"
    ))
}

/// The browser; a trial that runs without one fails (CONFORM_REQUIRE_CHROMIUM=1 in CI).
fn chromium() -> PathBuf {
    find_chromium().unwrap_or_else(|| {
        panic!("CONFORM_REQUIRE_CHROMIUM=1 but no chromium found (tried {CANDIDATES:?} on PATH and CONFORM_CHROMIUM)")
    })
}

use conform_test_support::trials;

fn main() {
    let missing = missing_browser();
    let test = |name, body| trials::Test {
        name,
        body,
        missing: missing.clone(),
    };
    trials::run(vec![
        test(
            "report_renders_without_console_messages",
            report_renders_without_console_messages,
        ),
        test(
            "console_detector_catches_a_logging_page",
            console_detector_catches_a_logging_page,
        ),
        test(
            "report_screenshot_is_produced",
            report_screenshot_is_produced,
        ),
    ])
}

struct BrowserRun {
    stdout: String,
    console: Vec<String>,
}

/// Loads `page` headless with a fresh profile and no network features; `action` is
/// `--dump-dom` or `--screenshot=PATH`.
fn load(browser: &Path, page: &Path, action: &str) -> BrowserRun {
    let profile = tempfile::tempdir().unwrap();
    let out_path = profile.path().join("stdout.txt");
    let err_path = profile.path().join("stderr.txt");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--hide-scrollbars",
            "--window-size=1300,3000",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(action)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", browser.display()));
    let status = match child.wait_timeout(BROWSER_TIMEOUT).unwrap() {
        Some(s) => s,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {BROWSER_TIMEOUT:?}");
        }
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(status.success(), "chromium exited with {status}:\n{stderr}");
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    BrowserRun { stdout, console }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(name)
}

/// Writes the report of the deliberately failing fixture (with every optional input).
fn write_report(dir: &Path) -> PathBuf {
    let out = dir.join("report");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_conform"));
    cmd.arg("report")
        .arg("--input")
        .arg(fixture("results-failing.json"));
    for p in ["perf-0.json", "perf-1.json", "perf-2.json"] {
        cmd.arg("--perf").arg(fixture(p));
    }
    cmd.arg("--baseline")
        .arg(fixture("compare.json"))
        .arg("--mc2")
        .arg(fixture("mc2-timeline.json"))
        .arg("--out")
        .arg(&out);
    let o = cmd.output().expect("run conform report");
    assert!(
        o.status.success(),
        "conform report failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.join("index.html")
}

fn section<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("rendered DOM has no section {id}"));
    let end = dom[start..].find("</section>").expect("section closed") + start;
    &dom[start..end]
}

fn report_renders_without_console_messages() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let page = write_report(dir.path());
    let run = load(&browser, &page, "--dump-dom");
    assert!(
        run.console.is_empty(),
        "the report logged to the browser console:\n{}",
        run.console.join("\n")
    );
    let dom = run.stdout;
    assert!(
        dom.contains("<title>conform report</title>"),
        "no DOM dumped"
    );
    // The summary table with a row per suite x target.
    let summary = section(&dom, "summary");
    assert!(summary.contains("<table class=\"summary\">"));
    for suite in [
        "fa_prefill",
        "pa_decode",
        "mc2_matmul_allreduce",
        "w4a16_matmul",
    ] {
        assert!(summary.contains(&format!("<td class=\"text\">{suite}</td>")));
    }
    // SVG plots parsed as SVG elements: histogram, heatmap, budget, trend, timeline.
    assert!(
        dom.matches("<svg").count() >= 6,
        "expected the plots as inline SVG"
    );
    // The failure section lists the failing case with its replay command.
    let failures = section(&dom, "failures");
    assert!(failures.contains("fa_prefill/bf16/b2-s1024-hq16-hkv8-d128/causal_br"));
    assert!(failures.contains("--seed 1234567 --target numpy"));
    assert!(failures.contains("mc2_matmul_allreduce/f16/m4096-k3072-n8192-r8"));
    assert!(!failures.contains("fp4_dequant/e2m1/g32-n4096"));
    // User strings stayed text: the browser built no element from the worker's message.
    assert!(!dom.contains("<num_blocks=512>"));
}

fn console_detector_catches_a_logging_page() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("bad.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><p>x</p>\
         <script>console.error('conform-probe'); missing_function();</script></body></html>",
    )
    .unwrap();
    let run = load(&browser, &page, "--dump-dom");
    assert!(
        run.console.iter().any(|l| l.contains("conform-probe")),
        "console.error not detected; lines: {:?}",
        run.console
    );
    assert!(run
        .console
        .iter()
        .any(|l| l.contains("Uncaught ReferenceError")));
}

fn report_screenshot_is_produced() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let page = write_report(dir.path());
    let shot = dir.path().join("report.png");
    let run = load(&browser, &page, &format!("--screenshot={}", shot.display()));
    assert!(run.console.is_empty(), "{:?}", run.console);
    let png = std::fs::read(&shot).expect("screenshot written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // A rendered page of tables and plots, not a blank canvas (a blank 1300x3000 PNG is a
    // few kB).
    assert!(png.len() > 50_000, "screenshot only {} bytes", png.len());
    if let Some(keep) = std::env::var_os("CONFORM_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
