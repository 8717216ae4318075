//! `tidewire demo`: the crawl-and-cancel walkthrough on every transport in this build, then a
//! table of what happened.

mod servers;
mod walk;

use std::time::{Duration, Instant};

use clap::Args;

use self::servers::{Running, Transport};
use self::walk::{Arrivals, CANCEL_AFTER, URLS, Walk};
use crate::connect::{CliEra, ConnectArgs, connect_observed, parse_era};
use crate::error::{CliError, Outcome};
use crate::output::{self, table};
use crate::sanitize;
use crate::ui::{Ui, bold};
use tidewire_demo::CrawlStop;

/// The longest one transport's walkthrough may take.
const TRANSPORT_LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// How long the server takes for each URL, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    delay_ms: u64,

    /// Only this protocol era: `legacy` (initialize and a session), `modern` (the stateless
    /// revision 2026-07-28) or `auto`. By default the demo runs both eras on every transport
    /// that carries them; legacy HTTP+SSE always speaks the session era.
    #[arg(long, value_name = "ERA", value_parser = parse_era)]
    era: Option<CliEra>,
}

/// The transports and eras the demo runs, in order: each transport in each era it carries.
fn plan(only: Option<CliEra>) -> Vec<(Transport, CliEra)> {
    let mut plan = Vec::new();
    for transport in Transport::ALL {
        let eras: &[CliEra] = match (transport, only) {
            (Transport::LegacySse, _) => &[CliEra::Legacy],
            (_, Some(era)) => &[era],
            (_, None) => &[CliEra::Legacy, CliEra::Modern],
        };
        plan.extend(eras.iter().map(|era| (transport, *era)));
    }
    plan
}

fn era_name(era: CliEra) -> &'static str {
    match era {
        CliEra::Legacy => "session",
        CliEra::Modern => "2026-07-28",
        CliEra::Auto => "auto",
    }
}

/// One row of the final table.
#[derive(Debug)]
enum Row {
    Failed(String),
    Ran(Walk),
}

pub(crate) async fn run(args: DemoArgs, ui: Ui) -> Result<Outcome, CliError> {
    let started = Instant::now();
    ui.line(&bold(&format!(
        "tidewire demo: on each transport, crawl {URLS} slow URLs ({} ms each), cancel after \
         the {}rd progress notification, and check where the server stopped",
        args.delay_ms, CANCEL_AFTER
    )));
    let mut rows = Vec::new();
    for (transport, era) in plan(args.era) {
        let walked = tokio::time::timeout(TRANSPORT_LIMIT, one(transport, era, &args, &ui));
        let row = match walked.await {
            Ok(Ok(walk)) => Row::Ran(walk),
            Ok(Err(problem)) => Row::Failed(problem),
            Err(_) => Row::Failed(format!("did not finish within {TRANSPORT_LIMIT:?}")),
        };
        rows.push(((transport, era), row));
    }
    let behaved = rows.iter().all(|(_, row)| match row {
        Row::Failed(_) => false,
        Row::Ran(walk) => walk.problems().is_empty(),
    });
    output::out("");
    output::block(&table(
        &HEADER,
        &rows.iter().map(|(t, r)| cells(*t, r)).collect::<Vec<_>>(),
        None,
    ));
    output::out("");
    for ((transport, era), row) in &rows {
        let problems = match row {
            Row::Failed(problem) => vec![problem.clone()],
            Row::Ran(walk) => walk.problems(),
        };
        for problem in problems {
            output::out(&format!(
                "{} ({}): {}",
                transport.name(),
                era_name(*era),
                output::one_line(&problem)
            ));
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    if behaved {
        output::out(&format!(
            "Every transport in this build behaved, in every era: each crawl saw the cancel, \
             finished the URL in flight and returned, and nothing came after the cancel \
             ({seconds:.1} s)."
        ));
        Ok(Outcome::Success)
    } else {
        Err(CliError::new(format!(
            "the demo failed on at least one transport (see above; {seconds:.1} s)"
        )))
    }
}

const HEADER: [&str; 8] = [
    "TRANSPORT",
    "ERA",
    "PROGRESS",
    "CRAWL STOPPED",
    "HOW",
    "CANCEL TO STOP",
    "AFTER CANCEL",
    "RESULT",
];

fn cells((transport, era): (Transport, CliEra), row: &Row) -> Vec<String> {
    let mut cells = vec![transport.name().to_owned(), era_name(era).to_owned()];
    match row {
        Row::Failed(_) => {
            cells.extend(["-", "-", "-", "-", "-"].map(str::to_owned));
            cells.push("FAILED".to_owned());
        }
        Row::Ran(walk) => cells.extend([
            format!("{} received", walk.reports + walk.late.len() as u64),
            stopped(walk),
            how(walk).to_owned(),
            stop_time(walk.stop_ms),
            if walk.late.is_empty() {
                "nothing".to_owned()
            } else {
                output::one_line(&walk.late.join(", ")).into_owned()
            },
            if walk.problems().is_empty() {
                "ok"
            } else {
                "FAILED"
            }
            .to_owned(),
        ]),
    }
    cells
}

/// Where the crawl stopped: `after URL 4/10` (it finished the URL in flight, then returned),
/// `in URL 4/10` (it was dropped there), or `finished all 10`.
fn stopped(walk: &Walk) -> String {
    let status = &walk.status;
    match status.stopped {
        Some(CrawlStop::Completed) | None if !status.cancelled => {
            format!("finished all {}", status.total)
        }
        Some(CrawlStop::Cooperative) => format!("after URL {}/{}", status.completed, status.total),
        _ => format!("in URL {}/{}", status.completed + 1, status.total),
    }
}

/// How the crawl stopped, as the server says.
fn how(walk: &Walk) -> &'static str {
    match walk.status.stopped {
        Some(CrawlStop::Cooperative) => "cooperative",
        Some(CrawlStop::Dropped) => "dropped",
        Some(CrawlStop::Completed) => "completed",
        None => "unknown",
    }
}

fn stop_time(ms: Option<f64>) -> String {
    match ms {
        // The server's clock has whole milliseconds, so a stop within the same millisecond can
        // come out slightly negative.
        Some(ms) if ms < 1.0 => "< 1 ms".to_owned(),
        Some(ms) => format!("{ms:.0} ms"),
        None => "unknown".to_owned(),
    }
}

/// Starts the server for `transport`, connects in `era`, walks through, and stops it.
async fn one(transport: Transport, era: CliEra, args: &DemoArgs, ui: &Ui) -> Result<Walk, String> {
    let running: Running = servers::start(transport).await?;
    let arrivals = Arrivals::default();
    let connect = ConnectArgs {
        era,
        ..ConnectArgs::default()
    };
    let connection = connect_observed(&running.target, &connect, ui, Some(arrivals.observer()))
        .await
        .map_err(|e| e.to_string());
    let result = match connection {
        Ok(connection) => {
            let label = format!("{} ({})", transport.name(), era_name(era));
            let mut view = ui.progress(&label, 15);
            let walk = walk::walk(&connection.client, &arrivals, &mut view, args.delay_ms).await;
            let summary = match &walk {
                Ok(walk) => format!(
                    "cancelled after {}/{URLS}; the server stopped {} ({}, {} after the cancel)",
                    walk.reports,
                    stopped(walk),
                    how(walk),
                    stop_time(walk.stop_ms)
                ),
                Err(problem) => format!("failed: {}", sanitize::line(problem)),
            };
            view.finish(&summary);
            if !ui.is_interactive() {
                ui.line(&format!("{label}: {summary}"));
            }
            connection.close().await;
            walk
        }
        Err(problem) => Err(problem),
    };
    running.stop().await;
    result
}
