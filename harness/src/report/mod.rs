//! `conform report`: a self-contained HTML page (inline CSS and SVG, no script, no network)
//! from a results file, perf record files, a baseline comparison and an MC2 timeline.
//! What the page shows: docs/report.md.

pub mod case_detail;
pub mod cases;
pub mod error;
pub mod history_input;
pub mod load;
pub mod mc2_input;
pub mod mc2_section;
pub mod perf_input;
pub mod perf_section;
pub mod plots;
pub mod replay;
pub mod summary;

pub use error::ReportError;

use crate::html;
use crate::messages::report as msg;
use crate::results::RunResults;
use std::path::{Path, PathBuf};

/// Everything a report is made from.
#[derive(Clone, Debug)]
pub struct ReportInputs {
    pub results: RunResults,
    /// Where the results came from (named in errors about their `perf` objects).
    pub results_path: PathBuf,
    /// Perf record files, oldest first.
    pub perf_files: Vec<perf_input::PerfFile>,
    pub baseline: Option<Vec<perf_input::Comparison>>,
    pub mc2: Option<mc2_input::Mc2Timeline>,
    /// A kill matrix from `conform adequacy --json`.
    pub adequacy: Option<crate::adequacy::AdequacyReport>,
    /// The change points of the perf history the trend was drawn from (`--history`).
    pub history_changes: Vec<history_input::ChangeRow>,
    /// Each history series' runs with the learned noise band and the drift nights.
    pub history_noise: Vec<history_input::NoiseSeries>,
}

impl ReportInputs {
    /// A report of one run's results alone (what `conform run --report DIR` writes).
    pub fn from_results(results: RunResults, results_path: PathBuf) -> ReportInputs {
        ReportInputs {
            results,
            results_path,
            perf_files: Vec::new(),
            baseline: None,
            mc2: None,
            adequacy: None,
            history_changes: Vec::new(),
            history_noise: Vec::new(),
        }
    }

    /// Reads every input file.
    pub fn load(
        results: &Path,
        perf: &[PathBuf],
        baseline: Option<&Path>,
        mc2: Option<&Path>,
    ) -> Result<ReportInputs, ReportError> {
        Ok(ReportInputs {
            results: load::results(results)?,
            results_path: results.to_path_buf(),
            perf_files: perf
                .iter()
                .map(|p| load::perf_file(p))
                .collect::<Result<_, _>>()?,
            baseline: baseline.map(load::comparisons).transpose()?,
            mc2: mc2.map(load::mc2_timeline).transpose()?,
            adequacy: None,
            history_changes: Vec::new(),
            history_noise: Vec::new(),
        })
    }
}

/// The whole page.
pub fn render(inputs: &ReportInputs) -> Result<String, ReportError> {
    let r = &inputs.results;
    let perf_cases = perf_section::collect(r, &inputs.results_path, &inputs.perf_files)?;
    let mut body = summary::header(r);
    body.push_str(&nav(inputs, r));
    body.push_str("<main>\n");
    body.push_str(&summary::table(r));
    body.push_str(&cases::unfinished(r));
    body.push_str(&cases::failures(r)?);
    body.push_str(&cases::borderline(r)?);
    body.push_str(&cases::ascend_assumptions(r));
    // Without a baseline comparison file, the run's own A/B comparison (`--against`) is shown.
    let ab = match (&inputs.baseline, &r.ab) {
        (None, Some(ab)) => Some(perf_input::comparisons(
            &serde_json::to_value(&ab.comparison).unwrap_or_default(),
            &inputs.results_path,
        )?),
        _ => None,
    };
    body.push_str(&perf_section::section(
        &perf_cases,
        inputs.baseline.as_deref().or(ab.as_deref()),
        &inputs.perf_files,
        &inputs.history_changes,
    )?);
    body.push_str(&perf_section::noise_section(&inputs.history_noise)?);
    if let Some(t) = &inputs.mc2 {
        body.push_str(&mc2_section::section(t)?);
    }
    if let Some(a) = &inputs.adequacy {
        body.push_str(&crate::adequacy::html::section(a));
    }
    body.push_str(&cases::skipped(r));
    body.push_str("</main>\n");
    body.push_str(&format!("<footer>{}</footer>\n", msg::FOOTER));
    Ok(html::page(msg::PAGE_TITLE, &body))
}

fn nav(inputs: &ReportInputs, r: &RunResults) -> String {
    let mut links = vec![("summary", msg::H_SUMMARY)];
    if !r.unfinished.is_empty() {
        links.push(("unfinished", msg::H_UNFINISHED));
    }
    links.push(("failures", msg::H_FAILURES));
    if r.cases.iter().any(cases::is_borderline) {
        links.push(("borderline", msg::H_BORDERLINE));
    }
    if cases::has_ascend_recipes(r) {
        links.push(("ascend", msg::H_ASCEND));
    }
    links.push(("perf", msg::H_PERF));
    if inputs.mc2.is_some() {
        links.push(("mc2", msg::H_MC2));
    }
    if inputs.adequacy.is_some() {
        links.push(("adequacy", crate::adequacy::text::H_ADEQUACY));
    }
    if r.cases
        .iter()
        .any(|c| c.status == crate::results::Status::Skipped)
    {
        links.push(("skipped", msg::H_SKIPPED));
    }
    let mut s = String::from("<nav>");
    for (id, label) in links {
        s.push_str(&format!("<a href=\"#{id}\">{label}</a>"));
    }
    s.push_str("</nav>\n");
    s
}

/// Writes `DIR/index.html` (creating DIR) and returns its path ([`html::write_index`]).
pub fn write(dir: &Path, page: &str) -> Result<PathBuf, ReportError> {
    html::write_index(dir, page).map_err(|(path, source)| ReportError::Write { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{CaseResult, Heatmap, OutputMetrics, Status};

    fn case(id: &str, status: Status, metrics: OutputMetrics) -> CaseResult {
        CaseResult {
            id: id.into(),
            suite: "s".into(),
            op: "op".into(),
            recipe: String::new(),
            target: "t".into(),
            status,
            message: String::new(),
            seed: 1,
            metrics: [("o".to_string(), metrics)].into_iter().collect(),
            duration_ms: 0.0,
            perf: None,
            notes: Vec::new(),
            nondeterministic: None,
            golden_tensors: None,
            variant: None,
            recipe_set_aside: None,
        }
    }

    fn run(cases: Vec<CaseResult>) -> RunResults {
        RunResults {
            schema_version: crate::results::RESULTS_SCHEMA_VERSION,
            conform_version: "0".into(),
            started_at: "now".into(),
            fresh_seeds: true,
            hardware: None,
            cases,
            interrupted: None,
            unfinished: Vec::new(),
            ab: None,
            targets: Vec::new(),
            root: None,
        }
    }

    #[test]
    fn degenerate_metrics_render_without_nan_geometry() {
        // All-zero heatmap (no scale), a heatmap with missing values, zero-count histogram
        // buckets, no worst elements.
        let zero = OutputMetrics {
            policy: "bitwise".into(),
            ulp_histogram: vec![("0".into(), 0), ("1".into(), 3)],
            heatmap: Some(Heatmap {
                row_axis: "query position".into(),
                col_axis: "head".into(),
                row_bucket: 1,
                col_bucket: 1,
                rows: 2,
                cols: 2,
                values: vec![0.0; 4],
            }),
            ..OutputMetrics::default()
        };
        let short = OutputMetrics {
            policy: "ulp(max=1)".into(),
            heatmap: Some(Heatmap {
                row_axis: "q".into(),
                col_axis: "h".into(),
                row_bucket: 0,
                col_bucket: 4,
                rows: 3,
                cols: 1,
                values: vec![1.0],
            }),
            ..OutputMetrics::default()
        };
        let inputs = ReportInputs::from_results(
            run(vec![
                case("a", Status::Failed, zero),
                case("b", Status::Crashed, short),
            ]),
            PathBuf::from("r.json"),
        );
        let page = render(&inputs).unwrap();
        assert!(page.contains("2 of 2 failing"));
        assert!(!page.contains("NaN\""), "NaN in SVG geometry");
        assert!(page.contains("2 non-finite cells"));
        assert!(page.matches("<svg").count() >= 3);
    }

    #[test]
    fn a_declared_nondeterministic_target_is_named_with_its_reason() {
        let mut c = case("a", Status::Passed, OutputMetrics::default());
        c.nondeterministic = Some("atomics <here>".into());
        let page = render(&ReportInputs::from_results(run(vec![c]), "r.json".into())).unwrap();
        assert!(
            page.contains("target <b>t</b>: declared nondeterministic (atomics &lt;here&gt;)"),
            "{page}"
        );
    }

    #[test]
    fn empty_run_is_a_valid_page() {
        let page = render(&ReportInputs::from_results(
            run(Vec::new()),
            "r.json".into(),
        ))
        .unwrap();
        // Nothing was checked: never the green "all passed".
        assert!(!page.contains("all passed"));
        assert!(page.contains("nothing judged: the results hold no case"));
        assert!(page.contains("No failures"));
        assert!(page.ends_with("</html>\n"));
    }
}
