//! `gradcomp converge --resume`: reopen `converge.csv`, tell which cases an earlier run
//! finished, and keep the file to whole curves.
//!
//! A case is finished when one of its rows has status `done` (the last step) or
//! `diverged`. The rows of a case that was cut off (a stop signal: its last row says
//! `interrupted`; `kill -9`: no last row) are not a result: they move to
//! `converge.interrupted.csv` (kept, never deleted) and the case runs again from its
//! first step, so converge.csv never holds two attempts of one case.

use super::target::EvalPoint;
use super::CaseOutcome;
use crate::error::{Error, Result};
use crate::record::CsvSink;
use std::path::Path;

/// Where the rows of cut-off cases go.
pub const INTERRUPTED_FILE: &str = "converge.interrupted.csv";

/// Reopen `path` to append; the finished cases (case_id, outcome) in file order.
pub fn reopen(path: &Path, world_size: usize) -> Result<(CsvSink, Vec<(String, CaseOutcome)>)> {
    if !path.exists() {
        return Ok((CsvSink::create(path)?, Vec::new()));
    }
    let unusable = |why: String| {
        Error::Input(format!(
            "{}: {why}; move it away or use a new --out",
            path.display()
        ))
    };
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Err(unusable(
            "is not a regular file (a directory, a device such as /dev/null, or a FIFO)".into(),
        ));
    }
    crate::record::check_world_size(path, world_size)?;
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    // Only complete lines: a partial last row is cut by CsvSink::resume below.
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let text = &bytes[..keep];
    let mut finished: Vec<(String, CaseOutcome)> = Vec::new();
    if !text.is_empty() {
        let mut r = csv::Reader::from_reader(text);
        let header = r
            .headers()
            .map_err(|e| unusable(format!("not a CSV file ({e})")))?
            .clone();
        let col = |name: &str| {
            header.iter().position(|c| c == name).ok_or_else(|| {
                unusable(format!(
                    "has no '{name}' column, so it is not a converge.csv this gradcomp writes"
                ))
            })
        };
        let (c_id, c_method, c_step, c_status, c_loss, c_acc) = (
            col("case_id")?,
            col("method")?,
            col("step")?,
            col("status")?,
            col("eval_loss")?,
            col("eval_accuracy")?,
        );
        // (case_id, start byte, end byte) of every row.
        let mut rows: Vec<(String, usize, usize)> = Vec::new();
        let mut last_eval: std::collections::HashMap<String, (f64, f64)> = Default::default();
        let mut curves: std::collections::HashMap<String, Vec<EvalPoint>> = Default::default();
        let mut record = csv::StringRecord::new();
        loop {
            let start = r.position().byte() as usize;
            let more = r
                .read_record(&mut record)
                .map_err(|e| unusable(format!("unreadable row ({e})")))?;
            if !more {
                break;
            }
            let end = r.position().byte() as usize;
            let get = |i: usize| record.get(i).unwrap_or("");
            let id = get(c_id).to_string();
            if let (Ok(l), Ok(a)) = (get(c_loss).parse::<f64>(), get(c_acc).parse::<f64>()) {
                last_eval.insert(id.clone(), (l, a));
                if let Ok(step) = get(c_step).parse::<u64>() {
                    curves.entry(id.clone()).or_default().push(EvalPoint {
                        step,
                        loss: l,
                        accuracy: a,
                    });
                }
            }
            let status = get(c_status);
            if (status == "done" || status == "diverged") && !finished.iter().any(|(i, _)| *i == id)
            {
                let (loss, acc) = if status == "done" {
                    last_eval.get(&id).copied().unwrap_or((f64::NAN, f64::NAN))
                } else {
                    (f64::NAN, f64::NAN)
                };
                finished.push((
                    id.clone(),
                    CaseOutcome {
                        method: get(c_method).to_string(),
                        curve: curves.remove(&id).unwrap_or_default(),
                        // The case's own (seed, ids, label) are set by the caller.
                        config_id: String::new(),
                        setup_id: String::new(),
                        label: String::new(),
                        seed: 0,
                        final_eval_loss: loss,
                        final_eval_accuracy: acc,
                        status: if status == "done" {
                            "done".into()
                        } else {
                            format!("diverged at step {} (an earlier run)", get(c_step))
                        },
                    },
                ));
            }
            rows.push((id, start, end));
        }
        let cut: Vec<&(String, usize, usize)> = rows
            .iter()
            .filter(|(id, _, _)| !finished.iter().any(|(f, _)| f == id))
            .collect();
        if !cut.is_empty() {
            let header_end = rows.first().map_or(text.len(), |r| r.1);
            let moved = path.with_file_name(INTERRUPTED_FILE);
            // The rows moved so far, then the header where there were none, then these.
            let mut out = match crate::input::read(
                &moved,
                crate::input::RESULT_CSV_BYTES,
                "converge's interrupted rows",
            ) {
                Ok(b) => b,
                Err(_) if !moved.exists() => Vec::new(),
                Err(e) => return Err(Error::Usage(Box::new(e))),
            };
            if out.is_empty() {
                out.extend_from_slice(&text[..header_end]);
            }
            let mut kept = text[..header_end].to_vec();
            for (id, a, b) in &rows {
                if finished.iter().any(|(f, _)| f == id) {
                    kept.extend_from_slice(&text[*a..*b]);
                } else {
                    out.extend_from_slice(&text[*a..*b]);
                }
            }
            // First the copy (whole: written beside and renamed, so a full disk leaves
            // the old file as it was), then the replacement: a crash between the two
            // leaves the rows in both files, never in neither.
            crate::record::write_atomic(&moved, &out)?;
            crate::record::write_atomic(path, &kept)?;
            let cases: std::collections::BTreeSet<&str> =
                cut.iter().map(|(id, _, _)| id.as_str()).collect();
            eprintln!(
                "gradcomp: warning: {}: {} row(s) of {} case(s) cut off by an earlier run moved to {}; those cases run again from their first step",
                path.display(),
                cut.len(),
                cases.len(),
                moved.display()
            );
        }
    }
    let (sink, _ids) = CsvSink::resume(path)?;
    Ok((sink, finished))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three cases written by an earlier run: `a` finished (`done` at step 2), `b`
    /// diverged at step 1 (its loss NaN: the case stops there, a result all the same),
    /// `c` cut off (`interrupted`). Resuming skips `a` and `b`, keeps their rows, and
    /// moves only `c`'s to converge.interrupted.csv to run it again.
    #[test]
    fn a_diverged_case_counts_as_finished() {
        let d = std::env::temp_dir().join(format!("gradcomp-resume-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("converge.csv");
        let header = "case_id,method,world_size,step,status,eval_loss,eval_accuracy\n";
        let a = "a,ssgd,2,1,ok,1.0,0.5\na,ssgd,2,2,done,0.5,0.75\n";
        let b = "b,topk,2,0,ok,2.0,0.25\nb,topk,2,1,diverged,NaN,NaN\n";
        let c = "c,qsgd,2,0,ok,2.0,0.25\nc,qsgd,2,1,interrupted,1.5,0.5\n";
        std::fs::write(&path, format!("{header}{a}{b}{c}")).unwrap();
        let (_sink, finished) = reopen(&path, 2).unwrap();
        let got: Vec<(&str, &str, &str)> = finished
            .iter()
            .map(|(id, o)| (id.as_str(), o.method.as_str(), o.status.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("a", "ssgd", "done"),
                ("b", "topk", "diverged at step 1 (an earlier run)"),
            ]
        );
        assert_eq!(
            (
                finished[0].1.final_eval_loss,
                finished[0].1.final_eval_accuracy
            ),
            (0.5, 0.75)
        );
        assert!(finished[1].1.final_eval_loss.is_nan());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{header}{a}{b}")
        );
        assert_eq!(
            std::fs::read_to_string(d.join(INTERRUPTED_FILE)).unwrap(),
            format!("{header}{c}")
        );
        // A second resume that finds `c` cut off again adds its rows after the first
        // ones, one header, no temporary file left.
        drop(_sink);
        std::fs::write(&path, format!("{header}{a}{b}{c}")).unwrap();
        reopen(&path, 2).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join(INTERRUPTED_FILE)).unwrap(),
            format!("{header}{c}{c}")
        );
        let mut names: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["converge.csv", INTERRUPTED_FILE]);
        let _ = std::fs::remove_dir_all(&d);
    }
}
