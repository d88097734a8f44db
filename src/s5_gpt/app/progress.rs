//! Tool layer. Progress on stderr while stage 5 trains or evaluates: a bar with the step, the
//! smoothed loss, steps per second and the time left. It is drawn only when stderr is a terminal,
//! so logs and pipes stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// How much of the smoothed loss each new step replaces: an average over roughly the last 100
/// steps.
const SMOOTHING: f64 = 0.01;

pub struct Progress {
    bar: ProgressBar,
    smoothed: Option<f64>,
}

impl Progress {
    /// A bar named `what` for `total` steps of which `done` are behind us; hidden unless `visible`.
    /// `unit` names a step in the rate ("steps", "batches").
    pub fn new(what: &str, unit: &str, (done, total): (usize, usize), visible: bool) -> Self {
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let template = format!(
            "{{prefix}} [{{bar:30}}] {{pos}}/{{len}}, {{rate}} {unit}/s, ETA {{eta}}  {{msg}}"
        );
        let style = ProgressStyle::with_template(&template)
            .expect("the template is valid")
            .with_key(
                "rate",
                |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.0}", state.per_sec());
                },
            )
            .progress_chars("=> ");
        let bar = ProgressBar::with_draw_target(Some(total as u64), target)
            .with_style(style)
            .with_prefix(what.to_string())
            .with_position(done as u64);
        bar.reset_eta();
        Progress {
            bar,
            smoothed: None,
        }
    }

    /// One more step done, with its loss (if it has one).
    pub fn step(&mut self, loss: Option<f32>) {
        if let Some(loss) = loss {
            let loss = f64::from(loss);
            let s = self.smoothed.map_or(loss, |s| s + SMOOTHING * (loss - s));
            self.smoothed = Some(s);
            if self.bar.position().is_multiple_of(20) {
                self.bar.set_message(format!("loss {s:.4}"));
            }
        }
        self.bar.inc(1);
    }

    /// Runs `print` with the bar out of the way, so that a line on stdout does not cut through it.
    pub fn suspend<R>(&self, print: impl FnOnce() -> R) -> R {
        self.bar.suspend(print)
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
