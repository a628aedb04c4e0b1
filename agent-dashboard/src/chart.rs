//! Charts as inline SVG, drawn on the server (maud escapes every label). Each bar and
//! point carries its value in a `<title>` (a tooltip) and a `data-value` attribute.

use maud::{Markup, html};

const W: f64 = 760.0;
const H: f64 = 220.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 36.0;

/// One series of a chart: its name, its colour and a value per x label.
pub(crate) struct Series<'a, V> {
    pub(crate) name: &'a str,
    pub(crate) color: &'a str,
    pub(crate) values: Vec<V>,
}

fn plot_w() -> f64 {
    W - LEFT - RIGHT
}

fn plot_h() -> f64 {
    H - TOP - BOTTOM
}

/// A "nice" axis maximum at or above `max` (1, 2 or 5 times a power of ten).
fn nice(max: f64) -> f64 {
    if !max.is_finite() || max <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|v| *v >= max)
        .unwrap_or(max)
}

fn y_of(v: f64, max: f64) -> f64 {
    TOP + plot_h() * (1.0 - (v / max).clamp(0.0, 1.0))
}

/// The axes, the y ticks (0, half, max) and at most ~12 x labels.
fn frame(labels: &[String], max: f64, fmt: &dyn Fn(f64) -> String) -> Markup {
    let step = labels.len().div_ceil(12).max(1);
    let slot = plot_w() / labels.len().max(1) as f64;
    html! {
        line x1=(LEFT) y1=(TOP + plot_h()) x2=(W - RIGHT) y2=(TOP + plot_h()) stroke="#888" {}
        line x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(TOP + plot_h()) stroke="#888" {}
        @for v in [0.0, max / 2.0, max] {
            text x=(LEFT - 6.0) y=(y_of(v, max) + 4.0) text-anchor="end" font-size="11" { (fmt(v)) }
            line x1=(LEFT) y1=(y_of(v, max)) x2=(W - RIGHT) y2=(y_of(v, max)) stroke="#eee" {}
        }
        @for (i, label) in labels.iter().enumerate() {
            @if i % step == 0 {
                text x=(LEFT + slot * (i as f64 + 0.5)) y=(H - BOTTOM + 16.0) text-anchor="middle" font-size="11" { (label) }
            }
        }
    }
}

fn legend<V>(series: &[Series<'_, V>]) -> Markup {
    html! {
        p.legend {
            @for s in series {
                span { span.swatch style={ "background:" (s.color) } {} (s.name) }
            }
        }
    }
}

/// Stacked bars: one bar per label, one segment per series (counts).
pub(crate) fn stacked(title: &str, labels: &[String], series: &[Series<'_, u64>]) -> Markup {
    let totals: Vec<u64> = (0..labels.len())
        .map(|i| {
            series
                .iter()
                .map(|s| s.values.get(i).copied().unwrap_or(0))
                .sum()
        })
        .collect();
    let max = nice(totals.iter().copied().max().unwrap_or(0) as f64);
    let slot = plot_w() / labels.len().max(1) as f64;
    let width = (slot * 0.8).max(1.0);
    html! {
        figure {
            svg.chart viewBox={ "0 0 " (W) " " (H) } role="img" aria-label=(title) xmlns="http://www.w3.org/2000/svg" {
                (frame(labels, max, &|v| format!("{v:.0}")))
                @for (i, label) in labels.iter().enumerate() {
                    @let mut base = 0u64;
                    @for s in series {
                        @let v = s.values.get(i).copied().unwrap_or(0);
                        @if v > 0 {
                            @let y0 = y_of(base as f64, max);
                            @let y1 = y_of((base + v) as f64, max);
                            rect x=(LEFT + slot * i as f64 + (slot - width) / 2.0) y=(y1) width=(width) height=((y0 - y1).max(0.5))
                                fill=(s.color) data-series=(s.name) data-label=(label) data-value=(v) {
                                title { (label) " " (s.name) ": " (v) }
                            }
                            ({ base += v; "" })
                        }
                    }
                }
            }
            figcaption { (title) }
            (legend(series))
        }
    }
}

/// Lines (rates or amounts; `None` is a gap), with an optional dashed threshold line.
pub(crate) fn lines(
    title: &str,
    labels: &[String],
    series: &[Series<'_, Option<f64>>],
    threshold: Option<f64>,
    fmt: &dyn Fn(f64) -> String,
) -> Markup {
    let top = series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied())
        .chain(threshold)
        .fold(0.0, f64::max);
    let max = nice(top);
    let slot = plot_w() / labels.len().max(1) as f64;
    let x_of = |i: usize| LEFT + slot * (i as f64 + 0.5);
    html! {
        figure {
            svg.chart viewBox={ "0 0 " (W) " " (H) } role="img" aria-label=(title) xmlns="http://www.w3.org/2000/svg" {
                (frame(labels, max, fmt))
                @if let Some(t) = threshold {
                    line.threshold x1=(LEFT) y1=(y_of(t, max)) x2=(W - RIGHT) y2=(y_of(t, max))
                        stroke="#c00" stroke-dasharray="6 4" data-value=(t) {
                        title { "threshold " (fmt(t)) }
                    }
                }
                @for s in series {
                    @let points: Vec<String> = s.values.iter().enumerate()
                        .filter_map(|(i, v)| v.map(|v| format!("{:.1},{:.1}", x_of(i), y_of(v, max))))
                        .collect();
                    polyline points=(points.join(" ")) fill="none" stroke=(s.color) stroke-width="2" {}
                    @for (i, v) in s.values.iter().enumerate() {
                        @if let Some(v) = v {
                            circle cx=(x_of(i)) cy=(y_of(*v, max)) r="3" fill=(s.color)
                                data-series=(s.name) data-value=(v) {
                                title { (labels.get(i).map_or("", String::as_str)) " " (s.name) ": " (fmt(*v)) }
                            }
                        }
                    }
                }
            }
            figcaption { (title) }
            (legend(series))
        }
    }
}

/// Bars of one series (counts of a histogram, or amounts), with an optional marked bar.
pub(crate) fn bars(
    title: &str,
    labels: &[String],
    values: &[f64],
    color: &str,
    marked: Option<usize>,
    fmt: &dyn Fn(f64) -> String,
) -> Markup {
    let max = nice(values.iter().copied().fold(0.0, f64::max));
    let slot = plot_w() / labels.len().max(1) as f64;
    let width = (slot * 0.8).max(1.0);
    html! {
        figure {
            svg.chart viewBox={ "0 0 " (W) " " (H) } role="img" aria-label=(title) xmlns="http://www.w3.org/2000/svg" {
                (frame(labels, max, fmt))
                @for (i, v) in values.iter().enumerate() {
                    @let y = y_of(*v, max);
                    rect x=(LEFT + slot * i as f64 + (slot - width) / 2.0) y=(y) width=(width)
                        height=((TOP + plot_h() - y).max(0.0))
                        fill=(if marked == Some(i) { "#c60" } else { color })
                        data-label=(labels.get(i).map_or("", String::as_str)) data-value=(v) {
                        title { (labels.get(i).map_or("", String::as_str)) ": " (fmt(*v)) }
                    }
                }
            }
            figcaption { (title) }
        }
    }
}
