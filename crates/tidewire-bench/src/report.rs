//! The results table: per row, each column's median with min–max over the rounds, and the
//! ratios of medians the column set names (tidewire to rmcp and to the ceiling; a replica on
//! Redis to one in memory).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::stats::Summary;

/// The columns of a table: what was measured side by side, and which ratios are shown.
pub trait Column: Copy + Ord + Serialize + std::fmt::Debug + 'static {
    /// Every column, in the order they appear in the table.
    const ALL: &'static [Self];
    /// The ratios shown, each `(numerator, denominator)`.
    const RATIOS: &'static [(Self, Self)];
    /// The column's name.
    fn name(self) -> &'static str;
}

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
    /// tidewire with telemetry on (`bench-server --otel`, a build with the feature `otel`):
    /// run beside [`Tidewire`](Peer::Tidewire) only when asked (`bench --otel`), so what
    /// telemetry costs is measured in the same run.
    #[serde(rename = "tidewire+otel")]
    TidewireOtel,
}

impl Peer {
    /// All peers, in the order they run in each round and appear in the table.
    pub const ALL: [Peer; 4] = [
        Peer::Tidewire,
        Peer::Rmcp,
        Peer::Ceiling,
        Peer::TidewireOtel,
    ];

    /// The peers a run has unless told otherwise: all but [`TidewireOtel`](Peer::TidewireOtel).
    pub const DEFAULT: [Peer; 3] = [Peer::Tidewire, Peer::Rmcp, Peer::Ceiling];

    /// The column name.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Tidewire => "tidewire",
            Peer::Rmcp => "rmcp",
            Peer::Ceiling => "ceiling",
            Peer::TidewireOtel => "tidewire+otel",
        }
    }
}

impl Column for Peer {
    const ALL: &'static [Self] = &Peer::ALL;
    const RATIOS: &'static [(Self, Self)] = &[
        (Peer::Tidewire, Peer::Rmcp),
        (Peer::Tidewire, Peer::Ceiling),
        (Peer::TidewireOtel, Peer::Tidewire),
    ];

    fn name(self) -> &'static str {
        Peer::name(self)
    }
}

/// A setup of the scale-out benchmark: tidewire replicas behind one load balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Setup {
    /// One replica, everything in its memory (the default server).
    #[serde(rename = "memory-1")]
    Memory1,
    /// One replica on Redis (bus, task store, key ring, session routing).
    #[serde(rename = "redis-1")]
    Redis1,
    /// Three replicas on one Redis, every request balanced on its own.
    #[serde(rename = "redis-3")]
    Redis3,
}

impl Setup {
    /// Every setup, in table order.
    pub const ALL: [Setup; 3] = [Setup::Memory1, Setup::Redis1, Setup::Redis3];

    /// How many replicas it runs.
    pub fn replicas(self) -> usize {
        match self {
            Setup::Memory1 | Setup::Redis1 => 1,
            Setup::Redis3 => 3,
        }
    }

    /// Whether its replicas share Redis.
    pub fn on_redis(self) -> bool {
        self != Setup::Memory1
    }
}

impl Column for Setup {
    const ALL: &'static [Self] = &Setup::ALL;
    const RATIOS: &'static [(Self, Self)] = &[
        (Setup::Redis1, Setup::Memory1),
        (Setup::Redis3, Setup::Memory1),
    ];

    fn name(self) -> &'static str {
        match self {
            Setup::Memory1 => "memory-1",
            Setup::Redis1 => "redis-1",
            Setup::Redis3 => "redis-3",
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

/// One row: a metric measured in every column over several rounds.
#[derive(Debug, Clone, Serialize)]
#[serde(bound = "")]
pub struct Row<C: Column = Peer> {
    /// A stable key for machines, e.g. `echo_sse_c32_rps`.
    pub key: String,
    /// What a person reads, e.g. `echo, SSE, 32 sessions`.
    pub label: String,
    /// The unit, e.g. `req/s`.
    pub unit: String,
    /// Which way is better.
    pub better: Better,
    /// One value per round, per column (a column that was not measured has no entry).
    pub values: BTreeMap<C, Vec<f64>>,
}

impl<C: Column> Row<C> {
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

    /// Records one round's value for `column`.
    pub fn push(&mut self, column: C, value: f64) {
        self.values.entry(column).or_default().push(value);
    }

    /// The summary of `column`'s rounds.
    pub fn summary(&self, column: C) -> Option<Summary> {
        self.values.get(&column).and_then(|v| Summary::of(v))
    }

    /// `of`'s median divided by `to`'s median (`None` when either is missing or the divisor is
    /// zero). Read it with [`Row::better`]: above 1 is better for throughput, below 1 for
    /// latency, CPU and memory.
    pub fn ratio_of(&self, of: C, to: C) -> Option<f64> {
        let ours = self.summary(of)?.median;
        let theirs = self.summary(to)?.median;
        (theirs != 0.0).then(|| ours / theirs)
    }
}

impl Row<Peer> {
    /// tidewire's median divided by `other`'s median (see [`Row::ratio_of`]).
    pub fn ratio(&self, other: Peer) -> Option<f64> {
        self.ratio_of(Peer::Tidewire, other)
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

/// The table, in Markdown: one line per row, each column's median with min–max, then the
/// ratios. A column no row measured (a peer the run left out) is left out, and so is a ratio
/// that needs it.
pub fn markdown<C: Column>(rows: &[Row<C>]) -> String {
    let measured = |column: &C| rows.iter().any(|row| row.values.contains_key(column));
    let columns: Vec<C> = C::ALL.iter().copied().filter(measured).collect();
    let ratios: Vec<(C, C)> = C::RATIOS
        .iter()
        .copied()
        .filter(|(of, to)| measured(of) && measured(to))
        .collect();
    let mut out = String::from("| metric | unit |");
    for column in &columns {
        let _ = write!(out, " {} |", column.name());
    }
    for (of, to) in &ratios {
        let _ = write!(out, " {} ÷ {} |", of.name(), to.name());
    }
    out.push_str("\n|---|---|");
    for _ in 0..columns.len() + ratios.len() {
        out.push_str("---:|");
    }
    out.push('\n');
    for row in rows {
        let arrow = match row.better {
            Better::Higher => "↑",
            Better::Lower => "↓",
        };
        let _ = write!(out, "| {} | {} {} |", row.label, row.unit, arrow);
        for &column in &columns {
            let _ = write!(out, " {} |", cell(row.summary(column)));
        }
        for &(of, to) in &ratios {
            let _ = write!(out, " {} |", format_ratio(row.ratio_of(of, to)));
        }
        out.push('\n');
    }
    out
}

/// The machine-readable form of a row: summaries and ratios beside the raw values.
#[derive(Debug, Serialize)]
#[serde(bound = "")]
struct JsonRow<'a, C: Column> {
    #[serde(flatten)]
    row: &'a Row<C>,
    summary: BTreeMap<C, Summary>,
    /// `ratio_to_<denominator>` for the first column's ratios (tidewire's, for the peers),
    /// `ratio_<numerator>_to_<denominator>` otherwise.
    #[serde(flatten)]
    ratios: BTreeMap<String, Option<f64>>,
}

/// The rows as JSON: `{"meta": …, "rows": [{key, label, unit, better, values, summary,
/// ratio_…}]}` (for the peers `ratio_to_rmcp`, `ratio_to_ceiling` and, with telemetry on
/// measured beside, `ratio_tidewire+otel_to_tidewire`; for the scale-out
/// setups `ratio_redis-1_to_memory-1` and `ratio_redis-3_to_memory-1`).
pub fn json<C: Column>(rows: &[Row<C>], meta: serde_json::Value) -> serde_json::Value {
    // The first column's ratios are named by their denominator alone (tidewire's:
    // `ratio_to_rmcp`); any other by both.
    let first = C::ALL.first().copied();
    let rows: Vec<JsonRow<'_, C>> = rows
        .iter()
        .map(|row| JsonRow {
            row,
            summary: C::ALL
                .iter()
                .filter_map(|&c| row.summary(c).map(|s| (c, s)))
                .collect(),
            ratios: C::RATIOS
                .iter()
                .map(|&(of, to)| {
                    let key = if Some(of) == first {
                        format!("ratio_to_{}", to.name())
                    } else {
                        format!("ratio_{}_to_{}", of.name(), to.name())
                    };
                    (key, row.ratio_of(of, to))
                })
                .collect(),
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
        // A single round has no range; a peer missing from a row is a dash, and a peer no
        // row measured has no column (nor do the ratios that need it).
        let mut single = Row::new("k", "one", "KiB", Better::Lower);
        single.push(Peer::Tidewire, 20.0);
        let mut other = Row::new("k2", "two", "KiB", Better::Lower);
        other.push(Peer::Tidewire, 10.0);
        other.push(Peer::Ceiling, 5.0);
        let table = markdown(&[single, other]);
        assert!(
            table.starts_with("| metric | unit | tidewire | ceiling | tidewire ÷ ceiling |\n"),
            "{table}"
        );
        assert!(table.contains("| one | KiB ↓ | 20.0 | – | – |"), "{table}");
        assert!(
            table.contains("| two | KiB ↓ | 10.0 | 5.00 | 2.00× |"),
            "{table}"
        );
    }

    #[test]
    fn telemetry_on_is_compared_with_telemetry_off() {
        let mut row = row();
        row.push(Peer::TidewireOtel, 9_900.0);
        let table = markdown(std::slice::from_ref(&row));
        assert!(
            table.contains("| tidewire+otel | tidewire ÷ rmcp | tidewire ÷ ceiling | tidewire+otel ÷ tidewire |"),
            "{table}"
        );
        assert!(
            table.contains("| 9,900 | 2.00× | 0.52× | 0.90× |"),
            "{table}"
        );
        let value = json(&[row], serde_json::json!({}));
        let r = &value["rows"][0];
        assert_eq!(
            r["ratio_to_rmcp"], 2.0,
            "tidewire's ratios keep their names"
        );
        assert_eq!(r["ratio_tidewire+otel_to_tidewire"], 0.9);
        assert_eq!(r["summary"]["tidewire+otel"]["median"], 9_900.0);
    }

    #[test]
    fn the_scale_out_table_compares_each_redis_setup_with_memory() {
        let mut row: Row<Setup> = Row::new("k", "echo", "req/s", Better::Higher);
        row.push(Setup::Memory1, 100.0);
        row.push(Setup::Redis1, 80.0);
        row.push(Setup::Redis3, 50.0);
        let table = markdown(&[row.clone()]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "| metric | unit | memory-1 | redis-1 | redis-3 | redis-1 ÷ memory-1 | redis-3 ÷ memory-1 |"
        );
        assert_eq!(lines[1], "|---|---|---:|---:|---:|---:|---:|");
        assert_eq!(
            lines[2],
            "| echo | req/s ↑ | 100 | 80.0 | 50.0 | 0.80× | 0.50× |"
        );
        let value = json(&[row], serde_json::json!({}));
        let r = &value["rows"][0];
        assert_eq!(r["values"]["redis-3"][0], 50.0);
        assert_eq!(r["ratio_redis-1_to_memory-1"], 0.8);
        assert_eq!(r["ratio_redis-3_to_memory-1"], 0.5);
        assert!(Setup::Redis3.on_redis() && !Setup::Memory1.on_redis());
        assert_eq!(Setup::Redis3.replicas(), 3);
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
