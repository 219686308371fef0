//! The command line: which cases run, and where the results go.

use std::path::{Path, PathBuf};

/// Which cases run: every size and tile, a short selection, or only the target cases (signals
/// and images of 2^26 elements, and a 5 x 5 mask over a 4096^2 RGB image) with the fast designs
/// (register-tiled and separable).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Full,
    Quick,
    Targets,
}

pub(crate) struct Plan {
    pub(crate) scope: Scope,
    /// `Auto` against every design instead of `scope`'s cases (`--auto`).
    pub(crate) auto: bool,
    /// Host -> host calls against the transfer floor instead of `scope`'s cases (`--host`).
    pub(crate) host: bool,
    /// One host call split over 1 to N GPUs instead of `scope`'s cases (`--multi`).
    pub(crate) multi: bool,
    /// The N-D cases instead of `scope`'s (`--nd`).
    pub(crate) nd: bool,
    /// The element-type cases instead of `scope`'s (`--types`).
    pub(crate) types: bool,
    pub(crate) out_dir: PathBuf,
}

impl Plan {
    /// The run's mode, as the CSV header names it.
    pub(crate) fn mode(&self) -> &'static str {
        match (self.auto, self.scope) {
            _ if self.host => "host",
            _ if self.multi => "multi",
            _ if self.nd => "nd",
            _ if self.types => "types",
            (true, _) => "auto",
            (false, Scope::Full) => "full",
            (false, Scope::Quick) => "quick",
            (false, Scope::Targets) => "targets",
        }
    }
}

/// What the command line asks for.
pub(crate) enum Command {
    /// Measure `plan`'s cases; `only` (`1d` or `2d`; with `--host`, `2d` or `nd`) keeps some.
    Run { plan: Plan, only: Option<String> },
    /// Draw the plots of the CSV file `csv` into `dir`, measuring nothing (`--plot-only`).
    PlotOnly { csv: PathBuf, dir: PathBuf },
}

/// Parses the arguments (without the program name).
pub(crate) fn parse(mut args: impl Iterator<Item = String>) -> Result<Command, String> {
    let mut plan = Plan {
        scope: Scope::Full,
        auto: false,
        host: false,
        multi: false,
        nd: false,
        types: false,
        out_dir: PathBuf::from("bench-results"),
    };
    let mut only: Option<String> = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => plan.scope = Scope::Quick,
            "--targets" => plan.scope = Scope::Targets,
            "--auto" => plan.auto = true,
            "--host" => plan.host = true,
            "--multi" => plan.multi = true,
            "--nd" => plan.nd = true,
            "--types" => plan.types = true,
            "--out" => plan.out_dir = PathBuf::from(args.next().ok_or("--out needs a directory")?),
            "--only" => only = Some(args.next().ok_or("--only needs 1d, 2d or nd")?),
            "--plot-only" => {
                let csv = PathBuf::from(args.next().ok_or("--plot-only needs a CSV file")?);
                let dir = csv.parent().unwrap_or(Path::new(".")).to_path_buf();
                return Ok(Command::PlotOnly { csv, dir });
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}` (--quick, --targets, --auto, --host, --multi, --nd, --types, --out DIR, \
                     --only 1d|2d|nd, --plot-only CSV)"
                ));
            }
        }
    }
    Ok(Command::Run { plan, only })
}
