//! The results table: per row, each server's median with min–max over the rounds, and the ratio
//! of tidewire's median to rmcp's and to the ceiling's.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::stats::Summary;

/// A server under measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Peer {
    /// tidewire (`bench-server`).
    Tidewire,
    /// The official Rust SDK (`rmcp-bench-server`).
    Rmcp,
    /// The plain handler with no MCP machinery (`ceiling-server`).
    Ceiling,
}

impl Peer {
    /// All peers, in the order they run in each round and appear in the table.
    pub const ALL: [Peer; 3] = [Peer::Tidewire, Peer::Rmcp, Peer::Ceiling];

    /// The column name.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Tidewire => "tidewire",
            Peer::Rmcp => "rmcp",
            Peer::Ceiling => "ceiling",
        }
    }
}

/// Which way is better for a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Throughput: more is better.
    Higher,
    /// Latency, CPU, memory: less is better.
    Lower,
}

/// One row: a metric measured on every peer over several rounds.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// A stable key for machines, e.g. `echo_sse_c32_rps`.
    pub key: String,
    /// What a person reads, e.g. `echo, SSE, 32 sessions`.
    pub label: String,
    /// The unit, e.g. `req/s`.
    pub unit: String,
    /// Which way is better.
    pub better: Better,
    /// One value per round, per peer (a peer that was not measured has no entry).
    pub values: BTreeMap<Peer, Vec<f64>>,
}

impl Row {
    /// An empty row.
    pub fn new(key: &str, label: &str, unit: &str, better: Better) -> Self {
        Self {
            key: key.to_owned(),
            label: label.to_owned(),
            unit: unit.to_owned(),
            better,
            values: BTreeMap::new(),
        }
    }

    /// Records one round's value for `peer`.
    pub fn push(&mut self, peer: Peer, value: f64) {
        self.values.entry(peer).or_default().push(value);
    }

    /// The summary of `peer`'s rounds.
    pub fn summary(&self, peer: Peer) -> Option<Summary> {
        self.values.get(&peer).and_then(|v| Summary::of(v))
    }

    /// tidewire's median divided by `other`'s median (`None` when either is missing or the
    /// divisor is zero). Read it with [`Row::better`]: above 1 is better for throughput, below 1
    /// for latency, CPU and memory.
    pub fn ratio(&self, other: Peer) -> Option<f64> {
        let ours = self.summary(Peer::Tidewire)?.median;
        let theirs = self.summary(other)?.median;
        (theirs != 0.0).then(|| ours / theirs)
    }
}

/// Formats a value with three significant digits, thousands separated: `123,456`, `12.3`,
/// `0.123`.
pub fn format_value(v: f64) -> String {
    if !v.is_finite() {
        return "–".to_owned();
    }
    let a = v.abs();
    if a >= 1000.0 {
        let rounded = v.round() as i64;
        group_thousands(rounded)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn group_thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

/// A ratio as `1.23×`, or `–`.
pub fn format_ratio(r: Option<f64>) -> String {
    match r {
        Some(r) if r.is_finite() => format!("{r:.2}×"),
        _ => "–".to_owned(),
    }
}

fn cell(summary: Option<Summary>) -> String {
    match summary {
        Some(s) if s.n > 1 => format!(
            "{} ({}–{})",
            format_value(s.median),
            format_value(s.min),
            format_value(s.max)
        ),
        Some(s) => format_value(s.median),
        None => "–".to_owned(),
    }
}

/// The table, in Markdown: one line per row, medians with min–max, and the ratios.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| metric | unit | tidewire | rmcp | ceiling | tidewire ÷ rmcp | tidewire ÷ ceiling |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|---:|\n");
    for row in rows {
        let arrow = match row.better {
            Better::Higher => "↑",
            Better::Lower => "↓",
        };
        let _ = writeln!(
            out,
            "| {} | {} {} | {} | {} | {} | {} | {} |",
            row.label,
            row.unit,
            arrow,
            cell(row.summary(Peer::Tidewire)),
            cell(row.summary(Peer::Rmcp)),
            cell(row.summary(Peer::Ceiling)),
            format_ratio(row.ratio(Peer::Rmcp)),
            format_ratio(row.ratio(Peer::Ceiling)),
        );
    }
    out
}

/// The machine-readable form of a row: summaries and ratios beside the raw values.
#[derive(Debug, Serialize)]
struct JsonRow<'a> {
    #[serde(flatten)]
    row: &'a Row,
    summary: BTreeMap<Peer, Summary>,
    ratio_to_rmcp: Option<f64>,
    ratio_to_ceiling: Option<f64>,
}

/// The rows as JSON: `{"meta": …, "rows": [{key, label, unit, better, values, summary,
/// ratio_to_rmcp, ratio_to_ceiling}]}`.
pub fn json(rows: &[Row], meta: serde_json::Value) -> serde_json::Value {
    let rows: Vec<JsonRow<'_>> = rows
        .iter()
        .map(|row| JsonRow {
            row,
            summary: Peer::ALL
                .iter()
                .filter_map(|&p| row.summary(p).map(|s| (p, s)))
                .collect(),
            ratio_to_rmcp: row.ratio(Peer::Rmcp),
            ratio_to_ceiling: row.ratio(Peer::Ceiling),
        })
        .collect();
    serde_json::json!({ "meta": meta, "rows": rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        let mut row = Row::new(
            "echo_sse_c1_rps",
            "echo, SSE, 1 session",
            "req/s",
            Better::Higher,
        );
        for v in [10_000.0, 12_000.0, 11_000.0] {
            row.push(Peer::Tidewire, v);
        }
        for v in [5_000.0, 5_500.0, 6_000.0] {
            row.push(Peer::Rmcp, v);
        }
        for v in [20_000.0, 22_000.0] {
            row.push(Peer::Ceiling, v);
        }
        row
    }

    #[test]
    fn ratio_of_medians() {
        let row = row();
        assert_eq!(row.ratio(Peer::Rmcp), Some(2.0));
        let to_ceiling = row.ratio(Peer::Ceiling).expect("ratio");
        assert!((to_ceiling - 11.0 / 21.0).abs() < 1e-12, "{to_ceiling}");
        let mut partial = Row::new("k", "l", "u", Better::Lower);
        partial.push(Peer::Tidewire, 1.0);
        assert_eq!(partial.ratio(Peer::Rmcp), None);
        partial.push(Peer::Rmcp, 0.0);
        assert_eq!(partial.ratio(Peer::Rmcp), None, "no division by zero");
    }

    #[test]
    fn values_are_formatted_for_people() {
        assert_eq!(format_value(123_456.4), "123,456");
        assert_eq!(format_value(1_000.0), "1,000");
        assert_eq!(format_value(999.6), "1000");
        assert_eq!(format_value(250.2), "250");
        assert_eq!(format_value(12.34), "12.3");
        assert_eq!(format_value(0.1234), "0.12");
        assert_eq!(format_value(-12_345.0), "-12,345");
        assert_eq!(format_value(f64::NAN), "–");
        assert_eq!(format_ratio(Some(2.0)), "2.00×");
        assert_eq!(format_ratio(None), "–");
    }

    #[test]
    fn markdown_table_has_medians_ranges_and_ratios() {
        let table = markdown(&[row()]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("| metric | unit | tidewire | rmcp | ceiling |"));
        assert_eq!(
            lines[2],
            "| echo, SSE, 1 session | req/s ↑ | 11,000 (10,000–12,000) | 5,500 (5,000–6,000) \
             | 21,000 (20,000–22,000) | 2.00× | 0.52× |"
        );
        // A single round has no range; a missing peer is a dash.
        let mut single = Row::new("k", "one", "KiB", Better::Lower);
        single.push(Peer::Tidewire, 20.0);
        let table = markdown(&[single]);
        assert!(
            table.contains("| one | KiB ↓ | 20.0 | – | – | – | – |"),
            "{table}"
        );
    }

    #[test]
    fn json_carries_values_summaries_and_ratios() {
        let value = json(&[row()], serde_json::json!({"mode": "quick"}));
        assert_eq!(value["meta"]["mode"], "quick");
        let r = &value["rows"][0];
        assert_eq!(r["key"], "echo_sse_c1_rps");
        assert_eq!(r["better"], "higher");
        assert_eq!(r["values"]["rmcp"][1], 5_500.0);
        assert_eq!(r["summary"]["tidewire"]["median"], 11_000.0);
        assert_eq!(r["ratio_to_rmcp"], 2.0);
    }
}
