//! What the stage examples share: the `--seed` flag, and turning an error into one line and an exit
//! code.

use std::ffi::OsString;
use std::fmt::Display;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};

use crate::BookSeeds;

/// The flags of the chapter-3 examples (stages 1–4).
#[derive(Debug, Parser)]
pub struct SeedArgs {
    /// Use seed N wherever the chapter calls torch.manual_seed (123 and 789), to compare with your
    /// own PyTorch run. Without it, the book's seeds hold. Like PyTorch, N may be negative.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = torch_seed)]
    pub seed: Option<u64>,
}

/// Reads a seed as `torch.manual_seed` accepts it: any integer from −2⁶³ to 2⁶⁴ − 1, a negative one
/// wrapping to 2⁶⁴ + N.
fn torch_seed(text: &str) -> Result<u64, String> {
    let out_of_range = || format!("{text} is not an integer from -2^63 to 2^64-1");
    match text.strip_prefix('-') {
        Some(_) => text
            .parse::<i64>()
            .map(|n| n as u64)
            .map_err(|_| out_of_range()),
        None => text.parse::<u64>().map_err(|_| out_of_range()),
    }
}

impl SeedArgs {
    /// Parses the command line of example `name`, whose `--help` starts with `about`. A bad flag
    /// exits with clap's one-line error.
    pub fn parse_for(name: &'static str, about: &'static str) -> BookSeeds {
        Self::try_parse_for(name, about, std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// The seeds of example `name`'s command line `args` (its name first), or clap's error for it.
    /// The book's page reads a reader's seed with it, so it accepts and refuses what the example
    /// does.
    pub fn try_parse_for(
        name: &'static str,
        about: &'static str,
        args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    ) -> Result<BookSeeds, clap::Error> {
        let matches = Self::command()
            .name(name)
            .about(about)
            .try_get_matches_from(args)?;
        Ok(BookSeeds::new(Self::from_arg_matches(&matches)?.seed))
    }
}

/// Prints `error: …` on one line and fails, or succeeds quietly. A closed pipe (`… | head`) is not
/// an error.
pub fn exit_code<E: Display>(result: Result<(), E>) -> ExitCode {
    ExitCode::from(status(result))
}

/// [`exit_code`] as a number: 0 for success (or a closed pipe), 1 after printing the error.
pub fn status<E: Display>(result: Result<(), E>) -> u8 {
    match result {
        Ok(()) => 0,
        Err(e) if e.to_string().contains("Broken pipe") => 0,
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::torch_seed;

    #[test]
    fn seeds_wrap_as_torch_manual_seed_does() {
        assert_eq!(torch_seed("123"), Ok(123));
        assert_eq!(torch_seed("-3"), Ok(u64::MAX - 2));
        assert_eq!(torch_seed("18446744073709551615"), Ok(u64::MAX));
        assert!(torch_seed("abc").is_err());
        assert!(torch_seed("18446744073709551616").is_err());
    }
}
