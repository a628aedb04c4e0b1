//! [`Comparison::write_svg`]: the sweep's chart, for people who would rather look than
//! read (feature `plot`).

use std::io;
use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::comparison::{Comparison, Estimate};
use crate::error::Ending;

/// One colour per variant, in order (repeats after eight).
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

fn other<E: std::fmt::Display>(e: E) -> io::Error {
    io::Error::other(e.to_string())
}

#[cfg_attr(docsrs, doc(cfg(feature = "plot")))]
impl Comparison {
    /// The chart as SVG text: the answered rate and (with a grader) the mean score per
    /// variant, each with its 95% interval as a whisker; below, the turn histogram
    /// (runs per `llm_calls` count, one bar per variant, the answered runs solid and
    /// the rest pale on top).
    ///
    /// # Errors
    /// A drawing error, as an I/O error of kind `Other`.
    pub fn svg(&self) -> io::Result<String> {
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (1100, 820)).into_drawing_area();
            root.fill(&WHITE).map_err(other)?;
            let (top, bottom) = root.split_vertically(400);
            let graded = self.variants.iter().any(|v| v.score.is_some());
            if graded {
                let (left, right) = top.split_horizontally(550);
                self.rates(&left, "answered rate (95% CI)", |v| v.answered)?;
                self.rates(&right, "mean score (95% CI)", |v| v.score)?;
            } else {
                self.rates(&top, "answered rate (95% CI)", |v| v.answered)?;
            }
            self.histogram(&bottom)?;
            root.present().map_err(other)?;
        }
        Ok(out)
    }

    /// Writes [`svg`](Self::svg) to a file.
    ///
    /// # Errors
    /// A drawing error, or the I/O error of writing the file.
    pub fn write_svg(&self, path: impl AsRef<Path>) -> io::Result<()> {
        std::fs::write(path, self.svg()?)
    }

    /// Bars of a `0..=1` estimate per variant, with whiskers.
    fn rates<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
        title: &str,
        pick: impl Fn(&super::VariantSummary) -> Option<Estimate>,
    ) -> io::Result<()>
    where
        DB::ErrorType: 'static,
    {
        // `(0..last).into_segmented()` has a segment per value of `0..=last`.
        let last = (self.variants.len() as i32 - 1).max(0);
        let names: Vec<&str> = self.variants.iter().map(|v| v.name.as_str()).collect();
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d((0..last).into_segmented(), 0.0..1.12)
            .map_err(other)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(names.len().max(1))
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => usize::try_from(*i)
                    .ok()
                    .and_then(|i| names.get(i))
                    .map_or_else(String::new, |s| (*s).to_owned()),
                SegmentValue::Last => String::new(),
            })
            .y_labels(12)
            .y_label_formatter(&|y| {
                if *y <= 1.0 + 1e-9 {
                    format!("{y:.1}")
                } else {
                    String::new()
                }
            })
            .y_desc("share of runs")
            .draw()
            .map_err(other)?;
        for (i, v) in self.variants.iter().enumerate() {
            let Some(e) = pick(v) else { continue };
            let x = i as i32;
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(x), 0.0),
                    (SegmentValue::Exact(x + 1), e.mean),
                ],
                colour(i).mix(0.8).filled(),
            );
            bar.set_margin(0, 0, 18, 18);
            let whisker = PathElement::new(
                vec![
                    (SegmentValue::CenterOf(x), e.low),
                    (SegmentValue::CenterOf(x), e.high),
                ],
                BLACK.stroke_width(2),
            );
            let label = Text::new(
                format!("{:.2}", e.mean),
                (SegmentValue::CenterOf(x), e.high + 0.015),
                ("sans-serif", 14)
                    .into_font()
                    .into_text_style(area)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            );
            chart.draw_series([bar]).map_err(other)?;
            chart.draw_series([whisker]).map_err(other)?;
            chart.draw_series([label]).map_err(other)?;
        }
        Ok(())
    }

    /// Runs per `llm_calls` count, grouped by variant.
    fn histogram<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> io::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let counts = |v: &super::VariantSummary, calls: u32| -> (usize, usize) {
            let answered = v.turns.count(Ending::Answered, calls);
            let all: usize = v
                .turns
                .histogram
                .values()
                .filter_map(|h| h.get(&calls))
                .sum();
            (answered, all)
        };
        let calls: Vec<u32> = self
            .variants
            .iter()
            .flat_map(|v| v.turns.histogram.values().flat_map(|h| h.keys().copied()))
            .collect();
        let lo = calls.iter().copied().min().unwrap_or(0);
        let hi = calls.iter().copied().max().unwrap_or(1).max(lo + 1);
        let top = self
            .variants
            .iter()
            .flat_map(|v| (lo..=hi).map(move |c| counts(v, c).1))
            .max()
            .unwrap_or(1)
            .max(1);
        // Headroom for the legend box (about 18 px a variant in a ~320 px plot).
        let legend_share = ((self.variants.len() as f64 * 18.0 + 20.0) / 320.0).min(0.6);
        let mut chart = ChartBuilder::on(area)
            .caption(
                "llm_calls per run (solid: answered; pale: other endings)",
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(
                (f64::from(lo) - 0.5)..(f64::from(hi) + 0.5),
                0.0..(top as f64 * 1.1 / (1.0 - legend_share)),
            )
            .map_err(other)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(usize::try_from(hi - lo + 1).unwrap_or(10).min(30))
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-6 {
                    format!("{x:.0}")
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| {
                if (y - y.round()).abs() < 1e-6 {
                    format!("{y:.0}")
                } else {
                    String::new()
                }
            })
            .x_desc("LLM calls per run")
            .y_desc("runs")
            .draw()
            .map_err(other)?;
        let nv = self.variants.len().max(1) as f64;
        let width = 0.8 / nv;
        for (j, v) in self.variants.iter().enumerate() {
            let c = colour(j);
            let mut bars = Vec::new();
            for calls in lo..=hi {
                let (answered, all) = counts(v, calls);
                if all == 0 {
                    continue;
                }
                let x0 = f64::from(calls) - 0.4 + j as f64 * width;
                let x1 = x0 + width;
                bars.push(Rectangle::new(
                    [(x0, 0.0), (x1, answered as f64)],
                    c.filled(),
                ));
                if all > answered {
                    bars.push(Rectangle::new(
                        [(x0, answered as f64), (x1, all as f64)],
                        c.mix(0.3).filled(),
                    ));
                }
            }
            let legend = format!(
                "{} (suggested max_llm_calls {})",
                v.name,
                v.turns
                    .suggested_max_llm_calls
                    .map_or_else(|| "n/a".to_owned(), |s| s.to_string())
            );
            chart
                .draw_series(bars)
                .map_err(other)?
                .label(legend)
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], c.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(other)?;
        Ok(())
    }
}
