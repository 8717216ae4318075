//! `tidewire read TARGET URI`: a resource's contents.

use std::path::PathBuf;

use clap::Args;

use super::{OutputArgs, TargetArgs};
use crate::connect::connect;
use crate::error::{CliError, Outcome, describe};
use crate::output::{self, Saver};
use crate::target::Operands;
use crate::ui::Ui;

const OPERANDS: Operands = Operands {
    required: 1,
    optional: None,
    usage: "URI",
};

#[derive(Debug, Args)]
pub(crate) struct ReadArgs {
    #[command(flatten)]
    target: TargetArgs,

    #[command(flatten)]
    output: OutputArgs,

    /// Where binary contents are saved, as new files (default: a new private directory under
    /// the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    save_dir: Option<PathBuf>,
}

impl ReadArgs {
    /// How the command prints: `--json`, `--quiet`, `--raw`.
    pub(crate) fn output(&self) -> OutputArgs {
        self.output
    }
}

pub(crate) async fn run(args: ReadArgs, ui: Ui) -> Result<Outcome, CliError> {
    let (target, operands) = args.target.split(OPERANDS)?;
    let uri = operands.first().cloned().unwrap_or_default();
    let connection = connect(&target, &args.target.connect, &ui).await?;
    let result = connection.client.read_resource(uri.clone()).await;
    connection.close().await;
    let result =
        result.map_err(|e| CliError::new(format!("reading {uri} failed: {}", describe(&e))))?;
    if args.output.json {
        output::json(&result)?;
    } else {
        let saver = Saver::new(args.save_dir, "resource");
        for contents in &result.contents {
            output::resource(contents, &saver)?;
        }
    }
    Ok(Outcome::Success)
}
