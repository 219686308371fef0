//! The command-line frame the `blur` and `convolve` examples share.

use std::process::ExitCode;

/// Parses the arguments with `parse`, then runs `run` on them. `--help` (which `parse` reports
/// as an empty message) prints `usage` and succeeds; bad arguments print the error and `usage`
/// and exit with 2; a failed run prints its error and exits with 1.
pub fn main<A>(
    usage: &str,
    parse: impl FnOnce() -> Result<A, String>,
    run: impl FnOnce(&A) -> Result<(), String>,
) -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(message) if message.is_empty() => {
            println!("{usage}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}\n{usage}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
