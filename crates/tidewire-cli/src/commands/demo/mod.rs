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

/// The longest one transport's walkthrough may take.
const TRANSPORT_LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// How long the server takes for each URL, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    delay_ms: u64,

    /// Which protocol era the client speaks: `legacy` (initialize, the default), `modern` (the
    /// stateless revision 2026-07-28) or `auto`. Legacy HTTP+SSE always speaks the session era.
    #[arg(long, value_name = "ERA", default_value = "legacy", value_parser = parse_era)]
    era: CliEra,
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
    for transport in Transport::ALL {
        let row = match tokio::time::timeout(TRANSPORT_LIMIT, one(transport, &args, &ui)).await {
            Ok(Ok(walk)) => Row::Ran(walk),
            Ok(Err(problem)) => Row::Failed(problem),
            Err(_) => Row::Failed(format!("did not finish within {TRANSPORT_LIMIT:?}")),
        };
        rows.push((transport, row));
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
    for (transport, row) in &rows {
        let problems = match row {
            Row::Failed(problem) => vec![problem.clone()],
            Row::Ran(walk) => walk.problems(),
        };
        for problem in problems {
            output::out(&format!(
                "{}: {}",
                transport.name(),
                output::one_line(&problem)
            ));
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    if behaved {
        output::out(&format!(
            "Every transport in this build behaved: each server stopped within the URL in flight \
             and sent nothing after the cancel ({seconds:.1} s)."
        ));
        Ok(Outcome::Success)
    } else {
        Err(CliError::new(format!(
            "the demo failed on at least one transport (see above; {seconds:.1} s)"
        )))
    }
}

const HEADER: [&str; 6] = [
    "TRANSPORT",
    "PROGRESS",
    "CRAWL STOPPED",
    "CANCEL TO STOP",
    "AFTER CANCEL",
    "RESULT",
];

fn cells(transport: Transport, row: &Row) -> Vec<String> {
    let name = transport.name().to_owned();
    match row {
        Row::Failed(_) => vec![
            name,
            "-".to_owned(),
            "-".to_owned(),
            "-".to_owned(),
            "-".to_owned(),
            "FAILED".to_owned(),
        ],
        Row::Ran(walk) => vec![
            name,
            format!("{} received", walk.reports + walk.late.len() as u64),
            stopped(walk),
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
        ],
    }
}

/// Where the crawl stopped, like `in URL 4/10 (3 done)`.
fn stopped(walk: &Walk) -> String {
    let status = &walk.status;
    if status.cancelled {
        format!(
            "in URL {}/{} ({} done)",
            status.completed + 1,
            status.total,
            status.completed
        )
    } else {
        format!("finished all {}", status.total)
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

/// Starts the server for `transport`, connects, walks through, and stops it.
async fn one(transport: Transport, args: &DemoArgs, ui: &Ui) -> Result<Walk, String> {
    let running: Running = servers::start(transport).await?;
    let arrivals = Arrivals::default();
    // The deprecated HTTP+SSE transport carries sessions only.
    let era = if transport == Transport::LegacySse {
        CliEra::Legacy
    } else {
        args.era
    };
    let connect = ConnectArgs {
        era,
        ..ConnectArgs::default()
    };
    let connection = connect_observed(&running.target, &connect, ui, Some(arrivals.observer()))
        .await
        .map_err(|e| e.to_string());
    let result = match connection {
        Ok(connection) => {
            let mut view = ui.progress(transport.name(), 15);
            let walk = walk::walk(&connection.client, &arrivals, &mut view, args.delay_ms).await;
            let summary = match &walk {
                Ok(walk) => format!(
                    "cancelled after {}/{URLS}; the server stopped {} ({} after the cancel)",
                    walk.reports,
                    stopped(walk),
                    stop_time(walk.stop_ms)
                ),
                Err(problem) => format!("failed: {}", sanitize::line(problem)),
            };
            view.finish(&summary);
            if !ui.is_interactive() {
                ui.line(&format!("{}: {summary}", transport.name()));
            }
            connection.close().await;
            walk
        }
        Err(problem) => Err(problem),
    };
    running.stop().await;
    result
}
