//! Byte sizes with binary suffixes (`4`, `64KiB`, `256MiB`) and human-readable output.

use std::fmt;

/// A size in bytes parsed from `N`, `NB`, `NKiB`, `NMiB`, `NGiB` (binary), or `NkB`,
/// `NMB`, `NGB` (powers of ten, as SI and the OSU benchmarks mean them); the letters are
/// case-insensitive. `N` may have a fraction (`1.5MiB`) when the size comes out a whole
/// number of bytes. A bare `K`, `M` or `G` is refused as ambiguous rather than guessed.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() || frac.contains('.') || (num.contains('.') && frac.is_empty()) {
        return Err(format!(
            "'{s}' is not a size: expected a number with an optional unit (e.g. 4, 64KiB, 1.5MiB, 256MiB)"
        ));
    }
    let unit = suffix.trim().to_ascii_lowercase();
    let mult: u64 = match unit.as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "k" | "m" | "g" => {
            return Err(format!(
                "'{s}': unit '{}' is ambiguous: write {num}{}iB (binary) or {num}{}B (powers of ten)",
                suffix.trim(),
                unit.to_ascii_uppercase(),
                if unit == "k" {
                    "k".to_string()
                } else {
                    unit.to_ascii_uppercase()
                }
            ));
        }
        other => {
            return Err(format!(
                "'{s}' has an unknown unit '{other}': use B, KiB, MiB, GiB (binary) or kB, MB, GB (powers of ten), e.g. 64KiB or 1.5MiB"
            ));
        }
    };
    let too_large = || format!("'{s}' is too large a size");
    if frac.len() > 18 {
        return Err(format!("'{s}': give at most 18 decimals"));
    }
    // Exact: (int.frac) x mult = (int x 10^d + frac) x mult / 10^d, in u128.
    let scale = 10u128.pow(frac.len() as u32);
    let digits = format!("{int}{frac}");
    let n: u128 = digits.parse().map_err(|_| too_large())?;
    let bytes = n.checked_mul(u128::from(mult)).ok_or_else(too_large)?;
    if bytes % scale != 0 {
        return Err(format!(
            "'{s}' is not a whole number of bytes ({} B); give a size that is",
            bytes as f64 / scale as f64
        ));
    }
    u64::try_from(bytes / scale).map_err(|_| too_large())
}

/// Bytes formatted with the largest binary unit that keeps an integer or one decimal.
pub struct HumanBytes(pub u64);

impl fmt::Display for HumanBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut v = self.0 as f64;
        let mut u = 0;
        while v >= 1024.0 && u + 1 < UNITS.len() {
            v /= 1024.0;
            u += 1;
        }
        if v.fract() == 0.0 {
            write!(f, "{}{}", v as u64, UNITS[u])
        } else {
            write!(f, "{:.1}{}", v, UNITS[u])
        }
    }
}

/// `n` and the noun, plural unless `n` is 1: `1 rank`, `4 ranks`.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Seconds formatted with an SI prefix (`12.3us`, `4.56ms`, `1.20s`).
pub fn fmt_seconds(s: f64) -> String {
    if !s.is_finite() {
        return format!("{s}");
    }
    let a = s.abs();
    if a < 1e-6 {
        format!("{:.1}ns", s * 1e9)
    } else if a < 1e-3 {
        format!("{:.2}us", s * 1e6)
    } else if a < 1.0 {
        format!("{:.3}ms", s * 1e3)
    } else {
        format!("{:.2}s", s)
    }
}

/// Current UTC time as `YYYY-MM-DDTHH:MM:SSZ` and a compact form for directory names
/// (`YYYYMMDD-HHMMSS`). Civil-from-days after H. Hinnant's algorithm.
pub fn utc_now() -> (String, String) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    utc_from_unix(secs)
}

/// See [`utc_now`].
pub fn utc_from_unix(secs: u64) -> (String, String) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (hh, mm, ss) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z"),
        format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}"),
    )
}

/// Longest message text echoed back (bytes): a value pasted by mistake (a 3 MB key)
/// is shown by its start and end, not in full, so an error stays one readable line.
pub const MAX_ECHO_BYTES: usize = 1000;

/// `msg` cut to about [`MAX_ECHO_BYTES`]: its start and end, and how much was left out.
pub fn clip(msg: &str) -> String {
    if msg.len() <= MAX_ECHO_BYTES {
        return msg.to_string();
    }
    let floor = |mut i: usize| {
        while !msg.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let head = floor(MAX_ECHO_BYTES * 3 / 5);
    let tail = floor(msg.len() - MAX_ECHO_BYTES / 4);
    format!(
        "{} [... {} bytes left out ...] {}",
        &msg[..head],
        tail - head,
        &msg[tail..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_bytes("4"), Ok(4));
        assert_eq!(parse_bytes("64KiB"), Ok(65536));
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        // powers of ten where the unit says so, never a silent reinterpretation
        assert_eq!(parse_bytes("25MB"), Ok(25_000_000));
        assert_eq!(parse_bytes("4kB"), Ok(4_000));
        assert_eq!(parse_bytes("25mib"), Ok(25 << 20));
        for amb in ["1g", "25M", "4k"] {
            let e = parse_bytes(amb).unwrap_err();
            assert!(e.contains("ambiguous"), "{amb}: {e}");
        }
        assert!(parse_bytes("abc").is_err());
        assert!(parse_bytes("12XB").is_err());
        assert!(parse_bytes("-4").is_err());
        assert!(parse_bytes("99999999999999999999").is_err());
        assert!(parse_bytes("99999999999GiB").is_err());
        // A fraction where the size is a whole number of bytes.
        assert_eq!(parse_bytes("1.5MiB"), Ok(3 << 19));
        assert_eq!(parse_bytes("0.5KiB"), Ok(512));
        assert_eq!(parse_bytes("2.5MB"), Ok(2_500_000));
        let e = parse_bytes("1.3B").unwrap_err();
        assert!(e.contains("not a whole number of bytes"), "{e}");
        for bad in ["1.", ".5MiB", "1.2.3MiB"] {
            let e = parse_bytes(bad).unwrap_err();
            assert!(e.contains("not a size"), "{bad}: {e}");
        }
        let e = parse_bytes("1.5m").unwrap_err();
        assert!(e.contains("ambiguous") && e.contains("1.5MiB"), "{e}");
    }

    #[test]
    fn formats() {
        assert_eq!(HumanBytes(4).to_string(), "4B");
        assert_eq!(HumanBytes(65536).to_string(), "64KiB");
        assert_eq!(HumanBytes(1536).to_string(), "1.5KiB");
        assert_eq!(fmt_seconds(1.5e-6), "1.50us");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(utc_from_unix(0).0, "1970-01-01T00:00:00Z");
        assert_eq!(utc_from_unix(1_795_000_000).0, "2026-11-18T11:06:40Z");
        assert_eq!(utc_from_unix(951_782_400).1, "20000229-000000");
    }
}
