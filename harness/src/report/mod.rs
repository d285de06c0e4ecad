//! `conform report`: a self-contained HTML page (inline CSS and SVG, no script, no network)
//! from a results file, perf record files, a baseline comparison and an MC2 timeline.
//! What the page shows: docs/report.md.

pub mod case_detail;
pub mod cases;
pub mod error;
pub mod html;
pub mod load;
pub mod mc2_input;
pub mod mc2_section;
pub mod perf_input;
pub mod perf_section;
pub mod plots;
pub mod replay;
pub mod summary;

pub use error::ReportError;

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
}

impl ReportInputs {
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
    body.push_str(&cases::failures(r)?);
    body.push_str(&cases::borderline(r)?);
    body.push_str(&perf_section::section(
        &perf_cases,
        inputs.baseline.as_deref(),
        &inputs.perf_files,
    )?);
    if let Some(t) = &inputs.mc2 {
        body.push_str(&mc2_section::section(t)?);
    }
    body.push_str(&cases::skipped(r));
    body.push_str("</main>\n");
    body.push_str(&format!("<footer>{}</footer>\n", msg::FOOTER));
    Ok(html::page(msg::PAGE_TITLE, &body))
}

fn nav(inputs: &ReportInputs, r: &RunResults) -> String {
    let mut links = vec![("summary", msg::H_SUMMARY), ("failures", msg::H_FAILURES)];
    if r.cases.iter().any(cases::is_borderline) {
        links.push(("borderline", msg::H_BORDERLINE));
    }
    links.push(("perf", msg::H_PERF));
    if inputs.mc2.is_some() {
        links.push(("mc2", msg::H_MC2));
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

/// Writes `DIR/index.html` (creating DIR) and returns its path.
pub fn write(dir: &Path, page: &str) -> Result<PathBuf, ReportError> {
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReportError::Write { path, source }
    };
    std::fs::create_dir_all(dir).map_err(write_err(dir))?;
    let path = dir.join("index.html");
    std::fs::write(&path, page).map_err(write_err(&path))?;
    Ok(path)
}
