//! The command-line frame the `blur` and `convolve` examples share.

use std::collections::HashSet;
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

/// The flags a command line has given so far: each may be given once.
#[derive(Default)]
pub struct Flags(HashSet<String>);

impl Flags {
    /// Notes `flag`; an error if it was given before (the second value would silently win).
    pub fn once(&mut self, flag: &str) -> Result<(), String> {
        if self.0.insert(flag.to_owned()) {
            Ok(())
        } else {
            Err(format!("{flag} is given twice"))
        }
    }

    /// Whether `flag` was given (`convolve` asks nothing back).
    #[allow(dead_code)]
    pub fn has(&self, flag: &str) -> bool {
        self.0.contains(flag)
    }
}
