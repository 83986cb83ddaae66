//! Reading a compress profile: the text, its header, each row's fields, and the
//! validation of every row added (read or built in code).

use std::path::Path;

use super::{method_info, parse_stage, stage_code, CompressProfile, ProfileError, Row};
use super::{COLUMNS, COPY, SCRIPT};
use crate::compress::registry;

/// Longest time one profile row may record (s): one compression stage of one tensor
/// takes micro- to milliseconds on a GPU; a minute is a unit mistake, and the emulated
/// device would stall that long for every kernel charged with it.
pub const MAX_STAGE_S: f64 = 60.0;

impl CompressProfile {
    /// Read and validate the profile at `path` (the copy rows must fit, see
    /// [`CompressProfile::copy_spec`]).
    pub fn read(path: impl AsRef<Path>) -> Result<CompressProfile, ProfileError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = crate::input::read_to_string(
            path,
            crate::input::PROFILE_BYTES,
            "a compression profile (CSV from analysis/profile_compress.py)",
        )
        .map_err(|e| ProfileError::File(Box::new(e)))?;
        CompressProfile::parse(&text, shown)
    }

    /// Parse the text of a profile; `path` names it in errors.
    pub fn parse(text: &str, path: impl Into<String>) -> Result<CompressProfile, ProfileError> {
        let mut p = CompressProfile::new(path);
        let mut cols: Option<[usize; 8]> = None;
        let mut width = 0;
        let mut rows = 0usize;
        let mut header_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let l = raw.trim();
            if l.is_empty() {
                continue;
            }
            if let Some(c) = l.strip_prefix('#') {
                if let Some((k, v)) = c.split_once(':') {
                    let k = k.trim();
                    if !k.is_empty() && !k.contains(char::is_whitespace) {
                        p.meta.push((k.to_string(), v.trim().to_string(), line));
                    }
                }
                continue;
            }
            let fields: Vec<&str> = l.split(',').map(str::trim).collect();
            let Some(cols) = cols else {
                cols = Some(p.header(&fields, line)?);
                width = fields.len();
                header_line = line;
                continue;
            };
            if fields.len() != width {
                return Err(ProfileError::Fields {
                    at: p.at(line),
                    got: fields.len(),
                    want: width,
                });
            }
            let get = |c: usize| fields[cols[c]];
            let row = p.row(line, get)?;
            p.insert_at(row, line)?;
            rows += 1;
        }
        if cols.is_none() {
            return Err(ProfileError::Header {
                at: p.at(0),
                msg: "the file has no header row".into(),
            });
        }
        if rows == 0 {
            return Err(ProfileError::NoRows {
                at: p.at(header_line),
            });
        }
        p.check_meta()?;
        p.fit_copies()?;
        Ok(p)
    }

    /// Column index of each of [`COLUMNS`] in the header.
    fn header(&self, fields: &[&str], line: usize) -> Result<[usize; 8], ProfileError> {
        let mut idx = [usize::MAX; 8];
        for (i, h) in fields.iter().enumerate() {
            let Some(c) = COLUMNS.iter().position(|c| c == h) else {
                return Err(ProfileError::Header {
                    at: self.at(line),
                    msg: format!("unknown column '{h}'"),
                });
            };
            if idx[c] != usize::MAX {
                return Err(ProfileError::Header {
                    at: self.at(line),
                    msg: format!("column '{h}' appears twice"),
                });
            }
            idx[c] = i;
        }
        if let Some(c) = idx.iter().position(|&i| i == usize::MAX) {
            return Err(ProfileError::Header {
                at: self.at(line),
                msg: format!("missing column '{}'", COLUMNS[c]),
            });
        }
        Ok(idx)
    }

    /// One data row from its fields (by [`COLUMNS`] index).
    fn row<'a>(&self, line: usize, get: impl Fn(usize) -> &'a str) -> Result<Row, ProfileError> {
        let value = |column: &'static str, v: &str, msg: String| ProfileError::Value {
            at: self.at(line),
            column,
            value: v.to_string(),
            msg,
        };
        let int = |c: usize, min: usize| -> Result<usize, ProfileError> {
            let v = get(c);
            match v.parse::<usize>() {
                Ok(x) if x >= min => Ok(x),
                _ => Err(value(
                    COLUMNS[c],
                    v,
                    format!("is not an integer >= {min}; re-run {SCRIPT}"),
                )),
            }
        };
        let method = get(0);
        let is_copy = method == COPY;
        if !is_copy && !registry::METHODS.contains(&method) {
            return Err(ProfileError::UnknownMethod {
                at: self.at(line),
                value: method.to_string(),
                allowed: registry::METHODS.join(", "),
            });
        }
        let stage_s = get(1);
        let stage = match (is_copy, parse_stage(stage_s)) {
            (false, Some(s)) => Some(s),
            (true, None) if stage_s == COPY => None,
            (false, _) => {
                return Err(ProfileError::UnknownStage {
                    at: self.at(line),
                    method: method.to_string(),
                    value: stage_s.to_string(),
                    want: "write compress or decompress (copy only on copy rows)",
                })
            }
            (true, _) => {
                return Err(ProfileError::UnknownStage {
                    at: self.at(line),
                    method: method.to_string(),
                    value: stage_s.to_string(),
                    want: "copy rows have stage copy",
                })
            }
        };
        let round = int(2, 0)?;
        let phase = int(3, 0)?;
        let rows = int(4, 1)?;
        let cols = int(5, 1)?;
        let world_size = int(6, 1)?;
        let t = get(7);
        let time_s = match t.parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => x,
            Ok(x) if x < 0.0 => {
                return Err(value(
                    "time_s",
                    t,
                    format!("is negative: times are seconds >= 0; re-run {SCRIPT}"),
                ))
            }
            _ => {
                return Err(value(
                    "time_s",
                    t,
                    format!("is not a time: write a finite number of seconds >= 0, e.g. 0.00012; re-run {SCRIPT}"),
                ))
            }
        };
        if is_copy {
            for (c, v) in [(2, round), (3, phase)] {
                if v != 0 {
                    return Err(value(COLUMNS[c], get(c), "must be 0 on copy rows".into()));
                }
            }
            if rows != 1 {
                return Err(value(
                    "rows",
                    get(4),
                    "must be 1 on copy rows (cols is the number of elements copied)".into(),
                ));
            }
        }
        Ok(Row {
            method: method.to_string(),
            stage,
            round,
            phase,
            rows,
            cols,
            world_size,
            time_s,
        })
    }

    /// Add a row (as read from line `line`; 0 when built in code).
    fn insert_at(&mut self, row: Row, line: usize) -> Result<(), ProfileError> {
        let bad = |column: &'static str, v: String, msg: String| ProfileError::Value {
            at: self.at(line),
            column,
            value: v,
            msg,
        };
        if !row.time_s.is_finite() || row.time_s < 0.0 {
            return Err(bad(
                "time_s",
                row.time_s.to_string(),
                format!("is not a time: seconds >= 0; re-run {SCRIPT}"),
            ));
        }
        if row.time_s > MAX_STAGE_S {
            return Err(bad(
                "time_s",
                row.time_s.to_string(),
                format!("is more than {MAX_STAGE_S} s for one stage of one tensor: times are seconds (not microseconds); re-run {SCRIPT}"),
            ));
        }
        if row.rows == 0 || row.cols == 0 || row.world_size == 0 {
            return Err(bad(
                "rows",
                format!("{}x{} at world size {}", row.rows, row.cols, row.world_size),
                "rows, cols and world_size are >= 1".into(),
            ));
        }
        let key = match row.stage {
            None => {
                if row.method != COPY || row.rows != 1 || row.round != 0 || row.phase != 0 {
                    return Err(bad(
                        "method",
                        row.method.clone(),
                        "a row without a stage is a copy row: method copy, round 0, phase 0, rows 1".into(),
                    ));
                }
                format!(
                    "copy row of {} elements at world size {}",
                    row.cols, row.world_size
                )
            }
            Some(stage) => {
                let Some((rounds, phases, _)) = method_info(&row.method) else {
                    return Err(ProfileError::UnknownMethod {
                        at: self.at(line),
                        value: row.method.clone(),
                        allowed: registry::METHODS.join(", "),
                    });
                };
                for (column, v, limit) in
                    [("round", row.round, rounds), ("phase", row.phase, phases)]
                {
                    if v >= limit {
                        return Err(ProfileError::OutOfRange {
                            at: self.at(line),
                            column,
                            method: row.method.clone(),
                            value: v,
                            limit,
                        });
                    }
                }
                format!(
                    "{} {} row of shape {}x{} (round {}, phase {}) at world size {}",
                    row.method,
                    stage.name(),
                    row.rows,
                    row.cols,
                    row.round,
                    row.phase,
                    row.world_size
                )
            }
        };
        if let Some(&first) = self.lines.get(&key) {
            return Err(ProfileError::Duplicate {
                at: self.at(line),
                row: key,
                first,
            });
        }
        self.lines.insert(key, line);
        match row.stage {
            None => {
                self.copies.insert((row.cols, row.world_size), row.time_s);
            }
            Some(stage) => {
                self.times
                    .entry(row.method)
                    .or_default()
                    .entry((stage_code(stage), row.round, row.phase, row.rows, row.cols))
                    .or_default()
                    .insert(row.world_size, row.time_s);
            }
        }
        Ok(())
    }

    /// Add a row built in code (validated as a row read from a file would be).
    pub fn insert(&mut self, row: Row) -> Result<(), ProfileError> {
        if row.method != COPY && !registry::METHODS.contains(&row.method.as_str()) {
            return Err(ProfileError::UnknownMethod {
                at: self.at(0),
                value: row.method,
                allowed: registry::METHODS.join(", "),
            });
        }
        self.insert_at(row, 0)
    }
}
